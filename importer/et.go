package importer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// TensorRef is one tensor an execution-trace node names: the storage (ET's
// storage id, which follows the data pointer), the element offset and count,
// and the element size. Only CUDA tensors are kept.
type TensorRef struct {
	Storage  int64
	Offset   int64
	Numel    int64
	ItemSize int64
	// Step and Extent are the elements past Offset the tensor reaches,
	// from its sizes and strides (layoutOf): every Step-th one up to
	// Offset+Extent (Step 1: all of them; 0: some of them); Extent 0 where
	// the trace gave no strides (Numel elements are taken).
	Step, Extent int64
	// Rows, RowStride and Width describe a view that is not every
	// Step-th element but rows of it (layoutBox): Rows runs of Width
	// consecutive elements, RowStride apart (a column slice of a matrix,
	// qkv[:, :d]); Rows is 0 for any other view.
	Rows, RowStride, Width int64
}

// span is the number of elements from Offset to one past the furthest the
// reference reaches.
func (t TensorRef) span() int64 {
	if t.Extent > 0 {
		return t.Extent
	}
	return t.Numel
}

// Bytes is the extent of the storage the reference reaches.
func (t TensorRef) Bytes() int64 { return (t.Offset + t.span()) * t.ItemSize }

// ETOp is an execution-trace node: the operator's name and the CUDA tensors
// it reads (inputs) and writes (outputs).
type ETOp struct {
	Name    string
	Inputs  []TensorRef
	Outputs []TensorRef
	// Mutated is the first argument's tensors of an in-place operator (its
	// name ends in "_", PyTorch's naming rule for ops that write self:
	// aten::add_, aten::copy_, aten::_foreach_copy_). An in-place op that
	// returns nothing (the _foreach_ family) has no outputs in the trace, so
	// this is the only place its write shows.
	Mutated []TensorRef
	// HostReads and HostWrites are the operator's CPU tensors of more than
	// one element (a pinned buffer a non_blocking copy fills or drains, a
	// host tensor the host then reads or writes): the importer follows
	// those a device copy of the step touches (host.go).
	HostReads, HostWrites []TensorRef
	// HostScalars counts the arguments that come from the host as values:
	// a Python number wrapped as a CPU tensor of one element, or a Double
	// or Scalar argument. A CUDA graph freezes them at capture.
	HostScalars int
	// Orphan marks an operator of a host thread none of whose operators
	// the importer asked for: the profiler recorded that thread's launches
	// but not its operators (a thread the program started inside the
	// recorded region). Such operators are in ReadET's map under negative
	// keys, -1 - their place in the trace; Root is the thread's root node
	// and Node the operator's node id, which orders a thread's operators.
	Orphan     bool
	Root, Node int64
	// CommSeq is the process group's sequence number of the collective
	// this operator (c10d::allreduce_, …) issued: its record_param_comms
	// child's second input, the (seq, isP2P) tuple RECORD_PARAM_COMMS
	// records; -1 when it has none or it is a send or receive.
	CommSeq int64
}

type etNode struct {
	ID      int64  `json:"id"`
	Parent  int64  `json:"ctrl_deps"`
	Name    string `json:"name"`
	Inputs  etIO   `json:"inputs"`
	Outputs etIO   `json:"outputs"`
	Attrs   []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	} `json:"attrs"`
}

type etIO struct {
	Values  []json.RawMessage `json:"values"`
	Types   []string          `json:"types"`
	Shapes  []json.RawMessage `json:"shapes"`
	Strides []json.RawMessage `json:"strides"`
}

// layout is the shape and strides of value i, nil where the trace has
// none.
func (io etIO) layout(i int) (shape, strides json.RawMessage) {
	if i < len(io.Shapes) {
		shape = io.Shapes[i]
	}
	if i < len(io.Strides) {
		strides = io.Strides[i]
	}
	return shape, strides
}

