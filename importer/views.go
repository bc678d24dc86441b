package importer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// prog is the elements of a storage a view reaches: count of them, every
// step-th from start, each of size bytes.
type prog struct {
	start, step, count, size int64
	// rows > 0: rows of count consecutive elements, rowStride apart (a
	// column slice: layoutBox); step is then 1.
	rows, rowStride int64
}

// addSpan notes the bytes of key that the tensor reference r reaches, and
// which elements.
func (it *item) addSpan(key string, r TensorRef) {
	lo, hi := r.Offset*r.ItemSize, r.Bytes()
	if it.span == nil {
		it.span = map[string][2]int64{}
		it.progs = map[string][]prog{}
	}
	pr := prog{start: r.Offset, step: 1, count: r.span(), size: r.ItemSize}
	switch {
	case r.Step > 1 && r.span() > 0:
		pr.step, pr.count = r.Step, (r.span()-1)/r.Step+1
	case r.Rows > 0:
		pr.count, pr.rows, pr.rowStride = r.Width, r.Rows, r.RowStride
	}
	it.progs[key] = append(it.progs[key], pr)
	if s, ok := it.span[key]; ok {
		lo, hi = min(lo, s[0]), max(hi, s[1])
	}
	it.span[key] = [2]int64{lo, hi}
}

// defaultChunks is a tensor's chunk count when the file gives none (the
// chunks knob's default).
const defaultChunks = 4

// lanes gives the positions [lo, hi) in each lane that p reaches, with
// element e in lane e mod m at position e div m (p.step divides m): a
// strided view x[1::2] is lane 1 of 2, whole; x[:H] a part of every lane.
func (p prog) lanes(m int64) [][3]int64 {
	var out [][3]int64
	q := m / p.step
	for l := p.start % p.step; l < m; l += p.step {
		d := (l - p.start) / p.step // exact: l ≡ start (mod step)
		i0 := ((d % q) + q) % q
		if i0 >= p.count {
			continue
		}
		i1 := i0 + (p.count-1-i0)/q*q
		out = append(out, [3]int64{l, (p.start + i0*p.step) / m, (p.start+i1*p.step)/m + 1})
	}
	return out
}

