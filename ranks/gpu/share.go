package gpu

import "github.com/collsim/collsim/sim"

// Share is the GPU the concurrency model divides: its SMs, its achieved
// bandwidth, and the rules that give a kernel without an explicit Load one
// from its kind and duration.
type Share struct {
	SMs int     // streaming multiprocessors
	HBM float64 // achieved HBM bandwidth, bytes/s
	// Keep is the share (per mille) of the SMs it wants that a kernel gets
	// however many kernels started before it (Profile.Share).
	Keep int64
	// GEMMLat and GEMMBW are the profile's decode-GEMM fit (GEMMTime):
	// a GEMM's bytes are (duration − GEMMLat) × GEMMBW. Without them,
	// (duration − KStart) × HBM.
	GEMMLat sim.Time
	GEMMBW  float64
	KStart  sim.Time
	// GEMMBlockBytes, GEMMTileN, GEMMTileM and GEMMMaxBlocks give a
	// decode GEMM's grid: max(n / GEMMTileN, weight bytes /
	// GEMMBlockBytes) blocks for every GEMMTileM rows of m, at most
	// GEMMMaxBlocks, one per SM (GEMMLoad).
	GEMMBlockBytes int64
	GEMMTileN      int64
	GEMMTileM      int64
	GEMMMaxBlocks  int
	// EltBlockElems is how many elements one block of an elementwise
	// kernel covers (PyTorch's vectorized elementwise kernels: 128 threads
	// × 4 elements × 2); its blocks spread over as many SMs.
	EltBlockElems int64
}

// Load is what one kernel asks of its GPU while it runs alone: the SMs its
// grid fills and the HBM bytes it moves. The zero Load takes no share: the
// kernel runs at its own speed whatever runs beside it.
type Load struct {
	SMs   int
	Bytes int64
}

// GEMMLoad is the load of an m×k by k×n bf16 GEMM at decode shapes.
func (s *Share) GEMMLoad(m, k, n int64) Load {
	w := 2 * k * n
	b := max(ceilDiv(n, max(s.GEMMTileN, 1)), ceilDiv(w, max(s.GEMMBlockBytes, 1)))
	b *= max(1, ceilDiv(m, max(s.GEMMTileM, 1)))
	return Load{SMs: s.gemmSMs(b), Bytes: 2*(m*k+m*n) + w}
}

// gemmSMs is the SMs a GEMM grid of b blocks holds: one per block, and a
// full grid (GEMMMaxBlocks) holds them all. Measured: a kernel launched
// behind a 128-block GEMM on the H200's 132 SMs did not get the 4 left
// over (validation/concurrency.py "order": a 24-block GEMM started 4 µs
// after it ended 4.1 µs after it; in aux-stream-lifetime's graph the
// router ends 2 µs after the shared up GEMM it overlaps).
func (s *Share) gemmSMs(b int64) int {
	if b >= int64(max(s.GEMMMaxBlocks, 1)) {
		return s.SMs
	}
	return int(min(b, int64(s.SMs)))
}

// EltLoad is the load of an elementwise bf16 kernel over elems elements
// that moves bytes.
func (s *Share) EltLoad(elems, bytes int64) Load {
	b := ceilDiv(max(elems, 1), max(s.EltBlockElems, 1))
	return Load{SMs: int(min(b, int64(s.SMs))), Bytes: bytes}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Derive is the load of a kernel of kind whose micro-op lasts d alone,
// for a kernel that names none: a GEMM's from the bytes its duration
// moves under the profile's fit, an elementwise kernel's likewise at HBM
// speed; any other kind takes no share.
func (s *Share) Derive(kind string, d sim.Time) Load {
	switch kind {
	case "gemm", "moe", "linear":
		var w int64
		if s.GEMMBW > 0 {
			w = int64(float64(max(0, d-s.GEMMLat)) * s.GEMMBW / 1e9)
		} else {
			w = int64(float64(max(0, d-s.KStart)) * s.HBM / 1e9)
		}
		return Load{SMs: s.gemmSMs(max(1, ceilDiv(w, max(s.GEMMBlockBytes, 1)))), Bytes: w}
	case "add", "mul", "elementwise", "copy":
		bytes := int64(float64(max(0, d-s.KStart)) * s.HBM / 1e9)
		return s.EltLoad(bytes/6, bytes) // two bf16 reads and a write per element
	}
	return Load{}
}