// ReadET streams the execution trace at path (torch.profiler's
// ExecutionTraceObserver output: {"schema": …, "nodes": [ … ]}) and returns
// the operators whose rf_id is in want (nil: every one), by rf_id.
// The tensor tuple [id, storage, offset, numel, itemsize, device] is the
// one torch/csrc/profiler/standalone/execution_trace_observer.cpp writes
// (convertIValue); mlcommons/chakra's et_converter reads the same fields.
func ReadET(path string, want map[int64]bool) (map[int64]*ETOp, error) {
	return readETFile(path, want, Limits{})
}

// readETFile is ReadET under lim.
func readETFile(path string, want map[int64]bool, lim Limits) (map[int64]*ETOp, error) {
	g, f, err := openGuarded(path, lim)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := readET(g, path, want)
	return out, g.finish(err, path)
}

func readET(r io.Reader, file string, want map[int64]bool) (map[int64]*ETOp, error) {
	g := guarded(r, file)
	g.records("nodes")
	dec := json.NewDecoder(g)
	fail := func(ev int, format string, a ...any) error {
		return &Error{File: file, Event: ev, What: "node", Offset: dec.InputOffset(), Msg: fmt.Sprintf(format, a...)}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fail(-1, "not an execution trace; expected a JSON object with \"nodes\"")
	}
	out := map[int64]*ETOp{}
	idOf := map[int64]int64{}  // wanted rf → node id
	seqOf := map[int64]int64{} // node id → its record_param_comms child's sequence number
	seen := false
	// For orphans: every node's parent and the thread roots, within bounds.
	const maxTracked, maxOrphans = 1 << 21, 1 << 12
	parent := map[int64]int64{}
	roots := map[int64]bool{}
	var cands []*ETOp
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fail(-1, "%s; expected a key", jsonMsg(err))
		}
		if kt != "nodes" {
			if err := skipRecord(dec, g); err != nil {
				return nil, fail(-1, "%s in the value of %v", jsonMsg(err), kt)
			}
			continue
		}
		seen = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, fail(-1, "\"nodes\" is not an array")
		}
		for i := 0; dec.More(); i++ {
			if i >= g.lim.MaxEvents {
				return nil, g.tooMany(dec, "node", "nodes", i)
			}
			var n etNode
			off := dec.InputOffset()
			err := dec.Decode(&n)
			if err != nil {
				e := fail(i, "node: %s; expected {id, name, inputs, outputs, attrs}", jsonMsg(err)).(*Error)
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) || e.Offset < off {
					e.Offset, e.skipSpace = off, true
				}
				return nil, e
			}
			if n.Name == "record_param_comms" && len(n.Inputs.Values) > 1 && len(n.Inputs.Types) > 1 && n.Inputs.Types[1] == "Tuple[Int,Bool]" {
				var tup []any
				if json.Unmarshal(n.Inputs.Values[1], &tup) == nil && len(tup) == 2 {
					seq, ok1 := tup[0].(float64)
					p2p, ok2 := tup[1].(bool)
					if ok1 && ok2 && !p2p && seq >= 0 {
						seqOf[n.Parent] = int64(seq)
					}
				}
			}
			rf := int64(-1)
			for _, a := range n.Attrs {
				if a.Name == "rf_id" {
					if err := json.Unmarshal(a.Value, &rf); err != nil {
						e := fail(i, "node %q: rf_id is not an integer", n.Name).(*Error)
						e.Offset, e.skipSpace = off, true
						return nil, e
					}
				}
			}
			if parent != nil {
				if len(parent) >= maxTracked {
					parent, cands = nil, nil
				} else {
					parent[n.ID] = n.Parent
					if strings.HasPrefix(n.Name, "[pytorch|profiler|execution_trace|thread]") {
						roots[n.ID] = true
					}
				}
			}
			wanted := rf >= 0 && (want == nil || want[rf])
			if !wanted && (want == nil || parent == nil || len(cands) >= maxOrphans || strings.HasPrefix(n.Name, "[")) {
				continue
			}
			op := &ETOp{Name: n.Name, CommSeq: -1, Node: n.ID}
			if wanted {
				idOf[rf] = n.ID
			}
			op.HostScalars = hostScalars(n.Inputs)
			for i, v := range n.Inputs.Values {
				sh, st := n.Inputs.layout(i)
				op.Inputs = tensors(v, sh, st, op.Inputs, 0)
			}
			for i, v := range n.Outputs.Values {
				sh, st := n.Outputs.layout(i)
				op.Outputs = tensors(v, sh, st, op.Outputs, 0)
			}
			if inPlace(n.Name) && len(n.Inputs.Values) > 0 {
				sh, st := n.Inputs.layout(0)
				op.Mutated = tensors(n.Inputs.Values[0], sh, st, nil, 0)
				op.HostWrites = hostTensors(n.Inputs.Values[0], nil, 0)
			}
			for _, v := range n.Inputs.Values {
				op.HostReads = hostTensors(v, op.HostReads, 0)
			}
			for _, v := range n.Outputs.Values {
				op.HostWrites = hostTensors(v, op.HostWrites, 0)
			}
			if n.ID >= foreignET {
				op.foreignStorages(n.ID / foreignET)
			}
			if !wanted {
				if len(op.Inputs)+len(op.Outputs) > 0 {
					cands = append(cands, op)
				}
				continue
			}
			out[rf] = op
		}
		if _, err := dec.Token(); err != nil {
			return nil, fail(-1, "%s; expected ] closing \"nodes\"", jsonMsg(err))
		}
	}
	if !seen {
		return nil, fail(-1, "no \"nodes\"; expected an execution trace from ExecutionTraceObserver")
	}
	for rf, id := range idOf {
		if seq, ok := seqOf[id]; ok {
			out[rf].CommSeq = seq
		}
	}
	orphans(out, idOf, parent, roots, cands)
	return out, nil
}

