package scenarios

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Device-side flags and peer memory: what a file needs to write its own
// custom all-reduce or staging protocol (docs/scenario-format.md, "Flags
// and peer memory"). Flags are chunks of a tensor (local to each rank) or
// of a symmetric allocation (each rank's copy, reachable by its peers):
//
//	- {put: NAME, flag: BUF, peer: next, at: me, value: 1}     # release store into a peer's copy
//	- {put: NAME, flag: BUF, peer: all, at: me, from: x}       # the data itself (in-band, Lamport)
//	- {await: NAME, flag: BUF, at: all, until: eq, value: 1}   # spin until every chunk compares true
//	- {reset: NAME, flag: BUF, at: all, value: 0}              # relaxed store into the own copy
//
// A kernel reads or writes a peer's copy of a symmetric allocation as
// ALLOC@PEER, and a slot of it as ALLOC[SLOT] (ALLOC@all and ALLOC[all] in
// reads sum every copy or every slot). A symmetric allocation with
// registration: op is mapped on a rank only by a register op there: before
// it (eager) or without one (graph), touching a peer's copy is an illegal
// memory access (ranks.KindInvalidAccess). The engine side is
// ranks/flags.go.

// Flag op kinds.
const (
	// OpPut stores a value (or a tensor's chunks) into a flag region with
	// release semantics.
	OpPut OpKind = "put"
	// OpAwait spins until every chunk of a flag region compares true.
	OpAwait OpKind = "await"
	// OpReset stores a value into the rank's own flag region, relaxed.
	OpReset OpKind = "reset"
	// OpRegister maps the peers' copies of a symmetric allocation on the
	// rank (vLLM's register_buffer / register_graph_buffers: IPC handles
	// opened). Its value is the allocation's name.
	OpRegister OpKind = "register"
)

// flag reports whether k is a device flag op.
func (k OpKind) flag() bool { return k == OpPut || k == OpAwait || k == OpReset }

// Registration values of a symmetric allocation.
const (
	// RegisterRendezvous: mapped on every rank of the allocation when it is
	// made (PyTorch's symm_mem.rendezvous). The default.
	RegisterRendezvous = "rendezvous"
	// RegisterOp: mapped on a rank only by a register op there.
	RegisterOp = "op"
)

// FlagSpec is what a flag op names: the buffer, whose copy, which region,
// the value or the data, the comparison.
type FlagSpec struct {
	Flag string // a tensor or a symmetric allocation
	// Peer is whose copy of a symmetric allocation a put stores into: an
	// index into the allocation's ranks, next, prev or all; "": the own.
	Peer string
	// At is the slot: an integer, me (the rank's index in the allocation's
	// ranks, or its world rank for a tensor), or all (the whole buffer).
	At string
	// N is the chunks per slot (0: 1, or the From tensor's chunks).
	N int
	// Value is the value stored or compared with (HasValue: given).
	Value    uint64
	HasValue bool
	// From names the tensor whose chunks a put stores (in-band data).
	From string
	// Until is an await's comparison: eq, ne, ge, gt, le, lt ("": eq).
	Until string
	// Against names a tensor whose first chunk an await compares with,
	// read from device memory at each check (a colour counter), in place
	// of Value.
	Against string
}

// flagOpAllowed lists the keys each flag op takes (opAllowed's shape).
var flagOpAllowed = map[OpKind][]string{
	OpPut:      {"put", "stream", "flag", "peer", "at", "n", "value", "from", "blocks", "time"},
	OpAwait:    {"await", "stream", "flag", "at", "n", "until", "value", "against", "blocks", "time"},
	OpReset:    {"reset", "stream", "flag", "at", "n", "value", "blocks", "time"},
	OpRegister: {"register"},
}

