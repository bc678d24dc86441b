package ranks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
)

// TestSteppedConnection: two kernels on rank 0 each send one step into a
// connection to rank 1, where two kernels each receive one (ranks/
// stepconn.go). A queue delivers both messages whatever runs when. A
// stepped connection is a queue only while one kernel at a time uses each
// end: two senders resident at once both load the send counter at 0, both
// fill step 0, and the one completing last stores 1 over the other's 1 (a
// lost increment). Receivers resident at once lose the same increment and
// both read step 0: the calls complete (with each other's data where they
// differ). Receivers one after the other do not: the second waits for step
// 1, which no sender fills: a hang (rocm/rccl #2179's deadlock).
func TestSteppedConnection(t *testing.T) {
	for _, tc := range []struct {
		stepped, sendTogether, recvTogether bool
		want                                string // the worst finding's kind, or "" for none
	}{
		{false, true, true, ranks.KindRace},     // the sends race, and so do the receives
		{false, true, false, ranks.KindRace},    // the sends race
		{false, false, false, ""},               // a queue, used in order
		{true, false, false, ""},                // one kernel at a time on each end: a queue
		{true, true, true, ranks.KindRace},      // both ends lose the same increment; each receiver reads step 0 just after its own sender filled it
		{true, true, false, ranks.KindHang},     // only the senders do: the second receiver waits for step 1
		{true, false, true, ranks.KindMismatch}, // only the receivers do: both read step 0; step 1 is sent and never read
	} {
		name := fmt.Sprintf("stepped=%v/send-together=%v/recv-together=%v", tc.stepped, tc.sendTogether, tc.recvTogether)
		t.Run(name, func(t *testing.T) {
			w := newWorld(2, false)
			f := w.NewFifo("c:0→1", 0, 1, 8)
			f.Stepped = tc.stepped
			prog := func(r int, together bool, in func(i int) ranks.Instr) {
				p := &ranks.Program{Streams: []string{"s0", "s1"}}
				for i := range 2 {
					stream := 0
					if together {
						stream = i
					}
					k := &ranks.KernelSpec{Name: fmt.Sprintf("k%d", i), Coll: fmt.Sprintf("c%d", i), Instrs: []ranks.Instr{in(i)}}
					p.Ops = append(p.Ops, launch(stream, k))
				}
				w.SetProgram(r, p)
			}
			prog(0, tc.sendTogether, func(i int) ranks.Instr {
				b := w.Alloc(0, fmt.Sprintf("x%d", i), 64, 1)
				return ranks.Instr{Op: ranks.OpSend, Fifo: f, N: 1, Srcs: []ranks.Src{{Buf: b, Coef: 1}}, Dur: 50000, Peer: 1}
			})
			prog(1, tc.recvTogether, func(i int) ranks.Instr {
				b := w.Alloc(1, fmt.Sprintf("y%d", i), 64, 1)
				return ranks.Instr{Op: ranks.OpRecv, Fifo: f, N: 1, Dst: b, Dur: 50000, Peer: 0}
			})
			res, err := w.Run()
			require.NoError(t, err)
			require.Equal(t, tc.want == ranks.KindHang, res.Hung)
			rank := map[string]int{"": 0, ranks.KindRace: 1, ranks.KindMismatch: 2, ranks.KindCorruption: 3, ranks.KindDropped: 4, ranks.KindHang: 5}
			worst := ""
			for _, f := range res.Findings {
				if rank[f.Kind] > rank[worst] {
					worst = f.Kind
				}
			}
			require.Equal(t, tc.want, worst)
			if tc.want == ranks.KindHang {
				require.Contains(t, res.Findings[len(res.Findings)-1].Message, "recv on c:0→1 (its peer has not filled this step)")
			}
		})
	}
}
