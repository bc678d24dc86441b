package format

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/ranks"
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
	if _, _, counter, err := CounterSlot(s); counter {
		return err
	}
	if v, err := strconv.Atoi(s); err == nil && v >= 0 && v < MaxTensorChunks {
		return nil
	}
	return fmt.Errorf("%q; expected me, all, a slot index (0..%d) or COUNTER%%SLOTS (a tensor whose first chunk picks the slot)", s, MaxTensorChunks-1)
}

// CounterSlot splits a slot taken from a device counter, COUNTER%SLOTS:
// the slot is the first chunk of tensor COUNTER, read when the kernel
// starts, modulo SLOTS (ranks/slotindex.go). counter reports whether s
// has that form; err, whether it is well formed.
func CounterSlot(s string) (name string, slots int, counter bool, err error) {
	name, k, ok := strings.Cut(s, "%")
	if !ok {
		return "", 0, false, nil
	}
	if name == "" || !isNameByte(name[0], true) || strings.IndexFunc(name, func(c rune) bool { return c > 0x7f || !isNameByte(byte(c), false) }) >= 0 {
		return "", 0, true, fmt.Errorf("%q: the counter before %% must be a tensor's name", s)
	}
	n, e := strconv.Atoi(k)
	if e != nil || n < 1 || n > MaxTensorChunks {
		return "", 0, true, fmt.Errorf("%q: the slot count after %% must be an integer in 1..%d", s, MaxTensorChunks)
	}
	return name, n, true, nil
}

// checkCounter checks that the counter a slot names is a tensor (a device
// counter lives on each rank alone; a symmetric allocation is not one).
func (s *Spec) checkCounter(slot string, tensors map[string]*TensorSpec) error {
	name, _, counter, err := CounterSlot(slot)
	if !counter || err != nil {
		return nil
	}
	if tensors[name] == nil {
		return fmt.Errorf("slot %q reads counter %q, which is not a tensor; expected a tensor whose first chunk counts the calls (an increment op advances it)", slot, name)
	}
	return nil
}

// MemRef is a kernel's read or write of a symmetric allocation: ALLOC,
// ALLOC@PEER, ALLOC[SLOT] or ALLOC@PEER[SLOT].
type MemRef struct {
	Alloc, Peer, Slot string
}

// ParseMemRef splits entry into a reference to a symmetric allocation of
// s, or reports that it names no allocation (a tensor, as before).
func (s *Spec) ParseMemRef(entry string) (MemRef, bool) {
	base, slot := entry, ""
	if i := strings.IndexByte(entry, '['); i >= 0 {
		if !strings.HasSuffix(entry, "]") {
			return MemRef{}, false
		}
		base, slot = entry[:i], entry[i+1:len(entry)-1]
	}
	base, peer, _ := strings.Cut(base, "@")
	if s.Symmetric(base) == nil || (base == entry && s.Tensor(entry) != nil) {
		return MemRef{}, false
	}
	return MemRef{Alloc: base, Peer: peer, Slot: slot}, true
}

// KernelRefs reports whether kernel op names a symmetric allocation.
func (s *Spec) KernelRefs(op *OpSpec) bool {
	for _, n := range slices.Concat(op.Reads, op.Writes) {
		if _, ok := s.ParseMemRef(n); ok {
			return true
		}
	}
	return false
}