// flagOp reads a flag op's keys into op.
func (d *decoder) flagOp(o *obj, op *OpSpec) {
	if op.Kind == OpRegister {
		return
	}
	o.require("flag")
	f := &FlagSpec{Flag: o.name("flag")}
	if v := o.get("peer"); v != nil {
		if txt, ok := d.scalarText(v, string(op.Kind)+" peer"); ok {
			if err := checkFlagPeer(txt); err != nil {
				d.add(posOf(v), "%s peer: %v", op.Kind, err)
			} else {
				f.Peer = txt
			}
		}
	}
	if v := o.get("at"); v != nil {
		if txt, ok := d.scalarText(v, string(op.Kind)+" at"); ok {
			if err := checkSlot(txt, true); err != nil {
				d.add(posOf(v), "%s at: %v", op.Kind, err)
			} else {
				f.At = txt
			}
		}
	}
	if o.has("n") {
		f.N = int(o.int("n", 1, MaxTensorChunks))
	}
	if v := o.get("value"); v != nil {
		if x, ok := d.int(v, string(op.Kind)+" value", 0, 1<<60); ok {
			f.Value, f.HasValue = uint64(x), true
		}
	}
	f.From = o.name("from")
	f.Against = o.name("against")
	if v := o.get("until"); v != nil {
		f.Until = o.str("until")
		if _, ok := ranks.ParseFlagCmp(f.Until); !ok {
			d.add(posOf(v), "await until: %q; expected one of %s", f.Until, strings.Join(ranks.FlagCmpNames(), ", "))
			f.Until = ""
		}
	}
	switch {
	case op.Kind == OpPut && o.has("value") && o.has("from"):
		d.add(o.kpos["from"], "put %q: give value or from, not both", op.Name)
	case op.Kind == OpPut && !o.has("value") && !o.has("from"):
		d.add(o.at, "put %q: expected value: (the flag) or from: (a tensor whose chunks are the data)", op.Name)
	case op.Kind == OpAwait && o.has("value") && o.has("against"):
		d.add(o.kpos["against"], "await %q: give value or against, not both", op.Name)
	case op.Kind == OpAwait && !o.has("value") && !o.has("against"):
		d.add(o.at, "await %q: expected value: (what the flag is compared with) or against: (a tensor holding it)", op.Name)
	}
	if f.From != "" && o.has("n") {
		d.add(o.kpos["n"], "put %q: n is the from tensor's chunks; remove n", op.Name)
	}
	if f.At == "all" && o.has("n") {
		d.add(o.kpos["n"], "%s %q: at: all is the whole buffer; remove n", op.Kind, op.Name)
	}
	op.Flag = f
	op.Blocks = int(o.int("blocks", 1, MaxKernelBlocks))
	if v := o.get("time"); v != nil {
		op.TimeNs = d.duration(v, string(op.Kind)+" time")
	}
}

// checkFlagPeer accepts next, prev, all or an index.
func checkFlagPeer(s string) error {
	if s == "all" {
		return nil
	}
	if err := checkPeer(s); err != nil {
		return fmt.Errorf("%q; expected next, prev, all or an index into the allocation's ranks (0..%d)", s, MaxRanks-1)
	}
	return nil
}

// checkSlot accepts me, an integer and (where allowed) all.
func checkSlot(s string, all bool) error {
	if s == "me" || (all && s == "all") {
		return nil
	}
	if v, err := strconv.Atoi(s); err == nil && v >= 0 && v < MaxTensorChunks {
		return nil
	}
	return fmt.Errorf("%q; expected me, all or a slot index (0..%d)", s, MaxTensorChunks-1)
}

// memRef is a kernel's read or write of a symmetric allocation: ALLOC,
// ALLOC@PEER, ALLOC[SLOT] or ALLOC@PEER[SLOT].
type memRef struct {
	Alloc, Peer, Slot string
}

// parseMemRef splits entry into a reference to a symmetric allocation of
// s, or reports that it names no allocation (a tensor, as before).
func (s *Spec) parseMemRef(entry string) (memRef, bool) {
	base, slot := entry, ""
	if i := strings.IndexByte(entry, '['); i >= 0 {
		if !strings.HasSuffix(entry, "]") {
			return memRef{}, false
		}
		base, slot = entry[:i], entry[i+1:len(entry)-1]
	}
	base, peer, _ := strings.Cut(base, "@")
	if s.symmSpec(base) == nil || (base == entry && s.tensor(entry) != nil) {
		return memRef{}, false
	}
	return memRef{Alloc: base, Peer: peer, Slot: slot}, true
}

// kernelRefs reports whether kernel op names a symmetric allocation.
func (s *Spec) kernelRefs(op *OpSpec) bool {
	for _, n := range slices.Concat(op.Reads, op.Writes) {
		if _, ok := s.parseMemRef(n); ok {
			return true
		}
	}
	return false
}

