package collectives_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// p2pOp is one send (peer ≥ 0 as the destination) or receive of a
// rank's program, in issue order on one stream.
type p2pOp struct {
	send  bool
	peer  int
	name  string
	bytes int64
}

// runP2P runs the per-rank programs over one communicator of every rank.
func runP2P(t *testing.T, progs [][]p2pOp) *ranks.Result {
	t.Helper()
	hw := ranks.Profiles["b200"]
	n := len(progs)
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp}, sim.NewEngine(sim.Timed, nil))
	comm := collectives.NewComm(w, "world", iota(0, n, 1), collectives.SharedWorkspace, hw, 2)
	for r, ops := range progs {
		p := &ranks.Program{Streams: []string{"main"}}
		for k, op := range ops {
			buf := w.Alloc(r, fmt.Sprintf("b%d", k), op.bytes, 2)
			w.Init(buf, func(c int) uint64 { return uint64(1 + r + c) })
			var ks *ranks.KernelSpec
			var err error
			if op.send {
				ks, err = comm.Send(r, op.peer, op.name, buf)
			} else {
				ks, err = comm.Recv(r, op.peer, op.name, buf)
			}
			require.NoError(t, err)
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: ks})
		}
		w.SetProgram(r, p)
	}
	res, err := w.Run()
	require.NoError(t, err)
	return res
}

// A pair's first transfer sets its connection up, and the sender's setup
// waits for the receiver's first receive from it (src/transport.cc
// ncclTransportP2pSetup: bootstrapRecv from the send peer). After that a
// send fits in the connection's slots without a receiver.
func TestP2PConnectionSetup(t *testing.T) {
	snd := func(peer int, name string) p2pOp { return p2pOp{send: true, peer: peer, name: name, bytes: 8192} }
	rcv := func(peer int, name string) p2pOp { return p2pOp{peer: peer, name: name, bytes: 8192} }
	for _, tc := range []struct {
		name  string
		progs [][]p2pOp
		hang  bool
	}{
		{"send with no receive", [][]p2pOp{{snd(1, "a")}, {}}, true},
		{"matched", [][]p2pOp{{snd(1, "a")}, {rcv(0, "a")}}, false},
		{"both send first", [][]p2pOp{{snd(1, "a"), rcv(1, "b")}, {snd(0, "b"), rcv(0, "a")}}, true},
		{"one sends first", [][]p2pOp{{snd(1, "a"), rcv(1, "b")}, {rcv(0, "a"), snd(0, "b")}}, false},
		{"connected, then a send no receive takes", [][]p2pOp{{snd(1, "a"), snd(1, "c")}, {rcv(0, "a")}}, false},
		{"ring, every rank sends first", [][]p2pOp{
			{snd(1, "r"), rcv(3, "r")}, {snd(2, "r"), rcv(0, "r")}, {snd(3, "r"), rcv(1, "r")}, {snd(0, "r"), rcv(2, "r")}}, true},
		{"ring, odd ranks receive first", [][]p2pOp{
			{snd(1, "r"), rcv(3, "r")}, {rcv(0, "r"), snd(2, "r")}, {snd(3, "r"), rcv(1, "r")}, {rcv(2, "r"), snd(0, "r")}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runP2P(t, tc.progs)
			require.Equal(t, tc.hang, res.Hung, "findings: %v", res.Findings)
			if !tc.hang {
				require.Empty(t, res.Findings)
			}
		})
	}
}
