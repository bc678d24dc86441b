package format

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/collsim/collsim/scenarios/knobs"
)

// Spec is a scenario as a user writes it in a YAML file (the format is
// documented in docs/scenario-format.md). A Spec is plain data: [ParseSpec]
// reads one from bytes, [Spec.Validate] checks it, [MarshalSpec] writes it
// back as YAML, and package scenarios (ScenarioOf) turns it into a
// runnable Scenario.
//
// A scenario describes its work in one of three forms:
//   - Graph.Builder "moe": the streamsched MoE builder, shaped by the knobs
//     (tp8-shared-expert is written this way);
//   - Graph.Ops: a user op graph, placed on streams by the placement knob;
//   - Programs: explicit per-rank stream programs (kernels, collectives,
//     event records and waits), which may differ from rank to rank.
type Spec struct {
	Name        string
	Description string
	// Base holds every knob: hardware (arch), ranks (tp), mode, replays,
	// chunks and the rest.
	Base     Config
	Graph    *GraphSpec
	Comms    []CommSpec
	Tensors  []TensorSpec
	Programs []ProgramSpec
	Variants []Variant
	// References lists the references besides the serialized program that
	// every run is compared with: "eager" (in graph mode, the eager path's
	// outputs: Scenario.GraphMatchesEager). Refs are the others: another
	// variant, the unsharded model, explicit values (spec_refs.go).
	References []string
	Refs       []RefSpec
	// Symm are symmetric allocations several communicators may share
	// (spec_symm.go).
	Symm []SymmSpec
	// Params are the knobs the file declares itself (spec_params.go).
	Params []ParamSpec
	// Compare lists step-time comparisons between variants for the report.
	Compare []Comparison
	// Steps and HostScalars are the host values (spec_host.go): whether the
	// replays carry state, and the host scalars kernels read.
	Steps       string
	HostScalars []HostScalarSpec

	// File is the file name errors are reported against.
	File   string
	pos    posMap
	varPos []posMap
	// patches[i] is variant i's patch; patched the programs it makes, by
	// variant name (spec_patch.go).
	patches [][]PatchSpec
	patched map[string][]ProgramSpec
	// weights is the kernels' default weight table (spec_weights.go).
	weights *weightTable
	// written lists the knobs the file itself sets at the top level or
	// under knobs:, by knob key, in file order (see usedKnobs).
	written []string
}

// GraphSpec is the op-graph form: either a named builder or explicit ops.
type GraphSpec struct {
	// Builder "moe" builds MoE layers from the knobs (tp, layers, shared,
	// order, tokens, hidden, placement, phase, …). Empty means Ops.
	Builder string
	Ops     []GraphOpSpec
	pos     posMap
}

// GraphOpSpec is one node of a user op graph (see streamsched.Op).
type GraphOpSpec struct {
	Name    string
	Kind    string // gemm | moe | add | allreduce
	Inputs  []string
	Output  string
	M, K, N int64
	Experts int64
	Comm    string
	// Weight is the integer weight of a linear op (gemm, moe) on every
	// rank; 0 keeps the default weight (per op and rank, Spec.KernelWeight).
	Weight int64
	// TimeNs, when set, is the op's duration in place of the cost model's
	// (a gemm's roofline, a moe's measured kernels, an add's bytes moved):
	// one kernel of that length. Not on an allreduce, whose time is the
	// collective's.
	TimeNs int64
	pos    posMap
}

// RankSet selects ranks: every rank of the world, or a list.
type RankSet struct {
	All   bool
	Ranks []int
}

// Resolve returns the selected ranks for a world of n ranks, or an error
// naming the first rank out of range.
func (s RankSet) Resolve(n int) ([]int, error) {
	if s.All {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	for _, r := range s.Ranks {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("rank %d is out of range: the world has %d ranks (0..%d)", r, n, n-1)
		}
	}
	return append([]int(nil), s.Ranks...), nil
}