// validateFlagOp checks the names a flag op or a register op uses (the
// parts that do not depend on the knobs).
func (s *Spec) validateFlagOp(e *errs, op *OpSpec, tensors map[string]*TensorSpec) {
	if op.Kind == OpRegister {
		sy := s.symmSpec(op.Name)
		switch {
		case sy == nil:
			e.add(op.pos.at("name"), "register of undefined symmetric allocation %q (declare it under symmetric)", op.Name)
		case sy.Registration != RegisterOp:
			e.add(op.pos.at("name"), "register of %q, which is mapped when it is made (registration: %s); give it registration: op", op.Name, RegisterRendezvous)
		}
		return
	}
	f := op.Flag
	if f == nil {
		return
	}
	sy, t := s.symmSpec(f.Flag), tensors[f.Flag]
	switch {
	case sy == nil && t == nil && f.Flag != "":
		e.add(op.pos.at("flag"), "%s %q: undefined flag buffer %q; expected a tensor or a symmetric allocation", op.Kind, op.Name, f.Flag)
	case t != nil && f.Peer != "":
		e.add(op.pos.at("peer"), "%s %q: peer names another rank's copy, and tensor %q exists on each rank alone; use a symmetric allocation", op.Kind, op.Name, f.Flag)
	}
	if f.From != "" && tensors[f.From] == nil {
		e.add(op.pos.at("from"), "put %q reads undefined tensor %q (declare it under tensors)", op.Name, f.From)
	}
	if f.Against != "" && tensors[f.Against] == nil {
		e.add(op.pos.at("against"), "await %q compares with undefined tensor %q (declare it under tensors)", op.Name, f.Against)
	}
}

// validateKernelRefs checks a kernel's reads and writes of symmetric
// allocations: all only in reads, a peer or slot only on an allocation.
func (s *Spec) validateKernelRefs(e *errs, op *OpSpec) {
	check := func(list []string, field string, write bool) {
		for i, n := range list {
			ref, ok := s.parseMemRef(n)
			if !ok {
				if strings.ContainsAny(n, "@[") {
					base, _, _ := strings.Cut(strings.SplitN(n, "[", 2)[0], "@")
					if s.tensor(n) == nil && s.tensor(base) != nil {
						e.add(op.pos.at(item(field, i)), "kernel %q %s %q: a peer or slot applies to a symmetric allocation; tensor %q exists on each rank alone", op.Name, field, n, base)
					}
				}
				continue
			}
			if ref.Peer != "" {
				if err := checkFlagPeer(ref.Peer); err != nil {
					e.add(op.pos.at(item(field, i)), "kernel %q %s %q: peer %v", op.Name, field, n, err)
				}
			}
			if ref.Slot != "" {
				if err := checkSlot(ref.Slot, true); err != nil {
					e.add(op.pos.at(item(field, i)), "kernel %q %s %q: slot %v", op.Name, field, n, err)
				}
			}
			if write && (ref.Peer == "all" || ref.Slot == "all") {
				e.add(op.pos.at(item(field, i)), "kernel %q writes %q: all sums copies or slots, so it is for reads; write one copy and slot", op.Name, n)
			}
		}
	}
	check(op.Reads, "reads", false)
	check(op.Writes, "writes", true)
}

// flagGroup is the world ranks a flag buffer exists on for a group (a
// symmetric allocation's), or nil for a tensor.
func (s *Spec) flagGroup(cfg Config, name string) ([]int, bool) {
	sy := s.symmSpec(name)
	if sy == nil {
		return nil, false
	}
	on, err := sy.Ranks.Resolve(cfg.TP)
	if err != nil {
		return nil, true
	}
	return on, true
}

// slotIndex resolves a slot on rank r: me is r's index in group (its world
// rank when group is nil), all is -1.
func slotIndex(slot string, r int, group []int) (int, error) {
	switch slot {
	case "", "0":
		return 0, nil
	case "all":
		return -1, nil
	case "me":
		if group == nil {
			return r, nil
		}
		i := slices.Index(group, r)
		if i < 0 {
			return 0, fmt.Errorf("rank %d has no copy of the allocation (its ranks: %v)", r, group)
		}
		return i, nil
	}
	v, err := strconv.Atoi(slot)
	return v, err
}

// peerRanks resolves a peer on rank r in group: the world ranks it names
// (all: every member, in order; "": r).
func peerRanks(peer string, r int, group []int) ([]int, error) {
	if peer == "" {
		return []int{r}, nil
	}
	if peer == "all" {
		return slices.Clone(group), nil
	}
	i := slices.Index(group, r)
	if i < 0 && (peer == "next" || peer == "prev") {
		return nil, fmt.Errorf("rank %d has no copy of the allocation (its ranks: %v), so it has no next or prev", r, group)
	}
	p := peerIndex(peer, i, len(group))
	if p < 0 || p >= len(group) {
		return nil, fmt.Errorf("peer %s is out of range: the allocation has %d ranks", peer, len(group))
	}
	return []int{group[p]}, nil
}

