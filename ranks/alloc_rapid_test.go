package ranks_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Allocator invariants over random malloc / free / record_stream /
// synchronize sequences: two live tensors never share a block; a tensor's
// block belongs to the stream it was allocated on, is in the request's
// pool and is at least its rounded size; a block is reused only after its
// previous tensor was freed, and never while a record_stream use is
// outstanding (until a synchronize) or without caching.
func TestAllocatorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		caching := rapid.Bool().Draw(t, "caching")
		w := ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
		a := w.NewAllocator(0, caching)
		streams := []string{"main", "aux"}
		sizes := []int64{100, 512, 4096, 4097, 1 << 20, 1<<20 + 1, 3 << 20}
		type live struct {
			b      *ranks.Buffer
			stream string
			size   int64
		}
		var lives []live
		deferred := map[*ranks.Block]bool{} // freed with record_stream uses, not yet synchronized
		released := map[*ranks.Block]bool{} // freed without caching
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op == 0 || len(lives) == 0:
				s := streams[rapid.IntRange(0, 1).Draw(t, "stream")]
				size := sizes[rapid.IntRange(0, len(sizes)-1).Draw(t, "size")]
				chunks := rapid.IntRange(1, 3).Draw(t, "chunks")
				b, err := a.Malloc("t", s, size, chunks)
				require.NoError(t, err)
				blk := b.Block
				require.Equal(t, s, blk.Stream)
				require.GreaterOrEqual(t, blk.Bytes, ranks.RoundSize(size))
				require.Equal(t, ranks.RoundSize(size) <= ranks.AllocSmallSize, blk.Bytes <= ranks.AllocSmallSize, "pool")
				require.False(t, deferred[blk], "reused a block with a record_stream use outstanding")
				require.False(t, released[blk], "reused a block released without caching")
				for _, l := range lives {
					require.NotSame(t, l.b.Block, blk, "two live tensors share a block")
				}
				lives = append(lives, live{b, s, size})
			case op == 1:
				i := rapid.IntRange(0, len(lives)-1).Draw(t, "free")
				l := lives[i]
				blk := l.b.Block
				uses := rapid.Bool().Draw(t, "record_stream")
				if uses {
					require.NoError(t, a.RecordStream(l.b, streams[1-indexOf(streams, l.stream)]))
				}
				require.NoError(t, a.Free(l.b))
				require.Error(t, a.Free(l.b), "double free")
				if !caching {
					released[blk] = true
				} else if uses {
					deferred[blk] = true
				}
				lives = append(lives[:i], lives[i+1:]...)
			case op == 2:
				a.Synchronize()
				clear(deferred)
			default:
				// A malloc of the same request right after a free on the
				// same stream reuses a cached block (best fit) when caching.
				i := rapid.IntRange(0, len(lives)-1).Draw(t, "refree")
				l := lives[i]
				blk := l.b.Block
				require.NoError(t, a.Free(l.b))
				b, err := a.Malloc("again", l.stream, l.size, l.b.Chunks())
				require.NoError(t, err)
				if caching {
					// best fit: the block just freed, or an older one no larger
					require.LessOrEqual(t, b.Block.Bytes, blk.Bytes)
					require.Greater(t, len(b.Block.Tensors), 1, "a free fitting block exists, so none is created")
				} else {
					require.NotSame(t, blk, b.Block)
				}
				lives[i] = live{b, l.stream, l.size}
			}
		}
	})
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}