// String writes the set as a scenario file does: all, or [0, 1, …].
func (s RankSet) String() string {
	if s.All {
		return "all"
	}
	parts := make([]string, len(s.Ranks))
	for i, r := range s.Ranks {
		parts[i] = fmt.Sprint(r)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// CommSpec is a communicator: a named group of ranks.
type CommSpec struct {
	Name  string
	Ranks RankSet
	// Workspace is "shared" or "per-call"; empty uses the workspace knob.
	Workspace string
	pos       posMap
}

// TensorSpec is a tensor that exists on every rank.
type TensorSpec struct {
	Name  string
	Bytes int64
	// BytesExpr, when set, gives Bytes as a function of the knobs
	// (spec_expr.go); Bytes is then its value under the file's base.
	BytesExpr *Expr
	// PerReplay re-fills the tensor before each replay (spec_host.go).
	PerReplay [][]uint64
	// Init gives chunk values, the same on every rank (chunk c gets
	// Init[c % len(Init)]). InitPerRank gives them per rank and wins.
	Init        []uint64
	InitPerRank [][]uint64
	// Output marks a tensor compared against the reference.
	Output bool
	// Chunks is the tensor's own value-chunk count (programs only); 0 uses
	// the chunks knob. An all-gather's output holds group size × its
	// input's chunks.
	Chunks int
	pos    posMap
}

// ChunksIn is the tensor's value-chunk count under cfg.
func (t *TensorSpec) ChunksIn(cfg Config) int {
	if t.Chunks > 0 {
		return t.Chunks
	}
	return cfg.Chunks
}

// InitValue is the initial value of chunk c on rank r, and whether the
// tensor is initialised at all.
func (t *TensorSpec) InitValue(r, c int) (uint64, bool) {
	if r < len(t.InitPerRank) && len(t.InitPerRank[r]) > 0 {
		v := t.InitPerRank[r]
		return v[c%len(v)], true
	}
	if len(t.Init) > 0 {
		return t.Init[c%len(t.Init)], true
	}
	return 0, false
}

// HasInit reports whether the file gives the tensor initial values.
func (t *TensorSpec) HasInit() bool { return len(t.Init) > 0 || len(t.InitPerRank) > 0 }

// ProgramSpec is the host program of the ranks it selects.
type ProgramSpec struct {
	Ranks   RankSet
	Streams []string // the first is the origin stream (capture origin)
	Events  []string
	Ops     []OpSpec
	pos     posMap
}

// OpKind is what a program step does.
type OpKind string

// Program step kinds.
const (
	OpKernel    OpKind = "kernel"
	OpAllReduce OpKind = "allreduce"
	OpRecord    OpKind = "record"
	OpWait      OpKind = "wait"
	// OpSync blocks the host thread until a stream's work (or, with
	// "device", every stream's) is done: cudaStreamSynchronize /
	// cudaDeviceSynchronize. It cannot be captured into a graph.
	OpSync OpKind = "sync"
	// The rest of the collective family (collectives/family.go) and
	// point-to-point send and receive (collectives/sendrecv.go).
	OpAllGather     OpKind = "allgather"
	OpReduceScatter OpKind = "reducescatter"
	OpAllToAll      OpKind = "alltoall"
	OpBroadcast     OpKind = "broadcast"
	OpSend          OpKind = "send"
	OpRecv          OpKind = "recv"
	// Memory lifetime through the rank's caching allocator (ranks/cachealloc/alloc.go),
	// decided in host issue order: alloc takes a tensor's storage from the
	// pool of its stream, free drops the last reference, record_stream
	// marks a use by another stream.
	OpAlloc        OpKind = "alloc"
	OpFree         OpKind = "free"
	OpRecordStream OpKind = "record_stream"
	// OpEmptyCache is torch.cuda.empty_cache(): the host waits for the
	// deferred frees' uses and releases every entirely free segment (a
	// cudaFree, which synchronizes the device). Its value is a label.
	OpEmptyCache OpKind = "empty_cache"
)

// opKinds lists every op kind in the order the format's documentation does.
var opKinds = []OpKind{OpKernel, OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll, OpBroadcast, OpSend, OpRecv, OpRecord, OpWait, OpSync,
	OpAlloc, OpFree, OpRecordStream, OpEmptyCache, OpPut, OpAwait, OpReset, OpRegister}

// memory reports whether k is a caching-allocator op.
func (k OpKind) memory() bool { return k == OpAlloc || k == OpFree || k == OpRecordStream }

// Collective reports whether k is a collective of the family (not send or
// receive).
func (k OpKind) Collective() bool {
	switch k {
	case OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll, OpBroadcast:
		return true
	}
	return false
}

// Comm reports whether k runs on a communicator: a collective, a send or a
// receive.
func (k OpKind) Comm() bool { return k.Collective() || k == OpSend || k == OpRecv }

// SyncDevice is the name a sync op gives for cudaDeviceSynchronize.
const SyncDevice = "device"

// OpSpec is one step of a host program.
type OpSpec struct {
	Kind OpKind
	// Name is the kernel or collective name, or the event recorded / waited.
	Name string
	// ID names the op for a variant's patch when its name does not (two
	// records of one event); empty: the name.
	ID     string
	Stream string // empty: the program's first stream
	// Kernel: writes[i] = weight·reads[0] + reads[1] + … (fresh values).
	Reads  []string
	Writes []string
	TimeNs int64 // 0: derived from bytes moved
	// TimeExpr, when set, is the time as a function of the knobs and the
	// profile (gemm(m, k, n), mem(bytes); spec_expr.go).
	TimeExpr *Expr
	// Scale names a host scalar that multiplies a kernel's weight when the
	// op is issued; By is an advance's or increment's amount (spec_host.go).
	Scale string
	By    int64
	// Launch is "gemm" for a kernel whose host launch costs a GEMM's (a
	// linear layer); empty: a plain kernel's, or a GEMM's when its time
	// calls gemm().
	Launch string
	Weight int64 // 0: a per-rank default weight, distinct per kernel (spec_weights.go)
	// Weights (weight: [w0, w1, …]) gives each rank its own weight: rank
	// r multiplies by Weights[r]. A rank past the list is an error.
	Weights []int64
	// Whole (weight: whole) is the kernel's whole weight on every rank: the
	// sum over the world's ranks of the per-rank weights derived from its
	// name, as a weight left replicated where its peers are sharded holds.
	Whole bool
	// Sum (sum: true) makes a kernel an elementwise add: writes[i] = Σ
	// reads, no weight, and the values keep the provenance of their terms
	// (a data movement), so a report can say which contributions a value
	// holds.
	Sum bool
	// Kernel resources (ranks.KernelSpec.Blocks and Spins): thread blocks
	// that must be resident at once (0: fits anywhere), and whether it
	// holds its SMs while it waits.
	Spin bool
	// HostNs, when positive, is the host time between the previous op's
	// issue and this one's, in place of the launch or event cost (eager
	// only): the gap a profiler trace recorded.
	HostNs int64
	// Collectives, send and receive.
	Comm     string
	In, Out  string
	Strategy string // empty: the strategy knob
	// Blocks is a symmetric-memory kernel's grid size (0: one block), or
	// a kernel's resident thread blocks.
	Blocks int
	// Root is a broadcast's root, as an index into the communicator's
	// ranks (NCCL's root argument).
	Root int
	// Symmetric names the symmetric allocation an allreduce runs its
	// one-shot kernel over (empty: its communicator's workspace), at chunk
	// Offset.
	Symmetric string
	Offset    int
	// Peer is a send's destination or a receive's source: an index into
	// the communicator's ranks, or next / prev (the neighbours in
	// communicator order, wrapping around).
	Peer string
	// Flag is a flag op's buffer, region and value (spec_flags.go).
	Flag *FlagSpec
	// Repeat is set for a repeated block of ops (Kind OpRepeat).
	Repeat *RepeatSpec
	// Capture is set for a capture block (Kind OpCapture; spec_graphs.go).
	Capture *CaptureSpec
	// Values are a fill's values (chunk c gets Values[c % len]).
	Values []uint64
	// When lists conditions on knobs: the op is part of the program only
	// in a configuration where every one holds.
	When []Cond
	pos  posMap
}

// Cond is one condition of an op's when: knob Key has Value.
type Cond struct {
	Key, Value string
}

// holds reports whether every condition of op holds under cfg.
func (op *OpSpec) holds(cfg Config) bool {
	for _, c := range op.When {
		if knobs.Get(&cfg, c.Key) != c.Value {
			return false
		}
	}
	return true
}

// OpsFor is the program's ops in a configuration: those whose when holds.
// A program without conditions is returned as is.
func (p *ProgramSpec) OpsFor(cfg Config) []OpSpec {
	cond := false
	for i := range p.Ops {
		cond = cond || len(p.Ops[i].When) > 0 || p.Ops[i].Repeat != nil
	}
	if !cond {
		return p.Ops
	}
	var out []OpSpec
	for _, op := range p.Ops {
		switch {
		case !op.holds(cfg):
		case op.Repeat != nil:
			out = append(out, op.Repeat.expand(cfg)...)
		default:
			out = append(out, op)
		}
	}
	return out
}

// Pos is a line and column in a file (1-based; 0 when unknown).
type Pos struct{ Line, Col int }

// posMap records where each field of an element was written; "" is the
// element itself.
type posMap map[string]Pos

func (m posMap) at(field string) Pos {
	if p, ok := m[field]; ok {
		return p
	}
	if i := strings.IndexByte(field, '#'); i >= 0 {
		return m.at(field[:i])
	}
	return m[""]
}

// item is the key of the i-th entry of a list field in a posMap.
func item(field string, i int) string { return fmt.Sprintf("%s#%d", field, i) }

// ErrInvalid is wrapped by every error about a scenario file.
var ErrInvalid = errors.New("invalid scenario")

// Error is one problem in a scenario file, with its position.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

func (e *Error) Error() string {
	if e.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Unwrap() error { return ErrInvalid }

// ErrorList is several problems, in file order.
type ErrorList []*Error

// MaxErrors is how many errors one file reports at most.
const MaxErrors = 25

// Error writes one error per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors, so errors.Is and errors.As see each of them.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// errs collects errors for one file.
type errs struct {
	file string
	list ErrorList
	more int
}

func (e *errs) add(p Pos, format string, a ...any) {
	for _, x := range e.list {
		if x.Pos == p && x.Msg == fmt.Sprintf(format, a...) {
			return
		}
	}
	if len(e.list) >= MaxErrors {
		e.more++
		return
	}
	e.list = append(e.list, &Error{File: e.file, Pos: p, Msg: fmt.Sprintf(format, a...)})
}

// err returns the collected errors sorted by position, or nil.
func (e *errs) err() error {
	if len(e.list) == 0 {
		return nil
	}
	out := append(ErrorList(nil), e.list...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Pos.Line != out[j].Pos.Line {
			return out[i].Pos.Line < out[j].Pos.Line
		}
		return out[i].Pos.Col < out[j].Pos.Col
	})
	if e.more > 0 {
		out = append(out, &Error{File: e.file, Msg: fmt.Sprintf("… and %d more errors", e.more)})
	}
	return out
}

// Limits on what a scenario file may ask for, so that no file can make the
// simulator run out of memory or time before it starts.
const (
	MaxFileBytes    = 1 << 20
	MaxRanks        = 64
	MaxTensors      = 256
	MaxCommsPerFile = 32
	MaxStreams      = 32
	MaxEvents       = 256
	MaxOps          = 4096 // per program, and graph ops
	MaxReplays      = 64
	MaxChunks       = 64
	MaxTensorChunks = 4096 // a tensor's own chunks (an all-gather's output: ranks × chunks)
	MaxBlocks       = 64   // a symmetric-memory kernel's grid
	MaxKernelBlocks = 1 << 16
	MaxVariants     = 64
	MaxTensorBytes  = 1 << 40
	MaxNameLen      = knobs.MaxNameLen
	MaxDepth        = 32 // YAML nesting
	// MaxTasks bounds the work of one run: ops issued over all ranks and
	// graph replays.
	MaxTasks = 1 << 20
)

// Comparison asks the text report to print one variant's step time against
// another's ("fixed costs +29µs against buggy").
type Comparison struct {
	Variant, Against string
	Label            string // what the difference is ("the join before the collective")
}