// flagRegion is a flag op's region on rank r: first chunk and count.
func (s *Spec) flagRegion(cfg Config, op *OpSpec, r int) (lo, n int, err error) {
	f := op.Flag
	group, _ := s.flagGroup(cfg, f.Flag)
	chunks := 0
	if sy := s.symmSpec(f.Flag); sy != nil {
		chunks = sy.Chunks
	} else if t := s.tensor(f.Flag); t != nil {
		chunks = t.chunks(cfg)
	}
	n = max(f.N, 1)
	if f.From != "" {
		if t := s.tensor(f.From); t != nil {
			n = t.chunks(cfg)
		}
	}
	slot, err := slotIndex(f.At, r, group)
	if err != nil {
		return 0, 0, err
	}
	if slot < 0 {
		if f.From != "" && n != chunks {
			return 0, 0, fmt.Errorf("at: all is %d chunks of %q and tensor %q has %d", chunks, f.Flag, f.From, n)
		}
		return 0, chunks, nil
	}
	lo = slot * n
	if lo+n > chunks {
		return 0, 0, fmt.Errorf("slot %d of %d chunks is [%d, %d) and %q has %d chunks", slot, n, lo, lo+n, f.Flag, chunks)
	}
	return lo, n, nil
}

// checkFlags checks what a flag op, a register op or a kernel's
// allocation references need on rank r under cfg: the rank has a copy, the
// peers exist, the region fits.
func (s *Spec) checkFlags(cfg Config, op *OpSpec, r int, report func(Pos, string)) {
	switch {
	case op.Kind == OpRegister:
		if group, _ := s.flagGroup(cfg, op.Name); group != nil && !slices.Contains(group, r) {
			report(op.pos.at("name"), fmt.Sprintf("register of %q on rank %d, which has no copy of it (its ranks: %v)", op.Name, r, group))
		}
	case op.Kind.flag() && op.Flag != nil:
		f := op.Flag
		if s.symmSpec(f.Flag) == nil && s.tensor(f.Flag) == nil {
			return // reported by validateFlagOp
		}
		if _, _, err := s.flagRegion(cfg, op, r); err != nil {
			report(op.pos.at("at"), fmt.Sprintf("%s %q on rank %d: %v; expected a region within the buffer, on a rank that holds a copy", op.Kind, op.Name, r, err))
			return
		}
		if group, ok := s.flagGroup(cfg, f.Flag); ok {
			if !slices.Contains(group, r) {
				report(op.pos.at("flag"), fmt.Sprintf("%s %q on rank %d, which has no copy of symmetric allocation %q (its ranks: %v)", op.Kind, op.Name, r, f.Flag, group))
				return
			}
			if _, err := peerRanks(f.Peer, r, group); err != nil {
				report(op.pos.at("peer"), fmt.Sprintf("%s %q on rank %d: %v; expected a rank of the allocation", op.Kind, op.Name, r, err))
			}
		}
	case op.Kind == OpKernel && s.kernelRefs(op):
		if _, err := s.kernelWidth(cfg, op); err != nil {
			report(op.pos.at("name"), fmt.Sprintf("kernel %q: %v", op.Name, err))
			return
		}
		for i, n := range slices.Concat(op.Reads, op.Writes) {
			field := item("reads", i)
			if i >= len(op.Reads) {
				field = item("writes", i-len(op.Reads))
			}
			if _, err := s.refRegions(cfg, op, n, r, nil); err != nil {
				report(op.pos.at(field), fmt.Sprintf("kernel %q %q on rank %d: %v; expected a copy and slot the allocation has", op.Name, n, r, err))
			}
		}
	}
}

// kernelWidth is the chunks a kernel with allocation references computes:
// its first tensor's (writes first), or its first allocation's.
func (s *Spec) kernelWidth(cfg Config, op *OpSpec) (int, error) {
	for _, n := range slices.Concat(op.Writes, op.Reads) {
		if _, ok := s.parseMemRef(n); !ok {
			if t := s.tensor(n); t != nil {
				return t.chunks(cfg), nil
			}
		}
	}
	for _, n := range slices.Concat(op.Writes, op.Reads) {
		if ref, ok := s.parseMemRef(n); ok {
			return s.symmSpec(ref.Alloc).Chunks, nil
		}
	}
	return 0, fmt.Errorf("names no tensor or allocation")
}

