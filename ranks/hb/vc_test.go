package hb

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// Both clock forms (sparse, and dense for small worlds) behave like a naive
// dense array under any sequence of ticks, joins and clones (raft's
// quorum/quick_test.go habit: compare with a deliberately naive reference).
func TestSparseVCMatchesDense(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const lanes = 6
		sparse := make([]*VC, lanes)
		dense := make([][]uint32, lanes)
		denseForm := rapid.Bool().Draw(t, "denseForm") // the VC's own dense form, or sparse
		for i := range lanes {
			sparse[i] = New(int32(i))
			if denseForm {
				sparse[i] = NewDense(int32(i), lanes)
			}
			dense[i] = make([]uint32, lanes)
			dense[i][i] = 1
		}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			a := rapid.IntRange(0, lanes-1).Draw(t, "a")
			b := rapid.IntRange(0, lanes-1).Draw(t, "b")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				sparse[a].Tick(int32(a))
				dense[a][a]++
			case 1:
				sparse[a].Join(sparse[b])
				for i := range lanes {
					dense[a][i] = max(dense[a][i], dense[b][i])
				}
			case 2:
				c := sparse[b].Clone()
				c.Tick(int32(b))
				sparse[a].Join(c)
				d := append([]uint32(nil), dense[b]...)
				d[b]++
				for i := range lanes {
					dense[a][i] = max(dense[a][i], d[i])
				}
			}
			for x := range lanes {
				for l := range lanes {
					if got, want := sparse[x].Get(int32(l)), dense[x][l]; got != want {
						t.Fatalf("clock %d lane %d: sparse %d, dense %d", x, l, got, want)
					}
				}
				for i := 1; i < len(sparse[x].e); i++ {
					if sparse[x].e[i-1].Lane >= sparse[x].e[i].Lane {
						t.Fatalf("clock %d not sorted: %v", x, sparse[x].e)
					}
				}
			}
		}
	})
}

// BenchmarkDenseJoin joins 16-lane dense clocks whose lanes are each
// ahead in one or the other at random, as the snapshots a barrier's waits
// acquire are.
func BenchmarkDenseJoin(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var vs, os []*VC
	for range 1024 {
		d, o := make([]uint32, 16), make([]uint32, 16)
		for i := range d {
			d[i], o[i] = r.Uint32N(100), r.Uint32N(100)
		}
		v, w := &VC{}, &VC{}
		v.SetDense(d)
		w.SetDense(o)
		vs, os = append(vs, v), append(os, w)
	}
	i := 0
	for b.Loop() {
		k := i & 1023
		copy(vs[k].d, os[(k+7)&1023].d) // a fresh left side
		vs[k].Join(os[k])
		i++
	}
}
