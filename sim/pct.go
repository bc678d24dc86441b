package sim

import "math/rand/v2"

// PCT is probabilistic concurrency testing for Untimed mode (Burckhardt et
// al., ASPLOS 2010, Algorithm 1): every actor gets a random priority ≥ d
// when it first becomes pending; the engine runs the pending item of
// highest priority; at d-1 random change points k₁…k_{d-1} in [1, steps]
// the actor just chosen drops to priority d-i. It never jitters a duration
// or skews a rank (Choose is always nominal): time orders nothing in
// Untimed mode.
type PCT struct {
	rng    *rand.Rand
	d      int
	prio   map[int32]uint64
	change []int // change points, by index i: step k_i lowers to d-1-i
	step   int
}

// NewPCT returns the PCT chooser seeded with seed, for bug depth depth (≥ 1)
// and about steps scheduling decisions per run (PCT's k: the count of a
// nominal untimed run).
func NewPCT(seed uint64, depth, steps int) *PCT {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	c := &PCT{rng: rng, d: max(depth, 1), prio: map[int32]uint64{}}
	for range c.d - 1 {
		c.change = append(c.change, 1+rng.IntN(max(steps, 1)))
	}
	return c
}

// Choose implements [Chooser]: always nominal.
func (c *PCT) Choose(Decision, int) int { return 0 }

// ChooseItem implements [Chooser].
func (c *PCT) ChooseItem(items []Item) int {
	best, bestP := 0, uint64(0)
	for k, it := range items {
		p, ok := c.prio[it.Actor]
		if !ok {
			p = uint64(c.d) + c.rng.Uint64()>>8
			c.prio[it.Actor] = p
		}
		if k == 0 || p > bestP {
			best, bestP = k, p
		}
	}
	c.step++
	for i, k := range c.change {
		if k == c.step {
			c.prio[items[best].Actor] = uint64(c.d - 1 - i)
		}
	}
	return best
}

// Counter is the nominal chooser that counts its item choices: run once in
// Untimed mode, it gives PCT's steps.
type Counter struct{ N int }

// Choose implements [Chooser].
func (c *Counter) Choose(Decision, int) int { return 0 }

// ChooseItem implements [Chooser].
func (c *Counter) ChooseItem([]Item) int { c.N++; return 0 }