// refRegion is one region a kernel's entry resolves to on a rank: the
// world rank of the copy and the first chunk.
type refRegion struct {
	rank, lo int
	alloc    string
}

// refRegions resolves entry of kernel op on rank r to the copies and
// slots it names (several for @all or [all]), each of the kernel's width.
// bufs, when given, also checks that a tensor exists.
func (s *Spec) refRegions(cfg Config, op *OpSpec, entry string, r int, _ map[string]*ranks.Buffer) ([]refRegion, error) {
	ref, ok := s.parseMemRef(entry)
	if !ok {
		return nil, nil
	}
	width, err := s.kernelWidth(cfg, op)
	if err != nil {
		return nil, err
	}
	sy := s.symmSpec(ref.Alloc)
	group, err := sy.Ranks.Resolve(cfg.TP)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(group, r) {
		return nil, fmt.Errorf("rank %d has no copy of %q (its ranks: %v)", r, ref.Alloc, group)
	}
	peers, err := peerRanks(ref.Peer, r, group)
	if err != nil {
		return nil, err
	}
	var slots []int
	switch ref.Slot {
	case "all":
		if sy.Chunks%width != 0 {
			return nil, fmt.Errorf("[all] sums slots of %d chunks, and %q has %d", width, ref.Alloc, sy.Chunks)
		}
		for i := 0; i < sy.Chunks/width; i++ {
			slots = append(slots, i)
		}
	default:
		i, err := slotIndex(ref.Slot, r, group)
		if err != nil {
			return nil, err
		}
		slots = []int{i}
	}
	var out []refRegion
	for _, p := range peers {
		for _, sl := range slots {
			if lo := sl * width; lo+width > sy.Chunks {
				return nil, fmt.Errorf("slot %d of %d chunks is [%d, %d) and %q has %d chunks", sl, width, lo, lo+width, ref.Alloc, sy.Chunks)
			}
			out = append(out, refRegion{rank: p, lo: sl * width, alloc: ref.Alloc})
		}
	}
	return out, nil
}

// mapping tracks, on one rank, which allocations with registration: op it
// has mapped. A whole program captured into one graph (mode: graph, no
// capture blocks) is mapped by a register anywhere in it, for every replay
// (vLLM registers a graph's buffers when its capture ends, before any
// replay). Otherwise a register maps from its place in host order on: an
// eager kernel touching an unmapped peer copy faults where it is issued,
// and a kernel captured in a capture block resolves its peer addresses at
// each replay (the graph holds the addresses the registration fills in), so
// a replay issued before the register faults and one after it does not.
type mapping struct {
	graph  bool
	mapped map[string]bool
	// capturing: the kernels being lowered are captured into a block's
	// graph; their peer accesses wait in pending for each replay.
	capturing bool
	pending   map[*ranks.KernelSpec][]peerAccess
}

// peerAccess is a captured kernel's access of a peer's copy.
type peerAccess struct {
	alloc string
	buf   *ranks.Buffer
}

func (s *Spec) newMapping(cfg Config, ops []OpSpec) *mapping {
	captures := false
	for _, op := range ops {
		captures = captures || op.Kind == opCaptureBegin || op.Kind == OpReplay
	}
	m := &mapping{graph: cfg.Mode == "graph" && !captures, mapped: map[string]bool{}, pending: map[*ranks.KernelSpec][]peerAccess{}}
	if m.graph {
		for _, op := range ops {
			if op.Kind == OpRegister {
				m.mapped[op.Name] = true
			}
		}
	}
	return m
}

// reaches reports whether rank r may touch the copy of alloc on rank p.
func (s *Spec) reaches(m *mapping, alloc string, r, p int) bool {
	if p == r {
		return true
	}
	sy := s.symmSpec(alloc)
	return sy == nil || sy.Registration != RegisterOp || m.mapped[alloc] || mutant.On(mutant.RegistrationIgnored)
}

