package gpu

// Pool is one resource of one rank that kernels draw from: the rank's SMs,
// or the one slot of an Exclusive key (NCCL's one-kernel-at-a-time worst
// case is a pool of capacity one). Holders and waiters are task ids, in
// the order they took or asked. Package ranks decides what a kernel needs
// and when it asks (ranks/residency.go says the rule).
type Pool struct {
	Rank int
	Key  string // "" for the rank's SMs, else the Exclusive key
	Cap  int
	Free int
	// Holders hold a share, in acquisition order; Waiters wait for one.
	Holders []int32
	Waiters []int32
	// Contended: the kernels that can draw from the pool need more than it
	// has, summed over the whole run; an uncontended pool never makes a
	// kernel wait, so its hand-outs commute (DPOR leaves them out).
	Contended bool
}

// NewPool returns an unused pool of capacity n.
func NewPool(rank int, key string, n int) Pool {
	return Pool{Rank: rank, Key: key, Cap: n, Free: n}
}

// Take gives task n of the pool's units (the caller checked they are
// free).
func (p *Pool) Take(task int32, n int) {
	p.Free -= n
	p.Holders = append(p.Holders, task)
}

// Wait queues task until the pool is next released.
func (p *Pool) Wait(task int32) { p.Waiters = append(p.Waiters, task) }

// Release returns the n units task holds (nothing if it holds none) and
// hands back every waiter, clearing the queue: each tries again. The
// slice it returns is valid until the next Wait.
func (p *Pool) Release(task int32, n int) []int32 {
	for i, h := range p.Holders {
		if h == task {
			p.Holders = append(p.Holders[:i], p.Holders[i+1:]...)
			p.Free += n
			break
		}
	}
	ws := p.Waiters
	p.Waiters = p.Waiters[:0]
	return ws
}