// laneMod is the lanes a storage is laid out in: the least common multiple
// of the steps of the strided views that reach it (x[::2] and x[1::2]: 2),
// so each such view is whole lanes and views of different lanes do not
// share a chunk; 1 where no view is strided, or where lanes do not fit (a
// step over 16, elements of different sizes).
func laneMod(ps []prog) int64 {
	m := int64(1)
	for _, p := range ps {
		if p.size != ps[0].size {
			return 1
		}
		if p.step > 1 {
			m = m / gcd(m, p.step) * p.step
			if m > 16 {
				return 1
			}
		}
	}
	return m
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// views turns the byte spans of the kernels' tensors into chunk ranges.
// A storage two kernels reach through different views (x[:H] and x[H:],
// a slice of a buffer) is one tensor; a kernel that reaches part of it
// reads or writes only the chunks that part covers (T[LO:HI]), so kernels
// on disjoint parts do not race. The tensor gets the fewest chunks (4 to
// 64) at which every boundary of its parts falls on a chunk boundary;
// where none does, 64, and a part's range is rounded outwards (it may
// overlap a neighbour it does not: a race that is not there is possible,
// one that is is never lost). A storage some view reaches with a stride
// (x[::2]) is laid out in lanes (laneMod), one some view reaches as rows
// of a matrix (qkv[:, :d]) by column blocks, then row blocks; each view a
// kernel reaches is its own run of chunks. A whole tensor read by a kernel
// that writes more chunks than it has is given as its full range, which
// repeats.
func (b *builder) views(out []*item) {
	ext := map[string]int64{} // the furthest byte any kernel reaches
	for _, it := range out {
		for k, s := range it.span {
			ext[k] = max(ext[k], s[1])
		}
	}
	partial := func(k string, s [2]int64) bool { return s[0] > 0 || s[1] < ext[k] }
	// Strided views: their storage is laid out in lanes (laneMod), each
	// lane its own run of chunks.
	all := map[string][]prog{}
	for _, it := range out {
		if it.kind != scenarios.OpKernel {
			continue
		}
		for _, k := range sortedKeys(it.progs) {
			all[k] = append(all[k], it.progs[k]...)
		}
	}
	lanes := map[string]int64{}   // key → lanes
	perLane := map[string]int64{} // key → chunks per lane
	for _, k := range sortedKeys(all) {
		ps := all[k]
		t := b.tensors[k]
		if t == nil || t.chunks > 0 || ext[k] <= 0 || ext[k]%ps[0].size != 0 {
			continue
		}
		strided := false
		for _, p := range ps {
			strided = strided || p.step > 1
		}
		m := laneMod(ps)
		if !strided || m == 1 {
			continue
		}
		span := (ext[k]/ps[0].size + m - 1) / m // positions per lane
		var bs []int64
		for _, p := range ps {
			for _, r := range p.lanes(m) {
				bs = append(bs, r[1], r[2])
			}
		}
		per := int64(64) / m
		for try := int64(1); try <= 64/m; try *= 2 {
			ok := true
			for _, x := range bs {
				ok = ok && (x*try)%span == 0
			}
			if ok {
				per = try
				break
			}
		}
		lanes[k], perLane[k] = m, per
		if c := int(m * per); c != defaultChunks {
			t.chunks = c
		}
		b.sliced++
	}
	// Column slices: a storage some view reaches as rows (qkv[:, :d]) is
	// laid out by columns, then rows: chunk cb·rb + r holds column block
	// cb's row block r, so column slices of the same rows share no chunk.
	type colLayout struct{ m, rows, kc, rb int64 }
	cols := map[string]colLayout{}
	for _, k := range sortedKeys(all) {
		ps := all[k]
		t := b.tensors[k]
		if lanes[k] > 0 || t == nil || t.chunks > 0 || ext[k] <= 0 {
			continue
		}
		m := int64(0)
		same := true
		for _, p := range ps {
			if p.size != ps[0].size {
				same = false
			}
			if p.rows > 0 {
				if m != 0 && m != p.rowStride {
					same = false
				}
				m = p.rowStride
			}
		}
		if m == 0 || !same {
			continue
		}
		rows := (ext[k]/ps[0].size + m - 1) / m
		var cb, rbs []int64
		for _, p := range ps {
			c0, c1, r0, r1 := p.rect(m)
			cb, rbs = append(cb, c0, c1), append(rbs, r0, r1)
		}
		fits := func(xs []int64, n, whole int64) bool {
			for _, x := range xs {
				if (x*n)%whole != 0 {
					return false
				}
			}
			return true
		}
		kc := int64(64)
		for try := int64(1); try <= 64; try++ {
			if fits(cb, try, m) {
				kc = try
				break
			}
		}
		rb := 64 / kc
		for try := int64(1); try <= 64/kc; try++ {
			if fits(rbs, try, rows) {
				rb = try
				break
			}
		}
		cols[k] = colLayout{m, rows, kc, rb}
		if c := int(kc * rb); c != defaultChunks {
			t.chunks = c
		}
		b.sliced++
	}
	colRanges := func(k string, ps []prog) (string, int) {
		l := cols[k]
		var rs [][2]int64
		for _, p := range ps {
			c0, c1, r0, r1 := p.rect(l.m)
			if c1 <= c0 || r1 <= r0 {
				continue
			}
			cbLo, cbHi := c0*l.kc/l.m, (c1*l.kc+l.m-1)/l.m
			rLo, rHi := r0*l.rb/l.rows, (r1*l.rb+l.rows-1)/l.rows
			for c := cbLo; c < max(cbHi, cbLo+1); c++ {
				rs = append(rs, [2]int64{c*l.rb + rLo, c*l.rb + max(rHi, rLo+1)})
			}
		}
		if len(rs) == 0 {
			return "", int(l.kc * l.rb)
		}
		return joinRanges(rs, l.kc*l.rb)
	}
	// laneRanges is the chunk ranges a kernel's views of key reach, as
	// "[a:b]|[c:d]" ("" for the whole tensor), and how many chunks.
	laneRanges := func(k string, ps []prog) (string, int) {
		m, per := lanes[k], perLane[k]
		span := (ext[k]/ps[0].size + m - 1) / m
		var rs [][2]int64
		for _, p := range ps {
			for _, r := range p.lanes(m) {
				lo, hi := r[0]*per+r[1]*per/span, r[0]*per+(r[2]*per+span-1)/span
				rs = append(rs, [2]int64{lo, max(hi, lo+1)})
			}
		}
		return joinRanges(rs, m*per)
	}
	bounds := map[string][]int64{}
	for _, it := range out {
		if it.kind != scenarios.OpKernel {
			continue
		}
		for _, k := range sortedKeys(it.span) {
			if lanes[k] > 0 || cols[k].m > 0 {
				continue
			}
			for _, p := range it.progs[k] {
				if lo, hi := p.bytes(); partial(k, [2]int64{lo, hi}) {
					bounds[k] = append(bounds[k], lo, hi)
				}
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
		for try := 4; try <= 64; try++ {
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
		if m, ok := lanes[k]; ok {
			return int(m * perLane[k])
		}
		if l, ok := cols[k]; ok {
			return int(l.kc * l.rb)
		}
		if c, ok := chunksOf[k]; ok {
			return c
		}
		if t := b.tensors[k]; t != nil && t.chunks > 0 {
			return t.chunks
		}
		return defaultChunks
	}
	// partsOf is the chunk ranges a kernel's views of key reach, each
	// view its own range (cat of parts 1 and 3 does not reach part 2).
	partsOf := func(k string, ps []prog) (string, int) {
		c, e := int64(chunks(k)), ext[k]
		var rs [][2]int64
		for _, p := range ps {
			blo, bhi := p.bytes()
			lo, hi := blo*c/e, (bhi*c+e-1)/e
			rs = append(rs, [2]int64{lo, max(hi, lo+1)})
		}
		return joinRanges(rs, c)
	}
	for _, it := range out {
		if it.kind != scenarios.OpKernel || it.span == nil {
			continue
		}
		it.rdSfx, it.wrSfx = make([]string, len(it.reads)), make([]string, len(it.writes))
		width := 0 // the most chunks a write of the kernel spans
		for i, k := range it.writes {
			n := chunks(k)
			if ps, ok := it.progs[k]; ok && lanes[k] > 0 {
				it.wrSfx[i], n = laneRanges(k, ps)
			} else if ok && cols[k].m > 0 {
				it.wrSfx[i], n = colRanges(k, ps)
			} else if ok && chunksOf[k] > 0 {
				it.wrSfx[i], n = partsOf(k, ps)
			}
			width = max(width, n)
		}
		for i, k := range it.reads {
			ps, ok := it.progs[k]
			switch {
			case ok && lanes[k] > 0:
				it.rdSfx[i], _ = laneRanges(k, ps)
			case ok && cols[k].m > 0:
				it.rdSfx[i], _ = colRanges(k, ps)
			case ok && chunksOf[k] > 0:
				it.rdSfx[i], _ = partsOf(k, ps)
			case chunks(k) < width:
				it.rdSfx[i] = fmt.Sprintf("[0:%d]", chunks(k))
			}
		}
	}
}

// bytes is the storage bytes [lo, hi) from p's first element to one past
// its last.
func (p prog) bytes() (lo, hi int64) {
	lo = p.start * p.size
	if p.count <= 0 {
		return lo, lo
	}
	if p.rows > 0 {
		return lo, (p.start + (p.rows-1)*p.rowStride + p.count) * p.size
	}
	return lo, (p.start + (p.count-1)*p.step + 1) * p.size
}

// rect is the columns [c0, c1) of rows [r0, r1) that p reaches in a
// storage of rows of m elements: a column slice exactly, a run within one
// row exactly, any other view the whole rows it touches.
func (p prog) rect(m int64) (c0, c1, r0, r1 int64) {
	if p.rows > 0 && p.rowStride == m && p.start%m+p.count <= m {
		return p.start % m, p.start%m + p.count, p.start / m, p.start/m + p.rows
	}
	lo, hi := p.bytes()
	a, b := lo/p.size, hi/p.size
	if b <= a {
		return 0, 0, a / m, a / m
	}
	ra, rb := a/m, (b-1)/m
	if ra == rb {
		return a % m, (b-1)%m + 1, ra, ra + 1
	}
	return 0, m, ra, rb + 1
}

// joinRanges sorts and merges chunk ranges that overlap or touch and
// writes them as "[a:b]|[c:d]", "" where they cover all of [0, whole);
// n is the chunks they cover.
func joinRanges(rs [][2]int64, whole int64) (sfx string, n int) {
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]int64
	for _, r := range rs {
		if m := len(merged); m > 0 && r[0] <= merged[m-1][1] {
			merged[m-1][1] = max(merged[m-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	if len(merged) == 1 && merged[0][0] == 0 && merged[0][1] == whole {
		return "", int(whole)
	}
	var parts []string
	for _, r := range merged {
		parts = append(parts, fmt.Sprintf("[%d:%d]", r[0], r[1]))
		n += int(r[1] - r[0])
	}
	return strings.Join(parts, "|"), n
}

// withSuffix joins names and their chunk ranges ("" for none; a strided
// view's "[a:b]|[c:d]" is one entry per range).
func withSuffix(names, sfx []string) []string {
	out := make([]string, 0, len(names))
	for i, n := range names {
		if i >= len(sfx) || sfx[i] == "" {
			out = append(out, n)
			continue
		}
		for _, r := range strings.Split(sfx[i], "|") {
			out = append(out, n+r)
		}
	}
	return out
}