// check adds to k, which touches alloc's copy buf on world rank p from rank
// r, the fault of an unmapped access: now, or (captured) at each replay.
func (s *Spec) check(m *mapping, k *ranks.KernelSpec, alloc string, buf *ranks.Buffer, r, p int) {
	switch {
	case m.capturing && p != r && s.symmSpec(alloc) != nil && s.symmSpec(alloc).Registration == RegisterOp:
		m.pending[k] = append(m.pending[k], peerAccess{alloc, buf})
	case !s.reaches(m, alloc, r, p):
		k.Instrs = append(k.Instrs, fault(buf, m.unmappedWhy(alloc)))
	}
}

// atReplay is captured kernel k as a replay issued now runs it: with the
// faults of the peer copies not mapped by then.
func (m *mapping) atReplay(k *ranks.KernelSpec) *ranks.KernelSpec {
	var faults []ranks.Instr
	for _, a := range m.pending[k] {
		if !m.mapped[a.alloc] {
			faults = append(faults, fault(a.buf, fmt.Sprintf("the graph was replayed before a register of %q filled in its peer addresses", a.alloc)))
		}
	}
	if len(faults) == 0 || mutant.On(mutant.RegistrationIgnored) {
		return k
	}
	kc := *k
	kc.Instrs = append(faults, k.Instrs...)
	return &kc
}

// fault is the micro-op of rank r touching buf, which it never mapped.
func fault(buf *ranks.Buffer, why string) ranks.Instr {
	return ranks.Instr{Op: ranks.OpFault, Phase: why, Dst: buf, Peer: buf.Rank}
}

// unmappedWhy says why a copy is not mapped, for the finding.
func (m *mapping) unmappedWhy(alloc string) string {
	if m.graph {
		return fmt.Sprintf("no register of %q in the captured program: the graph's peer addresses were never filled in", alloc)
	}
	return fmt.Sprintf("not registered: no register of %q issued before this op", alloc)
}

// symmBuf is the copy of alloc on world rank p.
func symmBuf(symms map[string]*collectives.SymmAlloc, alloc string, p int) *ranks.Buffer {
	a := symms[alloc]
	return a.Sym.Bufs[a.Sym.Index(p)]
}

// lowerFlagOp builds a flag op's kernel on rank r.
func (s *Spec) lowerFlagOp(cfg Config, hw ranks.Profile, op *OpSpec, r int, bufs map[string]*ranks.Buffer,
	symms map[string]*collectives.SymmAlloc, m *mapping) (*ranks.KernelSpec, error) {
	f := op.Flag
	lo, n, err := s.flagRegion(cfg, op, r)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", op.Kind, op.Name, err)
	}
	dur := sim.Time(op.TimeNs)
	if dur == 0 {
		dur = hw.KStart
	}
	k := &ranks.KernelSpec{Name: op.Name, Kind: "flag/" + string(op.Kind), Blocks: op.Blocks, Spins: op.Kind == OpAwait}
	var targets []*ranks.Buffer
	if x, ok := bufs[f.Flag]; ok && s.symmSpec(f.Flag) == nil {
		targets = []*ranks.Buffer{x}
	} else {
		group, _ := s.flagGroup(cfg, f.Flag)
		peer := f.Peer
		if op.Kind != OpPut {
			peer = ""
		}
		ps, err := peerRanks(peer, r, group)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", op.Kind, op.Name, err)
		}
		for _, p := range ps {
			b := symmBuf(symms, f.Flag, p)
			s.check(m, k, f.Flag, b, r, p)
			targets = append(targets, b)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s %q: undefined flag buffer %q", op.Kind, op.Name, f.Flag)
	}
	for _, b := range targets {
		in := ranks.Instr{Phase: string(op.Kind), Dst: b, DstLo: lo, N: n, Slot: int(f.Value), Peer: -1, Dur: dur / sim.Time(len(targets))}
		switch op.Kind {
		case OpPut, OpReset:
			in.Op, in.Fresh = ranks.OpFlagPut, op.Kind == OpReset
			in.Peer = b.Rank
			if f.From != "" {
				src, ok := bufs[f.From]
				if !ok {
					return nil, fmt.Errorf("rank %d: undefined tensor %q", r, f.From)
				}
				in.Srcs = []ranks.Src{{Buf: src, Coef: 1}}
			}
		case OpAwait:
			in.Op = ranks.OpFlagWait
			in.Cmp, _ = ranks.ParseFlagCmp(cmpOr(f.Until))
			if f.Against != "" {
				src, ok := bufs[f.Against]
				if !ok {
					return nil, fmt.Errorf("rank %d: undefined tensor %q", r, f.Against)
				}
				in.Srcs = []ranks.Src{{Buf: src, Coef: 1}}
			}
		}
		k.Instrs = append(k.Instrs, in)
	}
	return k, nil
}