// validateFlagOp checks the names a flag op or a register op uses (the
// parts that do not depend on the knobs).
func (s *Spec) validateFlagOp(e *errs, op *OpSpec, tensors map[string]*TensorSpec) {
	if op.Kind == OpRegister {
		sy := s.Symmetric(op.Name)
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
	sy, t := s.Symmetric(f.Flag), tensors[f.Flag]
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
	if err := s.checkCounter(f.At, tensors); err != nil {
		e.add(op.pos.at("at"), "%s %q at: %v", op.Kind, op.Name, err)
	}
}

// validateKernelRefs checks a kernel's reads and writes of symmetric
// allocations: all only in reads, a peer or slot only on an allocation.
func (s *Spec) validateKernelRefs(e *errs, op *OpSpec, tensors map[string]*TensorSpec) {
	first := "" // the kernel's counter slot
	check := func(list []string, field string, write bool) {
		for i, n := range list {
			ref, ok := s.ParseMemRef(n)
			if !ok {
				if _, _, _, ranged, _ := SplitChunkRange(n); ranged {
					continue // a tensor's chunk range (validated with the tensors)
				}
				if strings.ContainsAny(n, "@[") {
					base, _, _ := strings.Cut(strings.SplitN(n, "[", 2)[0], "@")
					if s.Tensor(n) == nil && s.Tensor(base) != nil {
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
				} else if err := s.checkCounter(ref.Slot, tensors); err != nil {
					e.add(op.pos.at(item(field, i)), "kernel %q %s %q: %v", op.Name, field, n, err)
				} else if _, _, counter, _ := CounterSlot(ref.Slot); counter {
					if first == "" {
						first = ref.Slot
					} else if ref.Slot != first {
						e.add(op.pos.at(item(field, i)), "kernel %q %s %q: its slot is %s and another of its references' is %s; expected one counter slot per kernel (it loads one index when it starts)", op.Name, field, n, ref.Slot, first)
					}
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

// FlagGroup is the world ranks a flag buffer exists on for a group (a
// symmetric allocation's), or nil for a tensor.
func (s *Spec) FlagGroup(cfg Config, name string) ([]int, bool) {
	sy := s.Symmetric(name)
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

// PeerRanks resolves a peer on rank r in group: the world ranks it names
// (all: every member, in order; "": r).
func PeerRanks(peer string, r int, group []int) ([]int, error) {
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
	p := PeerIndex(peer, i, len(group))
	if p < 0 || p >= len(group) {
		return nil, fmt.Errorf("peer %s is out of range: the allocation has %d ranks", peer, len(group))
	}
	return []int{group[p]}, nil
}

// FlagRegion is a flag op's region on rank r: first chunk and count.
func (s *Spec) FlagRegion(cfg Config, op *OpSpec, r int) (lo, n int, err error) {
	f := op.Flag
	group, _ := s.FlagGroup(cfg, f.Flag)
	chunks := 0
	if sy := s.Symmetric(f.Flag); sy != nil {
		chunks = sy.Chunks
	} else if t := s.Tensor(f.Flag); t != nil {
		chunks = t.ChunksIn(cfg)
	}
	n = max(f.N, 1)
	if f.From != "" {
		if t := s.Tensor(f.From); t != nil {
			n = t.ChunksIn(cfg)
		}
	}
	if _, k, counter, _ := CounterSlot(f.At); counter {
		// slot 0 here; the kernel moves to its slot when it runs, and every
		// slot must fit
		if k*n > chunks {
			return 0, 0, fmt.Errorf("%d slots of %d chunks are %d chunks and %q has %d", k, n, k*n, f.Flag, chunks)
		}
		return 0, n, nil
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
		if group, _ := s.FlagGroup(cfg, op.Name); group != nil && !slices.Contains(group, r) {
			report(op.pos.at("name"), fmt.Sprintf("register of %q on rank %d, which has no copy of it (its ranks: %v)", op.Name, r, group))
		}
	case op.Kind.flag() && op.Flag != nil:
		f := op.Flag
		if s.Symmetric(f.Flag) == nil && s.Tensor(f.Flag) == nil {
			return // reported by validateFlagOp
		}
		if _, _, err := s.FlagRegion(cfg, op, r); err != nil {
			report(op.pos.at("at"), fmt.Sprintf("%s %q on rank %d: %v; expected a region within the buffer, on a rank that holds a copy", op.Kind, op.Name, r, err))
			return
		}
		if group, ok := s.FlagGroup(cfg, f.Flag); ok {
			if !slices.Contains(group, r) {
				report(op.pos.at("flag"), fmt.Sprintf("%s %q on rank %d, which has no copy of symmetric allocation %q (its ranks: %v)", op.Kind, op.Name, r, f.Flag, group))
				return
			}
			if _, err := PeerRanks(f.Peer, r, group); err != nil {
				report(op.pos.at("peer"), fmt.Sprintf("%s %q on rank %d: %v; expected a rank of the allocation", op.Kind, op.Name, r, err))
			}
		}
	case op.Kind == OpKernel && s.KernelRefs(op):
		if _, err := s.KernelWidth(cfg, op); err != nil {
			report(op.pos.at("name"), fmt.Sprintf("kernel %q: %v", op.Name, err))
			return
		}
		for i, n := range slices.Concat(op.Reads, op.Writes) {
			field := item("reads", i)
			if i >= len(op.Reads) {
				field = item("writes", i-len(op.Reads))
			}
			if _, err := s.RefRegions(cfg, op, n, r, nil); err != nil {
				report(op.pos.at(field), fmt.Sprintf("kernel %q %q on rank %d: %v; expected a copy and slot the allocation has", op.Name, n, r, err))
			}
		}
	}
}

// KernelWidth is the chunks a kernel with allocation references computes:
// its first tensor's (writes first), or its first allocation's.
func (s *Spec) KernelWidth(cfg Config, op *OpSpec) (int, error) {
	for _, n := range slices.Concat(op.Writes, op.Reads) {
		if _, ok := s.ParseMemRef(n); !ok {
			if t := s.Tensor(n); t != nil {
				return t.ChunksIn(cfg), nil
			}
		}
	}
	for _, n := range slices.Concat(op.Writes, op.Reads) {
		if ref, ok := s.ParseMemRef(n); ok {
			return s.Symmetric(ref.Alloc).Chunks, nil
		}
	}
	return 0, fmt.Errorf("names no tensor or allocation")
}

// RefRegion is one region a kernel's entry resolves to on a rank: the
// world rank of the copy and the first chunk.
type RefRegion struct {
	Rank, Lo int
	Alloc    string
	// Counter and Slots, for a slot taken from a device counter
	// (COUNTER%SLOTS): Lo is slot 0's, and the kernel moves it by its slot
	// times the width when it runs.
	Counter string
	Slots   int
}

// RefRegions resolves entry of kernel op on rank r to the copies and
// slots it names (several for @all or [all]), each of the kernel's width.
// bufs, when given, also checks that a tensor exists.
func (s *Spec) RefRegions(cfg Config, op *OpSpec, entry string, r int, _ map[string]*ranks.Buffer) ([]RefRegion, error) {
	ref, ok := s.ParseMemRef(entry)
	if !ok {
		return nil, nil
	}
	width, err := s.KernelWidth(cfg, op)
	if err != nil {
		return nil, err
	}
	sy := s.Symmetric(ref.Alloc)
	group, err := sy.Ranks.Resolve(cfg.TP)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(group, r) {
		return nil, fmt.Errorf("rank %d has no copy of %q (its ranks: %v)", r, ref.Alloc, group)
	}
	peers, err := PeerRanks(ref.Peer, r, group)
	if err != nil {
		return nil, err
	}
	var slots []int
	counter, nslots, isCounter, _ := CounterSlot(ref.Slot)
	switch {
	case isCounter:
		if nslots*width > sy.Chunks {
			return nil, fmt.Errorf("%d slots of %d chunks are %d chunks and %q has %d", nslots, width, nslots*width, ref.Alloc, sy.Chunks)
		}
		slots = []int{0}
	case ref.Slot == "all":
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
	var out []RefRegion
	for _, p := range peers {
		for _, sl := range slots {
			if lo := sl * width; lo+width > sy.Chunks {
				return nil, fmt.Errorf("slot %d of %d chunks is [%d, %d) and %q has %d chunks", sl, width, lo, lo+width, ref.Alloc, sy.Chunks)
			}
			out = append(out, RefRegion{Rank: p, Lo: sl * width, Alloc: ref.Alloc, Counter: counter, Slots: nslots})
		}
	}
	return out, nil
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