// rewrites reports whether the operator reads and writes storage s (out=,
// in place): the storage existed before it, so what the operator allocates
// is a temporary, never that storage's block.
func (op *ETOp) rewrites(s int64) bool {
	has := func(rs []TensorRef) bool {
		return slices.ContainsFunc(rs, func(r TensorRef) bool { return r.Storage == s })
	}
	return has(op.Inputs) && (has(op.Outputs) || has(op.Mutated))
}

// foreignStorages moves the storage ids of an operator of a capture that
// collsim_record profiled in a session of its own (node ids past
// foreignET: session k has ids k·10^9 + n) to that session's own range:
// each observer session numbers storages afresh, so storage 22 of a
// capture and storage 22 of the step are different memory, and a capture's
// tensors must not be taken for the step's (graph.go, foreignCapture).
func (op *ETOp) foreignStorages(session int64) {
	for _, refs := range [][]TensorRef{op.Inputs, op.Outputs, op.Mutated, op.HostReads, op.HostWrites} {
		for i := range refs {
			if refs[i].Storage >= 0 && refs[i].Storage < foreignET {
				refs[i].Storage += session * foreignET
			}
		}
	}
}

// orphans adds to out, under keys -1, -2, …, the outermost operators with
// CUDA tensors of every host thread that holds none of the operators
// wanted: what a thread the profiler saw launch but recorded no operators
// for ran, in node order per thread, threads in order of their roots.
func orphans(out map[int64]*ETOp, idOf map[int64]int64, parent map[int64]int64, roots map[int64]bool, cands []*ETOp) {
	if parent == nil || len(cands) == 0 {
		return
	}
	rootOf := func(id int64) (int64, []int64) {
		var chain []int64
		for d := 0; d < 256; d++ {
			if roots[id] {
				return id, chain
			}
			p, ok := parent[id]
			if !ok || p == id {
				return -1, chain
			}
			chain = append(chain, p)
			id = p
		}
		return -1, chain
	}
	busy := map[int64]bool{}
	for _, id := range idOf {
		if r, _ := rootOf(id); r >= 0 {
			busy[r] = true
		}
	}
	isCand := map[int64]bool{}
	for _, c := range cands {
		isCand[c.Node] = true
	}
	var keep []*ETOp
	for _, c := range cands {
		r, chain := rootOf(c.Node)
		if r < 0 || busy[r] {
			continue
		}
		outer := true
		for _, a := range chain {
			if isCand[a] {
				outer = false
				break
			}
		}
		if outer {
			c.Orphan, c.Root = true, r
			keep = append(keep, c)
		}
	}
	sort.Slice(keep, func(i, j int) bool {
		if keep[i].Root != keep[j].Root {
			return keep[i].Root < keep[j].Root
		}
		return keep[i].Node < keep[j].Node
	})
	for i, c := range keep {
		out[int64(-1-i)] = c
	}
}

