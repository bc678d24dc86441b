package importer

import (
	"fmt"

	"github.com/collsim/collsim/scenarios"
)

// addSpan notes the bytes of key that the tensor reference r reaches.
func (it *item) addSpan(key string, r TensorRef) {
	lo, hi := r.Offset*r.ItemSize, r.Bytes()
	if it.span == nil {
		it.span = map[string][2]int64{}
	}
	if s, ok := it.span[key]; ok {
		lo, hi = min(lo, s[0]), max(hi, s[1])
	}
	it.span[key] = [2]int64{lo, hi}
}

// defaultChunks is a tensor's chunk count when the file gives none (the
// chunks knob's default).
const defaultChunks = 4

// views turns the byte spans of the kernels' tensors into chunk ranges.
// A storage two kernels reach through different views (x[:H] and x[H:],
// a slice of a buffer) is one tensor; a kernel that reaches part of it
// reads or writes only the chunks that part covers (T[LO:HI]), so kernels
// on disjoint parts do not race. The tensor gets the fewest chunks (4, 8,
// …, 64) at which every boundary of its parts falls on a chunk boundary;
// where none does, 64, and a part's range is rounded outwards (it may
// overlap a neighbour it does not: a race that is not there is possible,
// one that is is never lost). A whole tensor read by a kernel that writes
// more chunks than it has is given as its full range, which repeats.
func (b *builder) views(out []*item) {
	ext := map[string]int64{} // the furthest byte any kernel reaches
	for _, it := range out {
		for k, s := range it.span {
			ext[k] = max(ext[k], s[1])
		}
	}
	partial := func(k string, s [2]int64) bool { return s[0] > 0 || s[1] < ext[k] }
	bounds := map[string][]int64{}
	for _, it := range out {
		if it.kind != scenarios.OpKernel {
			continue
		}
		for _, k := range sortedKeys(it.span) {
			if s := it.span[k]; partial(k, s) {
				bounds[k] = append(bounds[k], s[0], s[1])
			}
		}
	}
	chunksOf := map[string]int{}
	for _, k := range sortedKeys(bounds) {
		t := b.tensors[k]
		if t == nil || t.chunks > 0 || ext[k] <= 0 {
			continue // a collective's tensor keeps its chunks: whole uses only
		}
		c := 64
		for _, try := range []int{4, 8, 16, 32, 64} {
			ok := true
			for _, x := range bounds[k] {
				ok = ok && (x*int64(try))%ext[k] == 0
			}
			if ok {
				c = try
				break
			}
		}
		if c != defaultChunks {
			t.chunks = c
		}
		chunksOf[k] = c
		b.sliced++
	}
	chunks := func(k string) int {
		if c, ok := chunksOf[k]; ok {
			return c
		}
		if t := b.tensors[k]; t != nil && t.chunks > 0 {
			return t.chunks
		}
		return defaultChunks
	}
	rangeOf := func(k string, s [2]int64) (int, int) {
		c, e := int64(chunks(k)), ext[k]
		lo := s[0] * c / e
		hi := (s[1]*c + e - 1) / e
		return int(lo), int(max(hi, lo+1))
	}
	for _, it := range out {
		if it.kind != scenarios.OpKernel || it.span == nil {
			continue
		}
		it.rdSfx, it.wrSfx = make([]string, len(it.reads)), make([]string, len(it.writes))
		width := 0 // the most chunks a write of the kernel spans
		for i, k := range it.writes {
			n := chunks(k)
			if s, ok := it.span[k]; ok && chunksOf[k] > 0 && partial(k, s) {
				lo, hi := rangeOf(k, s)
				it.wrSfx[i], n = fmt.Sprintf("[%d:%d]", lo, hi), hi-lo
			}
			width = max(width, n)
		}
		for i, k := range it.reads {
			s, ok := it.span[k]
			switch {
			case ok && chunksOf[k] > 0 && partial(k, s):
				lo, hi := rangeOf(k, s)
				it.rdSfx[i] = fmt.Sprintf("[%d:%d]", lo, hi)
			case chunks(k) < width:
				it.rdSfx[i] = fmt.Sprintf("[0:%d]", chunks(k))
			}
		}
	}
}

// withSuffix joins names and their chunk ranges ("" for none).
func withSuffix(names, sfx []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		if i < len(sfx) {
			out[i] += sfx[i]
		}
	}
	return out
}
