package collectives

import (
	"fmt"
	"unique"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
)

// Point-to-point send and receive (ncclSend / ncclRecv). NCCL runs them as
// kernels on the communicator's strong stream, like its collectives
// (src/enqueue.cc), over connectors of their own (NCCL connects send/recv
// peers with connIndex 1, the ring with connIndex 0: src/transport.cc
// ncclTransportP2pSetup), so a send never shares slots with a ring
// collective. A send and a receive match by issue order on their
// connection: the k-th send from a to b meets b's k-th receive from a. Ghost
// data carries the call's name and byte count, so a send consumed by a
// receive of another name or size is a mismatch (NCCL requires both sides
// to pass the same count and datatype: usage/p2p.rst).
//
// NCCL connects a pair for point-to-point at the first transfer between
// them, whatever NCCL_RUNTIME_CONNECT says (that setting is about the
// collectives' rings and trees, src/init.cc runtimeConn): the first send
// from a to b marks b's send connector to be set up (src/enqueue.cc
// p2pTaskAppend: connectSend[peer], hasSeen, ncclGroupCommPreconnect), and the
// group's end runs ncclTransportP2pSetup (src/transport.cc), which
// exchanges the connectors' addresses with the peer through bootstrapSend /
// bootstrapRecv. The peer answers only when it sets up its own receive
// from a, at its first receive from a. So a send whose peer never posts a
// receive never gets its connection: it hangs (on hardware the host blocks
// in the group's end; here the send kernel waits for the handshake, which
// the hang analysis reports the same way). Once a pair is connected, a
// send of at most NCCL_BUFFSIZE (the connection's NCCLSteps slots) needs
// no receiver to complete: its data waits in the connection for the next
// receive, as on hardware (src/device/prims_simple.h waitPeer: a sender
// waits only for a free slot).

// p2pSetup is one connection's setup handshake: a signal-pad slot on the
// sending rank that the receiver's first receive kernel sets and the
// sender's first send kernel waits for.
type p2pSetup struct {
	pad        *ranks.SignalPad
	send, recv bool // the side's first kernel has been built
}

// p2pHandshake returns the connection setup of the transfer from world
// rank from to world rank to, and whether the side (send or receive) is
// built for the first time: only the first kernel of each side takes part.
func (c *Comm) p2pHandshake(from, to int, send bool) (*p2pSetup, bool) {
	if c.p2pConn == nil {
		c.p2pConn = map[[2]int]*p2pSetup{}
	}
	k := [2]int{from, to}
	s, ok := c.p2pConn[k]
	if !ok {
		s = &p2pSetup{pad: ranks.NewSignalPad(fmt.Sprintf("%s:p2p-connect:%d→%d", c.Name, from, to), from, 1)}
		c.p2pConn[k] = s
	}
	first := &s.recv
	if send {
		first = &s.send
	}
	if *first {
		return s, false
	}
	*first = true
	return s, true
}

// p2pFifo is the point-to-point connection from world rank from to to.
func (c *Comm) p2pFifo(from, to int) *ranks.Fifo {
	if c.p2p == nil {
		c.p2p = map[[2]int]*ranks.Fifo{}
	}
	k := [2]int{from, to}
	f, ok := c.p2p[k]
	if !ok {
		f = c.newFifo(fmt.Sprintf("%s:p2p:%d→%d", c.Name, from, to), from, to)
		c.p2p[k] = f
	}
	return f
}

// p2pSig is the signature both sides of a transfer of bytes carry.
func p2pSig(bytes int64) string {
	return unique.Make(fmt.Sprintf("sendrecv count=%dB", bytes)).Value()
}

// p2pKernel is the shared shape of a send or receive kernel on rank, whose
// peer is the group index peer.
func (c *Comm) p2pKernel(what, rank, peer int, name string, buf *ranks.Buffer) (*ranks.KernelSpec, int, error) {
	i := c.index(rank)
	if i < 0 {
		return nil, 0, fmt.Errorf("%s %q: rank %d is not in communicator %q %v", []string{"send", "recv"}[what], name, rank, c.Name, c.Group)
	}
	if peer < 0 || peer >= len(c.Group) || peer == i {
		return nil, 0, fmt.Errorf("%s %q: peer %d: want another index of communicator %q (0..%d)", []string{"send", "recv"}[what], name, peer, c.Name, len(c.Group)-1)
	}
	if buf == nil {
		return nil, 0, fmt.Errorf("%s %q: missing tensor", []string{"send", "recv"}[what], name)
	}
	k := &ranks.KernelSpec{Name: name, Coll: name, Kind: []string{"send", "recv"}[what] + "/nccl", Sig: p2pSig(buf.Bytes), GroupSize: 2,
		Instrs: []ranks.Instr{{Op: ranks.OpDelay, Phase: "launch", Dur: c.HW.KStart}}}
	c.order(k)
	return k, c.Group[peer], nil
}

// Send returns rank's kernel for ncclSend(in, peer): in's chunks go to the
// communicator member at group index peer, in slot-sized pieces.
func (c *Comm) Send(rank, peer int, name string, in *ranks.Buffer) (*ranks.KernelSpec, error) {
	k, to, err := c.p2pKernel(0, rank, peer, name, in)
	if err != nil {
		return nil, err
	}
	if h, first := c.p2pHandshake(rank, to, true); first && !mutant.On(mutant.P2PConnectOff) {
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpWait, Phase: "connect", Pad: h.pad, Slot: 0, Peer: to})
	}
	f := c.p2pFifo(rank, to)
	p := pieces(in.Bytes)
	for j := range p {
		lo, m := span(0, in.Chunks(), p, j)
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpSend, Phase: "send", Fifo: f, N: m, Srcs: []ranks.Src{{Buf: in, Lo: lo, Coef: 1}}, Peer: to})
	}
	return k, nil
}

// Recv returns rank's kernel for ncclRecv(out, peer): it takes the pieces
// the member at group index peer sends, in order, into out. Each piece costs
// its NVLink transfer time, the first also the step latency.
func (c *Comm) Recv(rank, peer int, name string, out *ranks.Buffer) (*ranks.KernelSpec, error) {
	k, from, err := c.p2pKernel(1, rank, peer, name, out)
	if err != nil {
		return nil, err
	}
	if h, first := c.p2pHandshake(from, rank, false); first && !mutant.On(mutant.P2PConnectOff) {
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpPut, Phase: "connect", Pad: h.pad, Slot: 0, Peer: from})
	}
	f := c.p2pFifo(from, rank)
	p := pieces(out.Bytes)
	for j := range p {
		lo, m := span(0, out.Chunks(), p, j)
		d := ranks.Bytes(out.Bytes/int64(p), c.HW.NVLink)
		if j == 0 {
			d += c.HW.StepLat
		}
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpRecv, Phase: "recv", Fifo: f, Dst: out, DstLo: lo, N: m, Dur: d, Peer: from})
	}
	return k, nil
}