func cmpOr(s string) string {
	if s == "" {
		return "eq"
	}
	return s
}

// lowerRefKernel builds a kernel that reads or writes symmetric
// allocations: each written region gets weight × reads[0] + reads[1] + …
// (an entry with @all or [all] stands for each copy or slot in turn), chunk
// by chunk over the kernel's width.
func (s *Spec) lowerRefKernel(cfg Config, hw ranks.Profile, op *OpSpec, r int, bufs map[string]*ranks.Buffer,
	symms map[string]*collectives.SymmAlloc, m *mapping, written map[string]bool) (*ranks.KernelSpec, error) {
	width, err := s.kernelWidth(cfg, op)
	if err != nil {
		return nil, fmt.Errorf("kernel %q: %w", op.Name, err)
	}
	k := &ranks.KernelSpec{Name: op.Name, Kind: "kernel", Blocks: op.Blocks, Spins: op.Spin}
	var moved int64
	faulted := map[*ranks.Buffer]bool{}
	resolve := func(entry string) ([]ranks.Src, error) {
		regs, err := s.refRegions(cfg, op, entry, r, bufs)
		if err != nil {
			return nil, fmt.Errorf("kernel %q %q: %w", op.Name, entry, err)
		}
		if regs == nil {
			b, ok := bufs[entry]
			if !ok {
				return nil, fmt.Errorf("rank %d: undefined tensor %q", r, entry)
			}
			if b.Chunks() < width {
				return nil, fmt.Errorf("kernel %q: tensor %q has %d chunks and the kernel computes %d", op.Name, entry, b.Chunks(), width)
			}
			moved += b.Bytes
			return []ranks.Src{{Buf: b, Coef: 1}}, nil
		}
		var out []ranks.Src
		for _, g := range regs {
			b := symmBuf(symms, g.alloc, g.rank)
			if !faulted[b] {
				faulted[b] = true
				s.check(m, k, g.alloc, b, r, g.rank)
			}
			out = append(out, ranks.Src{Buf: b, Lo: g.lo, Coef: 1})
		}
		return out, nil
	}
	var srcs []ranks.Src
	for _, name := range op.Reads {
		x, err := resolve(name)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, x...)
	}
	if len(srcs) > 0 {
		c := op.Weight
		if c == 0 {
			c = s.KernelWeight(op.Name, r)
		}
		srcs[0].Coef = c
	}
	var outs []ranks.Src
	for _, name := range op.Writes {
		x, err := resolve(name)
		if err != nil {
			return nil, err
		}
		if _, ok := s.parseMemRef(name); !ok {
			written[name] = true
		}
		outs = append(outs, x...)
	}
	total := sim.Time(op.TimeNs)
	if total == 0 {
		total = hw.KStart + ranks.Bytes(moved, hw.HBM)
	}
	for _, o := range outs {
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpCompute, Phase: "compute", Dst: o.Buf, DstLo: o.Lo, N: width, Srcs: srcs, Fresh: true,
			Dur: total / sim.Time(len(outs))})
	}
	return k, nil
}

// flagParts writes a flag op's keys for export.
func flagParts(op OpSpec) []string {
	f := op.Flag
	if f == nil {
		return nil
	}
	parts := []string{"flag: " + quote(f.Flag)}
	if f.Peer != "" {
		parts = append(parts, "peer: "+knobVal(f.Peer))
	}
	if f.At != "" {
		parts = append(parts, "at: "+knobVal(f.At))
	}
	if f.N != 0 {
		parts = append(parts, fmt.Sprintf("n: %d", f.N))
	}
	if f.Until != "" {
		parts = append(parts, "until: "+quote(f.Until))
	}
	if f.HasValue {
		parts = append(parts, fmt.Sprintf("value: %d", f.Value))
	}
	if f.From != "" {
		parts = append(parts, "from: "+quote(f.From))
	}
	if f.Against != "" {
		parts = append(parts, "against: "+quote(f.Against))
	}
	if op.Blocks != 0 {
		parts = append(parts, fmt.Sprintf("blocks: %d", op.Blocks))
	}
	if op.TimeNs != 0 {
		parts = append(parts, fmt.Sprintf("time: %dns", op.TimeNs))
	}
	return parts
}
