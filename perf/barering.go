package perf

import (
	"fmt"

	"github.com/collsim/collsim/sim"
)

// BareRing is the ring all-reduce written plainly, as a baseline for the
// simulator's: n ranks, each with n segments of one uint64, and one event
// on the same queue the simulator uses (sim.Engine) per hop, as NCCL's
// runRing (src/device/all_reduce.h) passes a segment from rank to rank:
// n−1 hops that add the receiver's input (reduce-scatter), then n−1 that
// copy the sum (all-gather). No clocks, no race checks, no provenance, no
// hang analysis: what is left is the work any simulator of this ring does.
// It returns the outputs (out[r][s]) so a caller can check them.
func BareRing(n int) [][]uint64 { return newBareRing(n).run() }

// bareRing is BareRing's inputs and outputs, allocated (newBareRing)
// apart from running the ring (run), so a row can time the ring alone.
type bareRing struct {
	n       int
	in, out [][]uint64
}

func newBareRing(n int) *bareRing {
	in := make([][]uint64, n)
	out := make([][]uint64, n)
	for r := range n {
		in[r] = make([]uint64, n)
		out[r] = make([]uint64, n)
		for s := range n {
			in[r][s] = uint64(r*n + s)
		}
	}
	return &bareRing{n: n, in: in, out: out}
}

// run is BareRing's event loop.
func (b *bareRing) run() [][]uint64 {
	n, in, out := b.n, b.in, b.out
	type msg struct {
		seg  int
		hops int // hops made so far, 1 when it arrives at the first receiver
		val  uint64
	}
	inbox := make([][]msg, n) // messages from rank r−1, oldest first
	const hop = sim.Time(1)
	e := sim.NewEngine(sim.Timed, nil)
	send := func(from int, m msg) {
		to := (from + 1) % n
		inbox[to] = append(inbox[to], m)
		e.Schedule(e.Now()+hop, uint64(to), int32(to))
	}
	for r := range n { // every rank starts by sending its own segment r
		send(r, msg{seg: r, hops: 1, val: in[r][r]})
	}
	for {
		it, ok := e.Next()
		if !ok {
			break
		}
		r := int(it.Actor)
		m := inbox[r][0]
		inbox[r] = inbox[r][1:]
		switch {
		case m.hops < n-1: // recvReduceSend
			m.val += in[r][m.seg]
		case m.hops == n-1: // recvReduceCopySend: the sum is complete here
			m.val += in[r][m.seg]
			out[r][m.seg] = m.val
		default: // recvCopySend, and the final recv
			out[r][m.seg] = m.val
		}
		if m.hops < 2*n-2 {
			m.hops++
			send(r, m)
		}
	}
	return out
}

// checkBareRing reports whether every rank holds the sum over ranks of
// every segment.
func checkBareRing(out [][]uint64) error {
	n := len(out)
	for s := range n {
		var want uint64
		for r := range n {
			want += uint64(r*n + s)
		}
		for r := range n {
			if out[r][s] != want {
				return fmt.Errorf("bare ring: rank %d segment %d = %d, want %d", r, s, out[r][s], want)
			}
		}
	}
	return nil
}
