package format

import (
	"strconv"
	"strings"
)

// SplitChunkRange reads a kernel's read or write of part of a tensor,
// TENSOR[LO:HI]: chunks LO ≤ c < HI (a view of its storage: a slice, one
// half of a buffer two streams share). ranged is false for a plain name,
// and for any other bracket (a symmetric allocation's slot, ALLOC[SLOT]),
// which is returned whole. ok is false for a range that is not two
// integers 0 ≤ LO < HI ≤ MaxTensorChunks.
func SplitChunkRange(entry string) (name string, lo, hi int, ranged, ok bool) {
	i := strings.IndexByte(entry, '[')
	if i < 0 || !strings.HasSuffix(entry, "]") || strings.IndexByte(entry, '@') >= 0 {
		return entry, 0, 0, false, true
	}
	a, b, found := strings.Cut(entry[i+1:len(entry)-1], ":")
	if !found {
		return entry, 0, 0, false, true
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || x < 0 || y <= x || y > MaxTensorChunks {
		return entry[:i], 0, 0, true, false
	}
	return entry[:i], x, y, true, true
}

// KernelSpan is the chunks [lo, hi) of tensor t that a kernel's read or
// write entry names under cfg: the range it gives, else every chunk.
func KernelSpan(entry string, t *TensorSpec, cfg Config) (lo, hi int) {
	if _, l, h, ranged, ok := SplitChunkRange(entry); ranged && ok {
		return l, h
	}
	return 0, t.ChunksIn(cfg)
}

// baseName is the tensor a kernel entry names, without its chunk range.
func baseName(entry string) string {
	name, _, _, _, _ := SplitChunkRange(entry)
	return name
}
