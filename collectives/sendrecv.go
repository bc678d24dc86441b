package collectives

import (
	"fmt"
	"unique"

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

// p2pFifo is the point-to-point connection from world rank from to to.
func (c *Comm) p2pFifo(from, to int) *ranks.Fifo {
	if c.p2p == nil {
		c.p2p = map[[2]int]*ranks.Fifo{}
	}
	k := [2]int{from, to}
	f, ok := c.p2p[k]
	if !ok {
		f = c.w.NewFifo(fmt.Sprintf("%s:p2p:%d→%d", c.Name, from, to), from, to, NCCLSteps)
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
		OrderKey: c.orderKey(), Exclusive: NCCLExclusive,
		Instrs: []ranks.Instr{{Op: ranks.OpDelay, Phase: "launch", Dur: c.HW.KStart}}}
	return k, c.Group[peer], nil
}

// Send returns rank's kernel for ncclSend(in, peer): in's chunks go to the
// communicator member at group index peer, in slot-sized pieces.
func (c *Comm) Send(rank, peer int, name string, in *ranks.Buffer) (*ranks.KernelSpec, error) {
	k, to, err := c.p2pKernel(0, rank, peer, name, in)
	if err != nil {
		return nil, err
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