// inPlace reports whether an operator's name says it writes its first
// argument: PyTorch names in-place operators with a trailing underscore
// (aten::mul_, aten::_foreach_add_); a dunder name (__iand__) is not one.
func inPlace(name string) bool {
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	return len(name) > 1 && strings.HasSuffix(name, "_") && !strings.HasSuffix(name, "__")
}

// hostScalars counts an operator's inputs that are host values: a number
// wrapped as a one-element CPU tensor (what `x * 2.0` passes), or an
// argument of type Double or Scalar.
func hostScalars(io etIO) int {
	n := 0
	for i, v := range io.Values {
		typ := ""
		if i < len(io.Types) {
			typ = io.Types[i]
		}
		switch {
		case typ == "Double" || typ == "Scalar":
			n++
		case strings.HasPrefix(typ, "Tensor("):
			var xs []json.RawMessage
			var dev string
			var numel int64
			if json.Unmarshal(v, &xs) == nil && len(xs) == 6 && json.Unmarshal(xs[5], &dev) == nil && json.Unmarshal(xs[3], &numel) == nil && dev == "cpu" && numel <= 1 {
				n++
			}
		}
	}
	return n
}

// hostTensors appends the CPU tensors of more than one element in an ET
// value (tensors reads the CUDA ones).
func hostTensors(v json.RawMessage, out []TensorRef, depth int) []TensorRef {
	return etTensors(v, nil, nil, out, depth, func(dev string, numel int64) bool { return dev == "cpu" && numel > 1 })
}

// tensors appends the CUDA tensors in an ET value: a tensor tuple, or a
// list of values (TensorList, GenericList), at most 8 levels deep; shape
// and strides are the value's own entries of the node's "shapes" and
// "strides" (nested alike; nil where absent).
func tensors(v, shape, strides json.RawMessage, out []TensorRef, depth int) []TensorRef {
	return etTensors(v, shape, strides, out, depth, func(dev string, numel int64) bool { return strings.HasPrefix(dev, "cuda") && numel >= 0 })
}

// etTensors appends the tensor tuples [id, storage, offset, numel,
// itemsize, device] in an ET value that keep accepts, each with the
// elements its shape and strides reach (layoutOf).
func etTensors(v, shape, strides json.RawMessage, out []TensorRef, depth int, keep func(dev string, numel int64) bool) []TensorRef {
	if depth > 8 || len(v) == 0 || v[0] != '[' {
		return out
	}
	var xs []json.RawMessage
	if json.Unmarshal(v, &xs) != nil {
		return out
	}
	if len(xs) == 6 {
		var dev string
		var n [5]int64
		ok := json.Unmarshal(xs[5], &dev) == nil
		for i := 0; ok && i < 5; i++ {
			ok = json.Unmarshal(xs[i], &n[i]) == nil
		}
		if ok {
			if keep(dev, n[3]) && n[4] > 0 && n[2] >= 0 && n[4] <= 64 && n[3] < 1<<50 && n[2] < 1<<50 {
				r := TensorRef{Storage: n[1], Offset: n[2], Numel: n[3], ItemSize: n[4]}
				r.Step, r.Extent = layoutOf(shape, strides, n[3])
				if r.Step == 0 {
					r.Rows, r.RowStride, r.Width = layoutBox(shape, strides)
				}
				out = append(out, r)
			}
			return out
		}
	}
	var shs, sts []json.RawMessage
	if len(shape) > 0 && shape[0] == '[' {
		_ = json.Unmarshal(shape, &shs)
	}
	if len(strides) > 0 && strides[0] == '[' {
		_ = json.Unmarshal(strides, &sts)
	}
	for i, x := range xs {
		var sh, st json.RawMessage
		if len(shs) == len(xs) && len(sts) == len(xs) {
			sh, st = shs[i], sts[i]
		}
		out = etTensors(x, sh, st, out, depth+1, keep)
	}
	return out
}

