package cachealloc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks/cachealloc"
)

// refAlloc is a small reference implementation of the same policy, written
// another way: each segment is a map of 512-byte pages, each free, pending
// (freed with record_stream uses outstanding) or owned by a tensor. A free
// block is a maximal run of free pages (merging is implicit); best fit is
// the shortest run that fits, lowest address first; the split rule is
// PyTorch's should_split.
type refAlloc struct {
	caching bool
	segs    []*refSeg
	next    int64
	pool    int
	pools   int
	history []refTensor // every tensor, in allocation order
}

type refSeg struct {
	base     int64
	stream   string
	small    bool
	pool     int
	released bool
	pages    []int // 0 free; -1 pending; -2 pending, freed during a capture; id+1 owned
	uses     map[int][]string
}

type refTensor struct {
	seg       int
	ptr, size int64 // requested bytes
	name      string
}

const page = 512

func newRef(caching bool) *refAlloc { return &refAlloc{caching: caching, next: 0x7f00_0000_0000} }

func (r *refAlloc) malloc(id int, stream string, bytes int64) (seg int, off, size int64) {
	n := cachealloc.RoundSize(bytes)
	small := n <= cachealloc.AllocSmallSize
	bestSeg, bestStart, bestLen := -1, 0, 0
	if r.caching {
		for si, s := range r.segs {
			if s.released || s.stream != stream || s.small != small || s.pool != r.pool {
				continue
			}
			for i := 0; i < len(s.pages); {
				if s.pages[i] != 0 {
					i++
					continue
				}
				j := i
				for j < len(s.pages) && s.pages[j] == 0 {
					j++
				}
				l := j - i
				if int64(l)*page >= n && (bestSeg < 0 || l < bestLen || l == bestLen && s.base+int64(i)*page < r.segs[bestSeg].base+int64(bestStart)*page) {
					bestSeg, bestStart, bestLen = si, i, l
				}
				i = j
			}
		}
	}
	if bestSeg < 0 {
		sz := cachealloc.SegmentSize(n)
		if !r.caching {
			sz = n
		}
		r.segs = append(r.segs, &refSeg{base: r.next, stream: stream, small: small, pool: r.pool, pages: make([]int, sz/page), uses: map[int][]string{}})
		r.next += (sz + 2<<20 - 1) / (2 << 20) * (2 << 20)
		bestSeg, bestStart, bestLen = len(r.segs)-1, 0, int(sz/page)
	}
	take := bestLen
	rest := int64(bestLen)*page - n
	if r.caching && (small && rest >= 512 || !small && rest > cachealloc.AllocSmallSize) {
		take = int(n / page)
	}
	s := r.segs[bestSeg]
	for i := bestStart; i < bestStart+take; i++ {
		s.pages[i] = id + 1
	}
	r.history = append(r.history, refTensor{seg: bestSeg, ptr: int64(bestStart) * page, size: bytes, name: fmt.Sprint("t", id)})
	return bestSeg, int64(bestStart) * page, int64(take) * page
}

func (r *refAlloc) find(id int) (*refSeg, int) {
	for si, s := range r.segs {
		for _, o := range s.pages {
			if o == id+1 {
				return s, si
			}
		}
	}
	panic("not live")
}

func (r *refAlloc) free(id int, uses []string) {
	s, _ := r.find(id)
	to := 0
	switch {
	case !r.caching:
		s.released = true
	case len(uses) > 0:
		to = -1
		if r.pool != 0 {
			to = -2 // its events are recorded only after the capture
		}
	}
	for i, o := range s.pages {
		if o == id+1 {
			s.pages[i] = to
		}
	}
}

func (r *refAlloc) sync() {
	for _, s := range r.segs {
		for i, o := range s.pages {
			if o == -1 {
				s.pages[i] = 0
			}
		}
	}
}

func (r *refAlloc) emptyCache() {
	r.sync()
	for _, s := range r.segs {
		if s.pool != 0 {
			continue
		}
		all := true
		for _, o := range s.pages {
			all = all && o == 0
		}
		s.released = s.released || all
	}
}

// overlaps names the earlier tensors of the same segment whose requested
// range meets the last one's.
func (r *refAlloc) overlaps() []string {
	t := r.history[len(r.history)-1]
	var out []string
	for _, o := range r.history[:len(r.history)-1] {
		if o.seg == t.seg && o.ptr < t.ptr+t.size && t.ptr < o.ptr+o.size {
			out = append(out, o.name)
		}
	}
	return append(out, t.name)
}

// The allocator agrees with the reference on every placement (segment,
// offset, block size) and on which earlier tensors each new one overlaps,
// over random malloc / free / record_stream / synchronize / empty_cache /
// capture sequences on two streams; two live tensors never overlap.
func TestAllocatorMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		caching := rapid.Float64().Draw(t, "p") < 0.85
		a := cachealloc.New(0, caching)
		ref := newRef(caching)
		streams := []string{"main", "aux"}
		sizes := []int64{1, 100, 512, 4096, 4097, 64 << 10, 1 << 20, 1<<20 + 1, 3 << 20, 9 << 20, 11 << 20}
		type live struct {
			id     int
			b      *cachealloc.Block
			stream string
			uses   []string
		}
		var lives []live
		id := 0
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 4 || len(lives) == 0:
				s := streams[rapid.IntRange(0, 1).Draw(t, "stream")]
				size := sizes[rapid.IntRange(0, len(sizes)-1).Draw(t, "size")]
				if rapid.Bool().Draw(t, "odd") {
					size += int64(rapid.IntRange(0, 3000).Draw(t, "extra"))
				}
				id++
				blk, err := a.Malloc(fmt.Sprint("t", id), s, size)
				require.NoError(t, err)
				seg, off, bsize := ref.malloc(id, s, size)
				require.Equal(t, []int64{int64(seg), off, bsize}, []int64{int64(blk.Seg.ID), blk.Ptr - blk.Seg.Base, blk.Bytes}, "malloc t%d (%d B on %s): %v", id, size, s, a.Log)
				require.Equal(t, ref.overlaps(), blk.Tensors)
				for _, l := range lives {
					o := l.b
					require.False(t, o.Seg == blk.Seg && o.Ptr < blk.Ptr+blk.Bytes && blk.Ptr < o.Ptr+o.Bytes, "live t%d and t%d overlap", l.id, id)
				}
				lives = append(lives, live{id: id, b: blk, stream: s})
			case op <= 7:
				i := rapid.IntRange(0, len(lives)-1).Draw(t, "which")
				l := lives[i]
				if rapid.Bool().Draw(t, "record_stream") {
					other := streams[0]
					if l.stream == other {
						other = streams[1]
					}
					require.NoError(t, a.RecordStream(l.b, other))
					l.uses = append(l.uses, other)
				}
				require.NoError(t, a.Free(l.b))
				ref.free(l.id, l.uses)
				require.ErrorIs(t, a.Free(l.b), cachealloc.ErrAlloc, "double free")
				lives = append(lives[:i], lives[i+1:]...)
			case op == 8:
				if rapid.Bool().Draw(t, "empty") {
					a.EmptyCache()
					ref.emptyCache()
				} else {
					a.Synchronize()
					ref.sync()
				}
			default:
				if ref.pool == 0 {
					a.BeginCapture()
					ref.pools++
					ref.pool = ref.pools
				} else {
					a.EndCapture()
					ref.pool = 0
					for _, s := range ref.segs {
						for i, o := range s.pages {
							if o == -2 {
								s.pages[i] = -1
							}
						}
					}
				}
			}
		}
	})
}