// layoutBox reads a view that is rows of consecutive elements: with
// dimensions of size 1 or stride 0 aside and the rest in order of stride,
// the first run of them dense from stride 1 (Width elements), the rest
// dense from one stride on (rows of it, RowStride apart). A column slice
// qkv[:, :d] of an n×3d matrix is n rows of d, 3d apart; so is
// qkv[:, :, :d] of a b×s×3d one (b·s rows). rows is 0 for any other view.
func layoutBox(shape, strides json.RawMessage) (rows, rowStride, width int64) {
	var sizes, st []int64
	if json.Unmarshal(shape, &sizes) != nil || json.Unmarshal(strides, &st) != nil || len(sizes) != len(st) {
		return 0, 0, 0
	}
	type dim struct{ size, stride int64 }
	var dims []dim
	for i, n := range sizes {
		if n <= 0 || st[i] < 0 || n > 1<<40 || st[i] > 1<<40 {
			return 0, 0, 0
		}
		if n > 1 && st[i] > 0 {
			dims = append(dims, dim{n, st[i]})
		}
	}
	slices.SortFunc(dims, func(a, b dim) int { return cmp.Compare(a.stride, b.stride) })
	if len(dims) < 2 || dims[0].stride != 1 {
		return 0, 0, 0
	}
	width, i := 1, 0
	for ; i < len(dims) && dims[i].stride == width; i++ {
		width *= dims[i].size
	}
	if i == len(dims) {
		return 0, 0, 0 // dense: a progression, not rows
	}
	rowStride, rows = dims[i].stride, 1
	next := rowStride
	for ; i < len(dims); i++ {
		if dims[i].stride != next {
			return 0, 0, 0
		}
		rows *= dims[i].size
		next = dims[i].stride * dims[i].size
	}
	if rowStride < width {
		return 0, 0, 0
	}
	return rows, rowStride, width
}

// layoutOf reads a tensor's sizes and strides (elements) and returns
// which elements past its offset it reaches: extent is one past the
// furthest (1 + Σ (size−1)·stride), and step > 0 when they are exactly
// every step-th element up to there (dimensions of size 1 or stride 0
// aside, each stride is the previous one times its size: a slice x[::2]
// has step 2; a dense tensor step 1). step is 0 when they are some other
// set (a column of a matrix with a gap), which the extent bounds; extent
// is 0 where the trace gives no sizes and strides (numel elements from
// the offset are taken).
func layoutOf(shape, strides json.RawMessage, numel int64) (step, extent int64) {
	var sizes, st []int64
	if json.Unmarshal(shape, &sizes) != nil || json.Unmarshal(strides, &st) != nil || len(sizes) != len(st) {
		return 1, 0
	}
	type dim struct{ size, stride int64 }
	var dims []dim
	extent = 1
	for i, n := range sizes {
		if n <= 0 {
			return 1, 0 // empty: numel (0) says it all
		}
		if st[i] < 0 || n > 1<<40 || st[i] > 1<<40 {
			return 1, 0
		}
		extent += (n - 1) * st[i]
		if n > 1 && st[i] > 0 {
			dims = append(dims, dim{n, st[i]})
		}
	}
	if extent > 1<<50 {
		return 1, 0
	}
	if len(dims) == 0 {
		return 1, 1
	}
	slices.SortFunc(dims, func(a, b dim) int { return cmp.Compare(a.stride, b.stride) })
	step = dims[0].stride
	for i := 1; i < len(dims); i++ {
		if dims[i].stride != dims[i-1].stride*dims[i-1].size {
			return 0, extent
		}
	}
	return step, extent
}
