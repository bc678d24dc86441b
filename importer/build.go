package importer

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// item is one host-program step in host order, before it becomes an op.
type item struct {
	kind   scenarios.OpKind
	ts     float64 // host time the call started (µs): the order
	before bool    // goes before the items of the same ts (an inserted wait)
	issue  float64 // host time the work was handed to the GPU (call end)
	stream int64   // -1: not known yet
	// kernel
	act    *devAct
	op     *cpuOp
	reads  []string // tensor keys
	writes []string
	// span: the bytes [lo, hi) of each tensor key the kernel's operator
	// named (a view: a slice, one half); views.go turns them into chunks.
	span         map[string][2]int64
	progs        map[string][]prog // the elements each view of a key reaches (views.go)
	rdSfx, wrSfx []string          // chunk ranges ("[0:2]") of reads and writes, by views()
	name         string
	// collective
	coll *cpuOp
	peer string // a send's or receive's peer: an index into the communicator
	// record / wait / sync
	corr      int64
	event     string
	waitEvent int64
	recStream int64 // a wait's record stream when CUPTI named it
	recCorr   int64
	// cupti is the CUDA event a wait or an event sync waits on, as
	// CUPTI numbers events (wait_on_cuda_event_id; 0: not given); on a
	// record, the event the record probe's own wait named (pair).
	cupti    int64
	recProbe *cpuOp // a record's collsim::event_record probe, if any
	device   bool   // sync: every stream
	note     string
	// alloc / free / record_stream
	tensorKey string
	mem       *memEvent
	rsOp      *cpuOp
	// captured: a kernel of a graph replay, made at capture: its tensors
	// are the capture's (addresses fixed then), never allocations of the
	// step.
	captured bool
	// syncEvent: a host wait for an event (cudaEventSynchronize, a query
	// seen to return true): written as a wait of the eventsync stream on
	// the event and a sync of that stream, so the host waits for the
	// record's point, not for everything its stream was given since.
	syncEvent string
	// query: a cudaEventQuery, kept as a sync of the event's stream only
	// where the recorded timing says it returned true (pair).
	query bool
	// opaque: the number of the graph launch, for the kernels of a replay
	// whose capture is not in the trace (opaqueReplays gives them tensors).
	opaque int
}

// tensor is one block of device memory the program touches: an
// execution-trace storage ("s12") or an allocation address ("a0x…").
type tensor struct {
	key       string
	chunks    int  // 0: the scenario's
	managed   bool // from an alloc op
	bytes     int64
	labels    []string // annotations of the ops that wrote it, in host order
	readFirst bool
	touched   bool
	written   bool
}

type rankProg struct {
	rank    int
	file    string
	mode    string
	streams []string
	events  []string
	ops     []scenarios.OpSpec
	stepNs  int64
	notes   []string
	guesses int
	kernels int
	colls   map[string][]int // communicator → ranks
	// counts for the summary
	records, waits, syncs, collectives int
}

func (p *rankProg) notef(format string, a ...any) {
	p.notes = append(p.notes, fmt.Sprintf(format, a...))
}

// builder turns one rank's kept events into a program.
type builder struct {
	rt      *rankTrace
	et      map[int64]*ETOp // nil: no execution trace
	p       *rankProg
	tensors map[string]*tensor
	order   []string // tensor keys in first-touch order
	byExt   map[int64]*cpuOp
	annots  []*cpuOp
	comms   []*cpuOp
	fallbk  int // kernels whose reads and writes fell back to allocations
	named   []namedTensor
	// Lifetime mode (an execution trace and [memory] events): tensors the
	// step allocates are alloc/free-managed, and the simulated caching
	// allocator decides which block each gets.
	lifetime bool
	live     map[int64]*liveTensor // by ET storage id
	byAddr   map[string]int64      // live address → storage
	claimed  map[*memEvent]bool
	gen      int
	uses     map[string][]int64 // streams whose kernels touched a tensor
	noET     int                // kernels whose op the execution trace does not have
	// owner maps an allocation ([memory] event) to the execution-trace
	// storage of the operator it happened in (empty, empty_like, zeros,
	// the kernel's own operator, …): the tie between a block and a tensor.
	owner map[*memEvent]int64
	owned map[int64][]*memEvent // owner's inverse, in host order
	// rsPending holds record_stream calls until their tensor is freed,
	// when the allocator reads the block's stream uses.
	rsPending map[string][]*item
	// rsGuessed counts record_stream calls whose stream was inferred.
	rsGuessed, rsProbed, noKernelAllocs int
	probes                              []*cpuOp // collsim::record_stream annotations (validation/collsim_record.py)
	probeStream                         map[*cpuOp]int64
	probeEvent                          map[*cpuOp]int64 // an event-record probe → the CUPTI id of the event it recorded
	streamQueries                       [2]int           // cudaStreamQuery calls: of no stream the trace names, and seen to return true
	pageable                            int              // copies to pageable host memory (the host waited for each)
	unseen                              int              // outputs of unrecorded threads tied to a free of a block no allocation made (unseenAlloc)
	capCalls                            map[int][]*call  // a capture's launches, by capture (capLaunches)
	graphOf                             map[int]string   // an opaque or foreign replay (its number) → the graph it replays (opaqueReplays)
	replays                             int
	emptyCaches                         int
	recProbed                           int                 // event records whose stream a probe named
	foreignAt                           map[int]int         // a replay of a capture from another ET session (graph.go) → the capture
	sliced                              int                 // tensors some kernel reaches in part (views.go)
	orphanRf                            int64               // keys given to linked orphan operators in et (below every ET key)
	queries                             int                 // event queries that saw their event done
	blindSyncs                          int                 // queries of threads that launch and free nothing after them
	freed                               map[int64]*memEvent // a storage id → the free of its last block in the step
	reusedByID                          int                 // outputs given a freed block by their storage id (no allocation in the trace)
	sized                               int                 // replays told from captures of the same operators by size (bySize)
	hostOpsN                            int                 // host operators on pinned memory (host.go)
	opaqueAt                            map[int]float64     // an opaque graph launch (its number) → its host time
	// bySeq holds the communicators whose calls are named by the process
	// group's sequence number: every rank's records on them carry one
	// (Import decides, over all ranks).
	bySeq map[string]int64
	// beforeFirst counts, per communicator, the calls left out below the
	// first sequence number every rank holds.
	beforeFirst map[string]int
}

func newBuilder(rt *rankTrace, et map[int64]*ETOp, rank int) *builder {
	b := &builder{rt: rt, et: et, p: &rankProg{rank: rank, file: rt.file, colls: map[string][]int{}}, tensors: map[string]*tensor{}, byExt: map[int64]*cpuOp{},
		probeStream: map[*cpuOp]int64{}, probeEvent: map[*cpuOp]int64{}, graphOf: map[int]string{}, opaqueAt: map[int]float64{}, foreignAt: map[int]int{}, rsPending: map[string][]*item{}, beforeFirst: map[string]int{}}
	if rt.steps > 0 {
		b.p.notef("the step annotation %q occurs %d times on its thread (iterations of a loop): imported from the first to the last as one step, so a race from one into the next shows (--step-index N imports one)", rt.step, rt.steps+1)
	}
	for _, op := range rt.ops {
		if op.ext >= 0 {
			if _, dup := b.byExt[op.ext]; !dup || op.cat == "cpu_op" {
				b.byExt[op.ext] = op
			}
		}
		switch {
		case op.name == "record_param_comms":
			b.comms = append(b.comms, op)
		case op.name == probeAnnotation || op.name == eventProbe || op.name == queryProbe:
			b.probes = append(b.probes, op)
		case op.cat == "user_annotation" && op.name != rt.step && !strings.HasPrefix(op.name, "ProfilerStep#") && !strings.HasPrefix(op.name, "nccl:") && !strings.HasPrefix(op.name, "##"):
			b.annots = append(b.annots, op)
		}
	}
	return b
}

// annotation is the innermost record_function range around t on host
// thread tid.
func (b *builder) annotation(t float64, tid ID) string {
	best := ""
	bestLen := math.Inf(1)
	for _, a := range b.annots {
		if a.tid == tid && t >= a.ts && t <= a.end && a.end-a.ts < bestLen {
			best, bestLen = a.name, a.end-a.ts
		}
	}
	return best
}

// commAt is the record_param_comms op on host thread tid whose range holds
// t, if any.
func (b *builder) commAt(t float64, tid ID) *cpuOp {
	for _, c := range b.comms {
		if c.tid == tid && t >= c.ts && t <= c.end {
			return c
		}
	}
	return nil
}

func (b *builder) tensor(key string, bytes int64) *tensor {
	t, ok := b.tensors[key]
	if !ok {
		t = &tensor{key: key}
		b.tensors[key] = t
		b.order = append(b.order, key)
	}
	t.bytes = max(t.bytes, bytes)
	return t
}

// access works out what kernel it reads and writes: the execution trace's
// tensors of its operator, or (without one) the blocks the operator
// allocated, which it writes.
func (b *builder) access(it *item, label string) {
	op := it.op
	if op != nil && b.et != nil {
		if eo, ok := b.et[op.rf]; ok {
			for _, r := range eo.Inputs {
				key := "s" + strconv.FormatInt(r.Storage, 10)
				it.reads = appendOnce(it.reads, key)
				b.tensor(key, r.Bytes())
				it.addSpan(key, r)
			}
			for _, w := range append(append([]TensorRef(nil), eo.Outputs...), eo.Mutated...) {
				key := "s" + strconv.FormatInt(w.Storage, 10)
				it.writes = appendOnce(it.writes, key)
				b.tensor(key, w.Bytes())
				it.addSpan(key, w)
			}
			b.hostAccess(it, eo)
			b.touch(it, label)
			return
		}
		b.noET++
	}
	if op != nil {
		for _, m := range b.rt.mem {
			if m.bytes > 0 && m.ts >= op.ts && m.ts <= op.end {
				key := "a" + m.addr
				it.writes = appendOnce(it.writes, key)
				b.tensor(key, m.bytes)
			}
		}
	}
	b.fallbk++
	b.touch(it, label)
}

func (b *builder) touch(it *item, label string) {
	for _, k := range append(append([]string(nil), it.reads...), it.writes...) {
		if b.uses != nil && !containsInt(b.uses[k], it.stream) {
			b.uses[k] = append(b.uses[k], it.stream)
		}
	}
	for _, k := range it.reads {
		t := b.tensors[k]
		if !t.touched {
			t.readFirst = true
		}
		t.touched = true
	}
	for _, k := range it.writes {
		t := b.tensors[k]
		t.touched, t.written = true, true
		if label != "" && (len(t.labels) == 0 || t.labels[len(t.labels)-1] != label) {
			t.labels = append(t.labels, label)
		}
	}
}

func appendOnce(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

var launchNames = []string{"Launch", "Memset", "Memcpy"}

func isLaunchCall(name string) bool {
	if strings.Contains(name, "GraphLaunch") {
		return false
	}
	for _, n := range launchNames {
		if strings.Contains(name, n) {
			return true
		}
	}
	return false
}

// shortOp is an operator name as a scenario name part: "aten::mm" → "mm".
func shortOp(name string) string {
	name = strings.TrimPrefix(name, "aten::")
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	return name
}

// shortKernel is a kernel's name without its template arguments and
// namespace: "void at::native::vectorized_elementwise_kernel<4, …>(…)" →
// "vectorized_elementwise_kernel".
func shortKernel(name string) string {
	name = strings.TrimPrefix(name, "void ")
	if i := strings.IndexAny(name, "<("); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	if len(name) > 48 {
		name = name[:48]
	}
	return name
}

// sanitize makes s a valid scenario name: no spaces, no = | , and at most
// 100 characters (room for a suffix).
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_.:/#+-@[]", r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

func streamName(s int64) string {
	if s == hostStream {
		return "host"
	}
	if s == eventSyncStream {
		return "eventsync"
	}
	return "stream" + strconv.FormatInt(s, 10)
}

func ns(us float64) int64 { return int64(math.Round(us * 1000)) }

// dtypeBytes is the element size of a record_param_comms dtype.
func dtypeBytes(dt string) int64 {
	switch strings.ToLower(dt) {
	case "double", "long", "int64", "float64", "complexfloat":
		return 8
	case "float", "int", "int32", "float32":
		return 4
	case "half", "bfloat16", "short", "float16", "int16":
		return 2
	case "byte", "char", "bool", "int8", "uint8", "float8_e4m3fn", "float8_e5m2":
		return 1
	}
	return 4
}

// kernelName names a kernel op: its annotation and operator ("y.sin"), or
// the kernel's own short name.
func kernelName(label string, op *cpuOp, act *devAct) string {
	base := ""
	switch {
	case actKind(act) != "kernel":
		base = actKind(act)
		if op != nil && op.cat == "cpu_op" {
			base = shortOp(op.name) + "." + base
		}
	case op != nil && op.cat == "cpu_op":
		base = shortOp(op.name)
	default:
		base = shortKernel(act.name)
	}
	if label != "" && label != base && !strings.HasPrefix(base, label+".") {
		base = label + "." + base
	}
	return sanitize(base)
}

type namer map[string]int

func (n namer) unique(s string) string {
	n[s]++
	if n[s] == 1 {
		return s
	}
	return s + "#" + strconv.Itoa(n[s])
}

// eager builds the program of an eagerly executed step.
func (b *builder) eager() error {
	rt, p := b.rt, b.p
	p.mode = "eager"
	if b.et != nil && len(rt.mem) > 0 {
		b.lifetime = true
		b.live, b.byAddr, b.claimed, b.uses = map[int64]*liveTensor{}, map[string]int64{}, map[*memEvent]bool{}, map[string][]int64{}
		b.freed = map[int64]*memEvent{}
	}
	var items []*item
	var orphans []orphanLaunch
	lastAct := b.lastActs()
	for _, c := range rt.calls {
		if c.capture || c.capIdx >= 0 {
			continue // made at capture: a replay issues it (inlineReplay)
		}
		if hostQueries[c.name] && c.tid != rt.tid && c.ts > lastAct[c.tid] {
			// A query on a thread other than the step's that launches
			// and frees nothing after it (NCCL's watchdog polling its
			// work's end events): what the thread learnt reaches no
			// launch and no free, so it orders nothing. On the step's
			// thread, or before a later launch of its own, it is kept
			// (threads are merged by host time). A blocking sync on
			// such a thread is kept too: a thread that blocks on the
			// device to launch nothing after it blocks to tell another
			// (a logger thread answering through a queue), which the
			// trace cannot show.
			b.blindSyncs++
			continue
		}
		acts := rt.dev[c.corr]
		var work, syncs []*devAct
		for _, a := range acts {
			if a.cat == "cuda_sync" {
				syncs = append(syncs, a)
			} else {
				work = append(work, a)
			}
		}
		switch {
		case strings.Contains(c.name, "GraphLaunch"):
			items = append(items, b.inlineReplay(c, work)...)
		case len(work) > 0 && b.probeAt(c.ts, c.tid) != nil:
			// collsim_record's record_stream or event-record probe: its
			// stream names the call's stream; the kernel is not the
			// program's.
			// An event-record probe's second kernel runs on its private
			// stream, after the record: the first names the stream.
			pr := b.probeAt(c.ts, c.tid)
			if _, ok := b.probeStream[pr]; !ok {
				b.probeStream[pr] = work[0].stream
			}
		case len(work) > 0:
			op := b.byExt[c.ext]
			if op == nil {
				// A launch with no External id: the innermost op around it.
				op = b.opAt(c.ts, c.tid)
			}
			var its []*item
			for _, a := range work {
				its = append(its, &item{kind: scenarios.OpKernel, ts: c.ts, issue: c.end, stream: a.stream, act: a, op: op, coll: b.commAt(c.ts, c.tid)})
			}
			if op == nil && c.tid != rt.tid {
				orphans = append(orphans, orphanLaunch{c, its})
			}
			items = append(items, its...)
			for _, a := range work {
				// A copy from the device to pageable (not pinned) host
				// memory returns only once it is done, even
				// cudaMemcpyAsync: the host waited for its stream.
				if strings.HasSuffix(a.name, "-> Pageable)") {
					// The copy is issued when the call starts; the host
					// is in the call until it returns, done.
					for _, it := range its {
						if it.act == a {
							it.issue = c.ts
						}
					}
					items = append(items, &item{kind: scenarios.OpSync, ts: c.end, issue: c.end, stream: a.stream, waitEvent: -1})
					b.pageable++
				}
			}
		case strings.HasPrefix(c.name, "cudaEventRecord"):
			it := &item{kind: scenarios.OpRecord, ts: c.ts, issue: c.end, stream: -1, corr: c.corr}
			if pr := b.probeAt(c.ts, c.tid); pr != nil && pr.name == eventProbe {
				it.recProbe = pr
				if s, ok := b.probeStream[pr]; ok {
					it.stream = s
					b.recProbed++
				}
			}
			items = append(items, it)
		case c.name == "cudaStreamWaitEvent":
			if pr := b.probeAt(c.ts, c.tid); pr != nil && pr.name == eventProbe {
				// The probe's own wait, on a stream of its own that
				// runs nothing: CUPTI's id of the event just recorded.
				if len(syncs) > 0 && syncs[0].waitEvent > 0 {
					b.probeEvent[pr] = syncs[0].waitEvent
				}
				continue
			}
			it := &item{kind: scenarios.OpWait, ts: c.ts, issue: c.end, stream: -1, waitEvent: -1, recStream: -1, recCorr: -1}
			if len(syncs) > 0 {
				s := syncs[0]
				it.stream, it.waitEvent, it.recStream, it.recCorr, it.cupti = s.stream, s.waitEvent, s.waitStream, s.waitCorr, max(s.waitEvent, 0)
			}
			items = append(items, it)
		case c.name == "cudaStreamSynchronize":
			it := &item{kind: scenarios.OpSync, ts: c.ts, issue: c.end, stream: -1}
			if len(syncs) > 0 && syncs[0].stream >= 0 {
				it.stream = syncs[0].stream
			} else {
				it.device = true
				it.note = "cudaStreamSynchronize without a cuda_sync entry naming its stream: imported as a device sync"
			}
			items = append(items, it)
		case c.name == "cudaFree" && b.opAt(c.ts, c.tid) == nil:
			// The caching allocator calls cudaFree only when it gives
			// memory back to the driver, having synchronized first; from
			// outside any operator that is torch.cuda.empty_cache(). A run
			// of them is one empty_cache. (A cudaFree inside an operator is
			// a library's own, such as cuBLAS's cudaFree(0) at its first
			// call: not the allocator's.)
			if n := len(items); n > 0 && items[n-1].kind == scenarios.OpEmptyCache {
				items[n-1].issue = c.end
				continue
			}
			items = append(items, &item{kind: scenarios.OpEmptyCache, ts: c.ts, issue: c.end, stream: -1})
		case c.name == "cudaDeviceSynchronize" || c.name == "cudaCtxSynchronize":
			items = append(items, &item{kind: scenarios.OpSync, ts: c.ts, issue: c.end, stream: -1, device: true})
		case c.name == "cudaStreamQuery":
			// torch.cuda.Stream.query(): true when every piece of work
			// issued to the stream has ended. Where the recorder's probe
			// names the stream and the recorded timing says it returned
			// true (the stream's last work before it ended before it
			// returned: a polling loop's last query), the host knew the
			// stream drained: a sync of it. Else it orders nothing.
			pr := b.probeAt(c.ts, c.tid)
			s, ok := b.probeStream[pr]
			if pr == nil || pr.name != queryProbe || !ok {
				b.streamQueries[0]++
				continue
			}
			done := math.Inf(-1)
			for _, k := range items {
				if k.act != nil && k.stream == s && k.issue <= c.ts {
					done = max(done, k.act.ts+k.act.dur)
				}
			}
			if c.end < done {
				continue // it returned false: the host learnt nothing
			}
			b.streamQueries[1]++
			items = append(items, &item{kind: scenarios.OpSync, ts: c.ts, issue: c.end, stream: s, waitEvent: -1})
		case c.name == "cudaEventQuery":
			// Its "Event Sync" entry names the event queried, as a
			// cudaEventSynchronize's does: paired by that number.
			it := &item{kind: scenarios.OpSync, ts: c.ts, issue: c.end, stream: -1, waitEvent: 0, recStream: -1, recCorr: -1, corr: c.corr, device: true, query: true}
			if len(syncs) > 0 {
				it.waitEvent, it.recStream, it.recCorr, it.cupti = syncs[0].waitEvent, syncs[0].waitStream, syncs[0].waitCorr, max(syncs[0].waitEvent, 0)
			}
			items = append(items, it)
		case c.name == "cudaEventSynchronize":
			it := &item{kind: scenarios.OpSync, ts: c.ts, issue: c.end, stream: -1, waitEvent: -1, recStream: -1, recCorr: -1, corr: c.corr, device: true}
			if len(syncs) > 0 {
				it.waitEvent, it.recStream, it.recCorr, it.cupti = syncs[0].waitEvent, syncs[0].waitStream, syncs[0].waitCorr, max(syncs[0].waitEvent, 0)
			}
			items = append(items, it)
		}
	}
	b.linkOrphans(orphans)
	return b.finish(append(items, b.hostOps(items)...))
}

// hostQueries are the runtime calls through which the host asks, without
// blocking, whether device work ended.
var hostQueries = map[string]bool{"cudaEventQuery": true, "cudaStreamQuery": true}

// lastActs is, per host thread, the host time of its last launch (a call
// that made device work) or free in the step.
func (b *builder) lastActs() map[ID]float64 {
	last := map[ID]float64{}
	set := func(tid ID, t float64) {
		if v, ok := last[tid]; !ok || t > v {
			last[tid] = t
		}
	}
	for _, c := range b.rt.calls {
		for _, a := range b.rt.dev[c.corr] {
			if a.cat != "cuda_sync" {
				set(c.tid, c.ts)
				break
			}
		}
		if strings.Contains(c.name, "GraphLaunch") {
			set(c.tid, c.ts)
		}
	}
	for _, m := range b.rt.mem {
		if m.bytes < 0 && b.rt.window.has(m.ts) {
			set(m.tid, m.ts)
		}
	}
	return last
}

// hasSyncEvents reports whether the trace holds any cuda_sync entry (it was
// recorded with enable_cuda_sync_events=True).
func (b *builder) hasSyncEvents() bool {
	for _, as := range b.rt.dev {
		for _, a := range as {
			if a.cat == "cuda_sync" {
				return true
			}
		}
	}
	return false
}

// rel is a host time relative to the trace's first event, for notes.
func (b *builder) rel(t float64) float64 {
	if math.IsInf(b.rt.t0, 0) {
		return t
	}
	return t - b.rt.t0
}

// probeAnnotation is the range validation/collsim_record.py puts around a
// record_stream call, with one empty kernel on the named stream inside.
const probeAnnotation = "collsim::record_stream"

// eventProbe is the range collsim_record puts around an event record
// (torch.cuda.Event.record, and so Stream.record_event and wait_stream),
// with one empty kernel on the record's stream first: CUPTI reports a
// wait's stream but not a record's, and the kernel's stream names it.
const eventProbe = "collsim::event_record"

// queryProbe is the range collsim_record puts around a
// torch.cuda.Stream.query(), with one empty kernel on the queried stream
// first: cudaStreamQuery's record does not name its stream.
const queryProbe = "collsim::stream_query"

// probeAt is the record_stream probe range on host thread tid holding host
// time t, if any.
func (b *builder) probeAt(t float64, tid ID) *cpuOp {
	for _, pr := range b.probes {
		if pr.tid == tid && t >= pr.ts && t <= pr.end {
			return pr
		}
	}
	return nil
}

// opAt is the innermost cpu_op on host thread tid whose range holds t.
func (b *builder) opAt(t float64, tid ID) *cpuOp {
	var best *cpuOp
	for _, op := range b.rt.ops {
		if op.cat == "cpu_op" && op.tid == tid && t >= op.ts && t <= op.end && (best == nil || op.end-op.ts < best.end-best.ts) {
			best = op
		}
	}
	return best
}

type liveTensor struct {
	key  string
	addr string
}

// memItems adds the step's frees and record_stream calls as items, in
// lifetime mode.
func (b *builder) memItems(items []*item) []*item {
	if !b.lifetime {
		return items
	}
	for _, m := range b.rt.mem {
		if m.bytes < 0 && b.rt.window.has(m.ts) {
			items = append(items, &item{kind: scenarios.OpFree, ts: m.ts, issue: m.ts, stream: -1, mem: m})
		}
	}
	for _, op := range b.rt.ops {
		if op.name == "aten::record_stream" && b.rt.window.has(op.ts) {
			it := &item{kind: scenarios.OpRecordStream, ts: op.ts, issue: op.end, stream: -1, rsOp: op}
			if pr := b.probeAt(op.ts, op.tid); pr != nil {
				if s, ok := b.probeStream[pr]; ok {
					it.stream = s
				}
			}
			items = append(items, it)
		}
	}
	return items
}

// owners ties every allocation of the step to the execution-trace storage
// of the operator it happened in: the innermost operator with an
// execution-trace node whose range holds the [memory] event and whose
// outputs name a storage at least that large. That is how a block from
// torch.empty / empty_like / new_empty / zeros, written later through out=
// or in place, is the same tensor as its kernel's output.
func (b *builder) owners() {
	b.owner = map[*memEvent]int64{}
	b.owned = map[int64][]*memEvent{}
	// One sweep over the operators (sorted by start) and the allocations
	// (sorted by time) with the stack of operators open at each: ranges on
	// one host thread nest, so the innermost is on top.
	// Each host thread has its stack; an allocation belongs to an operator
	// of the thread that made it.
	stacks := map[ID][]*cpuOp{}
	oi := 0
	ops := b.rt.ops
	for _, m := range b.rt.mem {
		for oi < len(ops) && ops[oi].ts <= m.ts {
			if op := ops[oi]; op.cat == "cpu_op" {
				st := stacks[op.tid]
				for len(st) > 0 && st[len(st)-1].end < op.ts {
					st = st[:len(st)-1]
				}
				stacks[op.tid] = append(st, op)
			}
			oi++
		}
		stack := stacks[m.tid]
		for len(stack) > 0 && stack[len(stack)-1].end < m.ts {
			stack = stack[:len(stack)-1]
		}
		stacks[m.tid] = stack
		if m.bytes <= 0 {
			continue
		}
	find:
		for i := len(stack) - 1; i >= 0; i-- {
			op := stack[i]
			if m.ts > op.end {
				continue
			}
			eo := b.et[op.rf]
			if eo == nil {
				continue
			}
			for _, w := range eo.Outputs {
				if eo.rewrites(w.Storage) {
					continue // existed before the operator: its allocation is a temporary
				}
				if w.Bytes() <= m.bytes && w.Bytes() > 0 {
					b.owner[m] = w.Storage
					b.owned[w.Storage] = append(b.owned[w.Storage], m)
					break find
				}
			}
		}
	}
}

// unseenAlloc is the allocation of an output of an operator of a thread
// the profiler did not record (orphan.go): its [memory] events are not in
// the trace either, but the free of its block is when another thread frees
// it. The first free in the step, after the operator, of a block of at
// least the output's size that no allocation in the trace made is taken
// to be it (a guess the notes count); the allocation is made at the
// operator.
func (b *builder) unseenAlloc(op *cpuOp, r TensorRef) *memEvent {
	allocated := map[string]bool{}
	for _, m := range b.rt.mem {
		if m.bytes > 0 {
			allocated[m.addr] = true
			continue
		}
		if m.ts < op.end || allocated[m.addr] || b.claimed[m] || -m.bytes < r.Bytes() || !b.rt.window.has(m.ts) {
			continue
		}
		b.claimed[m] = true
		b.unseen++
		return &memEvent{idx: -1, tid: op.tid, ts: op.ts, addr: m.addr, bytes: -m.bytes}
	}
	return nil
}

// accessLive is access in lifetime mode: an output storage with no live
// tensor takes the allocation its operator made ([memory] event of its size
// inside the operator), which becomes an alloc op before the kernel; a
// storage the step did not allocate is a plain tensor.
func (b *builder) accessLive(it *item, label string) (allocs []*item, ok bool) {
	eo, found := b.et[it.op.rf]
	if !found {
		return nil, false
	}
	if b.owner == nil {
		b.owners()
	}
	keyOf := func(s int64) string {
		if l := b.live[s]; l != nil {
			return l.key
		}
		return "s" + strconv.FormatInt(s, 10)
	}
	// claim makes the storage's allocation an alloc op before the kernel:
	// for an output, the one its own operator made, else the latest
	// earlier allocation tied to this storage by an operator that launched
	// no kernel. An input existed before its operator: an allocation
	// inside the operator is a temporary (a reduction's workspace), never
	// the input's block.
	claim := func(r TensorRef, output bool) {
		if it.captured || b.live[r.Storage] != nil {
			return
		}
		var got *memEvent
		temporary := eo.rewrites(r.Storage) || !output
		for _, m := range b.rt.mem {
			if temporary {
				break // existed before the operator: its allocation is a temporary
			}
			if m.bytes > 0 && !b.claimed[m] && m.tid == it.op.tid && m.ts >= it.op.ts && m.ts <= it.op.end && (got == nil || (m.bytes == r.Bytes() && got.bytes != r.Bytes())) && m.bytes >= r.Bytes() {
				got = m
			}
		}
		if got == nil {
			for _, m := range b.owned[r.Storage] {
				if !b.claimed[m] && m.ts < it.op.ts && b.rt.window.has(m.ts) {
					got = m
				}
			}
			if got != nil {
				b.noKernelAllocs++
			}
		}
		if got == nil && !temporary && b.freed[r.Storage] != nil {
			// No allocation in the trace, but the execution trace's
			// storage id (it follows the data pointer) is a block the
			// step freed: the allocator handed that block out again,
			// to an operator whose allocations the profiler did not
			// record (a thread started in the region).
			f := b.freed[r.Storage]
			got = &memEvent{idx: -1, tid: it.op.tid, ts: it.op.ts, addr: f.addr, bytes: -f.bytes}
			b.reusedByID++
		}
		if got == nil && it.op.idx == -1 && !temporary {
			got = b.unseenAlloc(it.op, r)
		}
		if got == nil {
			return
		}
		b.claimed[got] = true
		b.gen++
		key := "s" + strconv.FormatInt(r.Storage, 10) + "." + strconv.Itoa(b.gen)
		b.live[r.Storage] = &liveTensor{key: key, addr: got.addr}
		b.byAddr[got.addr] = r.Storage
		t := b.tensor(key, got.bytes)
		t.managed = true
		allocs = append(allocs, &item{kind: scenarios.OpAlloc, ts: got.ts, issue: got.ts, stream: it.stream, tensorKey: key, mem: got})
	}
	for _, w := range append(append([]TensorRef(nil), eo.Outputs...), eo.Mutated...) {
		claim(w, true)
		key := keyOf(w.Storage)
		it.writes = appendOnce(it.writes, key)
		b.tensor(key, w.Bytes())
		it.addSpan(key, w)
	}
	for _, r := range eo.Inputs {
		claim(r, false)
		key := keyOf(r.Storage)
		it.reads = appendOnce(it.reads, key)
		b.tensor(key, r.Bytes())
		it.addSpan(key, r)
	}
	b.hostAccess(it, eo)
	b.touch(it, label)
	return allocs, true
}

// flushRecordStream writes the record_stream calls made on a tensor, just
// before its free: the stream each named (from collsim_record's probe), or,
// where the trace does not say, every stream other than the allocating one
// whose kernels used the tensor before the free — a guess the notes count.
func (b *builder) flushRecordStream(out []*item, key string, free *item) []*item {
	calls := b.rsPending[key]
	delete(b.rsPending, key)
	if len(calls) == 0 {
		return out
	}
	var alloc int64 = -1
	for _, o := range out {
		if o.kind == scenarios.OpAlloc && o.tensorKey == key {
			alloc = o.stream
		}
	}
	var streams []int64
	for _, c := range calls {
		if c.stream >= 0 {
			b.rsProbed++
			if !containsInt(streams, c.stream) {
				streams = append(streams, c.stream)
			}
			continue
		}
		b.rsGuessed++
		for _, st := range b.uses[key] {
			if st != alloc && !containsInt(streams, st) {
				streams = append(streams, st)
			}
		}
	}
	for _, st := range streams {
		if st == alloc {
			continue // the allocating stream's own work is ordered already
		}
		out = append(out, &item{kind: scenarios.OpRecordStream, ts: free.ts, issue: free.issue, stream: st, tensorKey: key})
	}
	return out
}

// finish resolves kernels' tensors, pairs records with waits, adds the
// allocator's record_stream order, and writes the ops with their host gaps.
func (b *builder) finish(items []*item) error {
	p := b.p
	items = b.memItems(items)
	sortItems(items)
	names := namer{}
	collSeen := map[*cpuOp]bool{}
	collN := map[string]int{}
	var out []*item
	var lastEnd float64 = math.Inf(-1)
	for _, it := range items {
		switch it.kind {
		case scenarios.OpKernel:
		case scenarios.OpFree:
			s, ok := b.byAddr[it.mem.addr]
			if !ok {
				continue // a block the step did not allocate
			}
			it.tensorKey = b.live[s].key
			out = b.flushRecordStream(out, it.tensorKey, it)
			b.freed[s] = it.mem
			delete(b.live, s)
			delete(b.byAddr, it.mem.addr)
			out = append(out, it)
			continue
		case scenarios.OpRecordStream:
			eo := b.et[it.rsOp.rf]
			if eo == nil || len(eo.Inputs) == 0 || b.live[eo.Inputs[0].Storage] == nil {
				continue
			}
			// The allocator reads the block's stream uses when it is
			// freed: the call takes effect at the free (flushRecordStream).
			key := b.live[eo.Inputs[0].Storage].key
			it.tensorKey = key
			b.rsPending[key] = append(b.rsPending[key], it)
			continue
		default:
			out = append(out, it)
			continue
		}
		lastEnd = max(lastEnd, it.act.ts+it.act.dur)
		if c := it.coll; c != nil {
			if collSeen[c] {
				continue // a collective's further kernels are part of it
			}
			collSeen[c] = true
			if ok := b.collective(it, c, collN); ok {
				out = append(out, it)
				continue
			}
			// An opaque kernel named by its collective: it moves data the
			// format cannot say, so it touches no tensor of its operator
			// (only its stream's scratch below).
			it.name, it.op = c.coll, nil
		}
		label := ""
		if it.op != nil {
			label = b.annotation(it.op.ts, it.op.tid)
		}
		if it.name == "" {
			it.name = kernelName(label, it.op, it.act)
		} else {
			it.name = sanitize(it.name)
		}
		it.name = names.unique(it.name)
		if it.op != nil {
			done := false
			if b.lifetime || it.captured && b.et != nil {
				var allocs []*item
				if allocs, done = b.accessLive(it, label); done {
					out = append(out, allocs...)
				}
			}
			if !done {
				b.access(it, label)
			}
		}
		if len(it.writes) == 0 {
			// Nothing the importer can name: the kernel writes its own
			// stream's scratch tensor, so it orders nothing and races
			// with nothing.
			key := "scratch." + streamName(it.stream)
			b.tensor(key, 1)
			it.writes = []string{key}
			b.touch(it, "")
		}
		p.kernels++
		out = append(out, it)
	}
	b.opaqueReplays(out)
	if !b.lifetime {
		out = b.recordStream(out)
	}
	if err := b.pair(out); err != nil {
		return err
	}
	b.views(out)
	if b.sliced > 0 {
		p.notef("%d tensors are reached through views (slices, halves, strided views) of their storage: a kernel reads and writes only the chunks its view covers (T[LO:HI]; rounded outwards where a view's edge falls inside a chunk; a storage some view reaches with a stride is laid out in lanes, element e in lane e mod the stride, so x[::2] and x[1::2] share no chunk)", b.sliced)
	}
	nameOf := b.names()
	for _, it := range out {
		if it.tensorKey != "" {
			it.tensorKey = nameOf[it.tensorKey]
		}
		for i, k := range it.reads {
			it.reads[i] = nameOf[k]
		}
		for i, k := range it.writes {
			it.writes[i] = nameOf[k]
		}
	}
	// Streams in first-use order; events in record order.
	seen := map[int64]bool{}
	var streams []int64
	for _, it := range out {
		if knownStream(it.stream) && !it.device && !seen[it.stream] && (it.kind == scenarios.OpKernel || isColl(it.kind)) {
			seen[it.stream] = true
			streams = append(streams, it.stream)
		}
	}
	for _, it := range out {
		if knownStream(it.stream) && !it.device && !seen[it.stream] {
			seen[it.stream] = true
			streams = append(streams, it.stream)
		}
	}
	for _, s := range streams {
		p.streams = append(p.streams, streamName(s))
	}
	if len(p.streams) == 0 {
		p.streams = []string{"main"}
	}
	first := math.NaN()
	prev := 0.0
	for _, it := range out {
		if it.kind == scenarios.OpRecord && it.event == "" || it.kind == scenarios.OpWait && it.event == "" {
			continue // a record no wait pairs with, or a wait with no record
		}
		if it.query && it.device {
			continue // an event query that saw its event pending, or names none
		}
		op := scenarios.OpSpec{Kind: it.kind}
		if knownStream(it.stream) && !it.device {
			op.Stream = streamName(it.stream)
		}
		switch it.kind {
		case scenarios.OpKernel:
			op.Name = it.name
			op.Reads, op.Writes = withSuffix(it.reads, it.rdSfx), withSuffix(it.writes, it.wrSfx)
			op.TimeNs = max(ns(it.act.dur), 1)
		case scenarios.OpAllReduce, scenarios.OpAllGather, scenarios.OpReduceScatter, scenarios.OpAllToAll, scenarios.OpBroadcast:
			op.Name, op.Comm, op.In, op.Out, op.Strategy = it.name, it.event, it.reads[0], it.writes[0], "nccl"
		case scenarios.OpSend:
			op.Name, op.Comm, op.In, op.Peer = it.name, it.event, it.reads[0], it.peer
		case scenarios.OpRecv:
			op.Name, op.Comm, op.Out, op.Peer = it.name, it.event, it.writes[0], it.peer
		case scenarios.OpRecord, scenarios.OpWait:
			op.Name = it.event
			if it.kind == scenarios.OpRecord {
				p.records++
			} else {
				p.waits++
			}
		case scenarios.OpAlloc, scenarios.OpRecordStream:
			op.Name = it.tensorKey
		case scenarios.OpEmptyCache:
			b.emptyCaches++
			op.Name, op.Stream = "empty_cache"+strconv.Itoa(b.emptyCaches), ""
		case scenarios.OpFree:
			op.Name, op.Stream = it.tensorKey, ""
		case scenarios.OpSync:
			op.Name = scenarios.SyncDevice
			if !it.device {
				op.Name = streamName(it.stream)
			}
			op.Stream = ""
			p.syncs++
			if it.syncEvent != "" {
				// the wait that makes the eventsync stream's end the
				// event's point; the sync below takes the host time
				p.ops = append(p.ops, scenarios.OpSpec{Kind: scenarios.OpWait, Name: it.syncEvent, Stream: streamName(eventSyncStream), HostNs: 1})
			}
		}
		if it.note != "" {
			p.notes = append(p.notes, it.note)
		}
		// alloc, free and record_stream act on the allocator at build time
		// and cost the simulated host nothing: their time stays in the gap
		// before the next op.
		if it.kind != scenarios.OpAlloc && it.kind != scenarios.OpFree && it.kind != scenarios.OpRecordStream {
			if math.IsNaN(first) {
				first = it.issue
			} else if p.mode == "eager" {
				if gap := it.issue - prev; gap > maxDeviceDurUs {
					return hostGap(p.file, it, op, gap, b.rel(it.ts))
				}
				op.HostNs = max(ns(it.issue-prev), 1)
			}
			prev = it.issue
		}
		p.ops = append(p.ops, op)
	}
	// What the host does after the last kernel (event records and waits,
	// frees, syncs) orders nothing that runs after it: its host time is not
	// the step's, which ends when the device does (the recorded step time
	// below). Such ops cost the simulated host nothing.
	last := -1
	for i, op := range p.ops {
		if op.Kind == scenarios.OpKernel || isColl(op.Kind) {
			last = i
		}
	}
	for i := last + 1; last >= 0 && i < len(p.ops); i++ {
		if p.ops[i].HostNs > 1 {
			p.ops[i].HostNs = 1
		}
	}
	if p.mode == "eager" && !math.IsNaN(first) && lastEnd > first {
		p.stepNs = ns(lastEnd - first)
	}
	for _, c := range sortedKeys(b.beforeFirst) {
		p.notef("%d calls on %s before the first sequence number every rank's step holds (%d): the calls they met are outside the other ranks' steps; kept as opaque kernels", b.beforeFirst[c], c, b.bySeq[c])
	}
	if b.rsGuessed > 0 {
		p.notef("%d record_stream calls: the trace does not name the stream each was given (\"<Stream>\"); each is taken to be every stream other than the allocating one whose kernels used the tensor before its free (a guess: a call naming another stream, or one of several, reads safe here; record with validation/collsim_record.py, whose probe names the stream)", b.rsGuessed)
	}
	if len(b.rsPending) > 0 {
		p.notef("%d tensors given record_stream are not freed in the step: the calls have no effect within it", len(b.rsPending))
	}
	if b.noKernelAllocs > 0 {
		p.notef("%d tensors allocated by an operator that launches no kernel (empty, empty_like, new_empty, ...): tied to their block through the execution trace's storage id; allocated on the stream of the first kernel that uses them (the trace does not name the allocating stream)", b.noKernelAllocs)
	}
	if b.et == nil {
		p.notef("no execution trace: each kernel writes the blocks its operator allocated ([memory] events) and reads nothing the importer can name, so a read of freed memory cannot show; record one with torch.profiler.ExecutionTraceObserver and pass it with --et")
	} else if b.noET > 0 {
		p.notef("%d kernels' operators are not in the execution trace: they write the blocks their operator allocated and read nothing named", b.noET)
	}
	if len(p.ops) > scenarios.MaxOps {
		return fmt.Errorf("%s: the step has %d ops on rank %d, more than a scenario file holds (%d); import a shorter step (--step, --step-index)", p.file, len(p.ops), p.rank, scenarios.MaxOps)
	}
	return nil
}

// collKinds maps record_param_comms' collective names (ProcessGroupNCCL's
// RECORD_PARAM_COMMS_DATA calls: "allreduce", "_allgather_base",
// "_reduce_scatter_base", "all_to_all", "broadcast", …) to the format's ops.
func collKind(name string) (scenarios.OpKind, bool) {
	n := strings.ToLower(strings.TrimLeft(name, "_"))
	for _, suf := range []string{"_coalesced", "_into_tensor", "_tensor", "_base", "_oop"} {
		n = strings.TrimSuffix(n, suf)
	}
	switch strings.ReplaceAll(n, "_", "") {
	case "allreduce":
		return scenarios.OpAllReduce, true
	case "allgather":
		return scenarios.OpAllGather, true
	case "reducescatter":
		return scenarios.OpReduceScatter, true
	case "alltoall", "alltoallv", "alltoallbase":
		return scenarios.OpAllToAll, true
	case "broadcast":
		return scenarios.OpBroadcast, true
	}
	return "", false
}

// collective turns the first kernel of a record_param_comms op into a
// collective op of the format (NCCL, on communicator pg<name>); the tensors
// are the message's (In/Out msg nelems × dtype), in place for all-reduce
// and broadcast. Calls match across ranks by their order on the
// communicator, as NCCL requires.
// collTensors is the tensors of the c10d operator (c10d::allreduce_,
// c10d::_allgather_base_, ...) whose range holds the record_param_comms op
// c, from the execution trace: ".buf" for an in-place call (its first
// tensor), ".out" and ".in" for the base calls (output first, as their
// schemas order them). Empty without an execution trace.
func (b *builder) collTensors(c *cpuOp) map[string]string {
	out := map[string]string{}
	if b.et == nil {
		return out
	}
	var best *cpuOp
	for _, op := range b.rt.ops {
		if strings.HasPrefix(op.name, "c10d::") && op.tid == c.tid && c.ts >= op.ts && c.ts <= op.end && b.et[op.rf] != nil && (best == nil || op.end-op.ts < best.end-best.ts) {
			best = op
		}
	}
	if best == nil {
		return out
	}
	eo := b.et[best.rf]
	keyOf := func(r TensorRef) string {
		if l := b.live[r.Storage]; l != nil {
			return l.key
		}
		key := "s" + strconv.FormatInt(r.Storage, 10)
		b.tensor(key, r.Bytes())
		return key
	}
	switch {
	case len(eo.Inputs) >= 2 && strings.Contains(best.name, "_base_"):
		out[".out"], out[".in"] = keyOf(eo.Inputs[0]), keyOf(eo.Inputs[1])
	case len(eo.Inputs) >= 1:
		out[".buf"] = keyOf(eo.Inputs[0])
	}
	return out
}

func (b *builder) collective(it *item, c *cpuOp, n map[string]int) bool {
	p := b.p
	if k, ok := p2pKind(c.coll); ok {
		return b.p2p(it, c, k, n)
	}
	kind, ok := collKind(c.coll)
	if !ok {
		p.notef("%s on process group %q: kept as an opaque kernel (no collective op for it)", c.coll, c.pg)
		return false
	}
	if !c.hasRanks || len(c.pgRanks) == 0 {
		p.notef("%s on process group %q has no readable \"Process Group Ranks\": kept as an opaque kernel", c.coll, c.pg)
		return false
	}
	g := len(c.pgRanks)
	comm := sanitize("pg" + c.pg)
	// The call's name is what pairs it with its peers' calls: the
	// simulator's NCCL meets the k-th call of every rank on a communicator
	// and reports a mismatch when their names or signatures differ. The
	// name carries the process group's sequence number where every rank's
	// records carry one ("Seq", ProcessGroupNCCL's seqCollective_), else
	// the call's position among this rank's calls on the group.
	seq := int64(n[comm] + 1)
	if first, ok := b.bySeq[comm]; ok && c.seq >= 0 {
		if c.seq < first {
			b.beforeFirst[comm]++
			return false
		}
		seq = c.seq
	}
	n[comm]++
	it.kind = kind
	it.name = fmt.Sprintf("%s.%s.%d", comm, kind, seq)
	it.event = comm
	dt := dtypeBytes(c.dtype)
	inN, outN := max(c.nelems, 1), max(c.outNelems, 1)
	if c.outNelems < 0 {
		outN = inN
	}
	const chunks = 4
	mkNamed := func(suffix string, nelems int64, ch int) string {
		key := "c:" + it.name + suffix
		t := b.tensor(key, nelems*dt)
		t.chunks = min(ch, scenarios.MaxTensorChunks)
		t.touched = true
		t.labels = []string{it.name + suffix}
		return key
	}
	// The tensors the call moves: the execution trace's storages of the
	// c10d operator around record_param_comms where it has them, so a
	// collective on a side stream races with the kernels that use them.
	real := b.collTensors(c)
	mk := func(suffix string, nelems int64, ch int) string {
		if key, ok := real[suffix]; ok {
			t := b.tensors[key]
			t.chunks = max(t.chunks, min(ch, scenarios.MaxTensorChunks))
			return key
		}
		return mkNamed(suffix, nelems, ch)
	}
	switch kind {
	case scenarios.OpAllReduce, scenarios.OpBroadcast:
		key := mk(".buf", inN, chunks)
		b.tensors[key].readFirst = true
		it.reads, it.writes = []string{key}, []string{key}
		if kind == scenarios.OpBroadcast {
			p.notef("%s: the trace does not give the root; taken to be the communicator's first rank", it.name)
		}
	case scenarios.OpAllGather:
		it.reads, it.writes = []string{mk(".in", inN, chunks)}, []string{mk(".out", outN, g*chunks)}
	case scenarios.OpReduceScatter:
		it.reads, it.writes = []string{mk(".in", inN, g*chunks)}, []string{mk(".out", outN, chunks)}
	case scenarios.OpAllToAll:
		it.reads, it.writes = []string{mk(".in", inN, g*chunks)}, []string{mk(".out", outN, g*chunks)}
	}
	if strings.HasPrefix(it.reads[0], "c:") {
		b.tensors[it.reads[0]].readFirst = true
	}
	b.touch(it, "")
	p.colls[comm] = c.pgRanks
	p.collectives++
	return true
}

// pair gives every wait the record it waits on and both their streams.
//
// Exact when the cuda_sync entry names the record (its correlation id and
// stream, libkineto's wait_on_cuda_event_record_corr_id and wait_on_stream).
// Exact too when both ends name the event: CUPTI numbers the event a wait
// waits on (wait_on_cuda_event_id), and collsim_record's event-record probe
// makes a wait of its own on a private stream right after each record
// (and an empty kernel there: Kineto drops the waits of a stream that ran
// no work), so the record carries the same number. A wait then takes the
// latest record of its event.
//
// Otherwise a guess: the latest cudaEventRecord before the wait in host
// order (PyTorch's Stream.wait_stream and Event.wait issue the two back to
// back) that no wait on another event has taken, on the stream the host
// launched to last before the record other than the waiting one, and
// not on the waiting stream where another will do (a stream waiting on its
// own record orders nothing; programs do not write it on purpose). Once
// guessed, a record belongs to the wait's event, so a later wait on
// another event looks further back (e = s.record_event() early, then a
// wait_stream, then a wait on e: e's wait skips wait_stream's record). A
// wait whose stream is unknown (no cuda_sync entry) takes the stream of
// the next kernel issued after it.
func (b *builder) pair(out []*item) error {
	p := b.p
	evN := 0
	// evOf: the CUPTI event of a record, by index in out: from its probe
	// (exact) or from the wait a guess paired it with.
	evOf := map[int]int64{}
	for j, it := range out {
		if it.kind == scenarios.OpRecord && it.recProbe != nil {
			if id, ok := b.probeEvent[it.recProbe]; ok {
				evOf[j] = id
			}
		}
	}
	lastLaunch := func(i int, not int64) int64 {
		for j := i - 1; j >= 0; j-- {
			if k := out[j]; (k.kind == scenarios.OpKernel || isColl(k.kind)) && k.stream != not && k.stream != hostStream {
				return k.stream
			}
		}
		return -1
	}
	guessedRec, guessedWait := 0, 0
	for i, it := range out {
		if it.kind != scenarios.OpWait && !(it.kind == scenarios.OpSync && it.waitEvent >= 0) {
			continue
		}
		if it.event != "" {
			continue // an allocator wait from recordStream, already paired
		}
		if it.kind == scenarios.OpWait && it.stream < 0 {
			for j := i + 1; j < len(out); j++ {
				if (out[j].kind == scenarios.OpKernel || isColl(out[j].kind)) && out[j].stream != hostStream {
					it.stream = out[j].stream
					break
				}
			}
			guessedWait++
			if it.stream < 0 {
				continue
			}
		}
		rec, own := -1, -1
		exact := false
		for j := i - 1; j >= 0; j-- {
			if out[j].kind != scenarios.OpRecord {
				continue
			}
			if it.recCorr >= 0 {
				if out[j].corr == it.recCorr {
					rec, exact = j, true
					break
				}
				continue
			}
			if it.cupti > 0 {
				if id, ok := evOf[j]; ok {
					if id != it.cupti {
						continue // another event's record
					}
					if out[j].recProbe != nil && b.probeEvent[out[j].recProbe] == id {
						rec, exact = j, true
						break
					}
					// A record an earlier wait on this event was paired
					// with by a guess: a candidate like an unknown one
					// (the event may have been recorded again since).
				}
				switch {
				case out[j].stream >= 0 && out[j].stream == it.stream && it.kind == scenarios.OpWait:
					if own < 0 {
						own = j // a record on the waiting stream itself orders nothing: the last resort
					}
				case rec < 0:
					rec = j // the latest record of an unknown event: a guess, unless one of this event is further back
				}
				continue
			}
			rec = j
			break
		}
		if rec < 0 {
			rec = own
		}
		if rec >= 0 && it.cupti > 0 {
			if _, ok := evOf[rec]; !ok {
				evOf[rec] = it.cupti
			}
		}
		if rec < 0 {
			if it.query {
				continue
			}
			if it.kind == scenarios.OpSync {
				// cudaEventSynchronize on an event recorded before the
				// step: the host waited for something; kept as a device
				// sync, which waits for at least that.
				p.notef("a cudaEventSynchronize at host time %.3f µs waits on an event recorded before the step: imported as a device sync (it may wait for more than the host did)", b.rel(it.ts))
			} else {
				p.notef("a stream wait at host time %.3f µs has no cudaEventRecord before it in the step (recorded before the step, or never): dropped", b.rel(it.ts))
			}
			continue
		}
		r := out[rec]
		if r.stream < 0 {
			if it.recStream >= 0 {
				r.stream = it.recStream
			} else {
				not := it.stream
				if it.kind == scenarios.OpSync {
					not = -2
				}
				r.stream = lastLaunch(rec, not)
				guessedRec++
			}
		}
		if !exact {
			p.guesses++
		}
		if r.stream < 0 {
			p.notef("a wait at host time %.3f µs: the stream its event was recorded on is unknown: dropped", b.rel(it.ts))
			continue
		}
		if it.query {
			// torch.cuda.Event.query(): the trace does not say what it
			// returned, but the recorded timing does. The event completed
			// when the last work issued to its stream before the record
			// ended (device times share the host's clock in the trace); a
			// query that returned after that saw it done, and the host
			// went on knowing it (a polling loop's last query). One before
			// saw it pending and orders nothing.
			done := math.Inf(-1)
			for j := rec - 1; j >= 0; j-- {
				if k := out[j]; k.act != nil && k.stream == r.stream {
					done = max(done, k.act.ts+k.act.dur)
				}
			}
			if it.issue < done {
				continue
			}
			b.queries++
		}
		if r.event == "" && (it.kind == scenarios.OpSync || r.stream != it.stream) {
			evN++
			r.event = "e" + strconv.Itoa(evN)
			p.events = append(p.events, r.event)
		}
		if it.kind == scenarios.OpSync {
			// cudaEventSynchronize (or a query seen true): the host waits
			// for the record's point in its stream.
			it.stream, it.device, it.waitEvent, it.syncEvent = eventSyncStream, false, -1, r.event
			continue
		}
		if r.stream == it.stream {
			continue // a stream waiting on itself orders nothing new
		}
		it.event = r.event
	}
	if b.sized > 0 {
		p.notef("%d graph launches replay one of several captures of the same operators: taken to be the capture whose rank by the elements its operators write is the replay's rank by threads among the replays of the same kernels (one function captured at several sizes; a guess)", b.sized)
	}
	if b.reusedByID > 0 {
		p.notef("%d outputs with no allocation in the trace have the storage id of a block the step freed (the execution trace's storage ids follow the data pointer): each is taken to be that block handed out again", b.reusedByID)
	}
	if b.unseen > 0 {
		p.notef("%d tensors made by operators of threads the profiler did not record are tied to the first later free of a block no recorded allocation made, of their size or more (a guess: such threads' allocations are not in the trace)", b.unseen)
	}
	if b.pageable > 0 {
		p.notef("%d copies from the device to pageable host memory: each returns only once it is done (cudaMemcpyAsync too), so the host waited for its stream (a sync)", b.pageable)
	}
	if n := b.streamQueries[1]; n > 0 {
		p.notef("%d cudaStreamQuery calls returned after their stream's work had ended in the recorded timing: each is taken as the host seeing the stream drained (a sync of it; a query before that orders nothing)", n)
	}
	if n := b.streamQueries[0]; n > 0 {
		p.notef("%d cudaStreamQuery calls (torch.cuda.Stream.query()) whose stream the trace does not name: taken to order nothing, so a host that polled a stream until it drained may read as racy (record with validation/collsim_record.py, whose probe names the stream)", n)
	}
	if b.blindSyncs > 0 {
		p.notef("%d queries on host threads other than the step's that launch and free nothing after them (such as NCCL's watchdog polling its work's events): what those threads learn reaches no launch, so they order nothing (a blocking sync on such a thread still orders what every thread does after it: it may answer another thread, as a logger thread through a queue does)", b.blindSyncs)
	}
	if b.queries > 0 {
		p.notef("%d cudaEventQuery calls returned after their event's work had ended in the recorded timing: each is taken as the host seeing the event done (a sync of its stream; a query before that orders nothing)", b.queries)
	}
	if guessedRec > 0 {
		p.notef("%d event records: the trace does not say which stream they were recorded on (wait_on_stream is -1); each is taken to be the stream the host launched to last before it, other than the waiting stream (a guess)", guessedRec)
	}
	if guessedWait > 0 {
		advice := "record with enable_cuda_sync_events=True"
		if b.hasSyncEvents() {
			advice = "the trace has cuda_sync entries, but none for these calls"
		}
		p.notef("%d stream waits without a cuda_sync entry: each is taken to be on the stream of the next kernel (a guess; %s)", guessedWait, advice)
	}
	if p.guesses > 0 {
		p.notef("%d waits paired with the latest event record before them in host order that no wait on another event had taken (the trace has no record correlation id, and no event-record probe named the event: a guess)", p.guesses)
	}

	return nil
}

// names gives every tensor its scenario name: the annotations of the ops
// that wrote it, in host order ("x/w": a block written under "x", freed, and
// handed out again for "w"), else "t<storage>" (or "blk<address>").
func (b *builder) names() map[string]string {
	out := map[string]string{}
	used := map[string]bool{}
	for _, k := range b.order {
		t := b.tensors[k]
		name := strings.Join(t.labels, "/")
		if name == "" {
			switch {
			case strings.HasPrefix(k, "scratch."), strings.HasPrefix(k, "c:"):
				name = k
			case k[0] == 's':
				name = "t" + k[1:]
				id, gen, _ := strings.Cut(k[1:], ".")
				if n, err := strconv.ParseInt(id, 10, 64); err == nil && n >= foreignET {
					// a capture's tensor from its own profiling session
					name = "cap" + strconv.FormatInt(n/foreignET, 10) + ".t" + strconv.FormatInt(n%foreignET, 10)
					if gen != "" {
						name += "." + gen
					}
				}
			case k[0] == 'a':
				name = "blk" + k[1:]
			default:
				name = k
			}
		}
		name = sanitize(name)
		if used[name] {
			name = sanitize(name + "@" + k)
		}
		used[name] = true
		out[k] = name
		b.named = append(b.named, namedTensor{name: name, t: t})
	}
	return out
}

type namedTensor struct {
	name string
	t    *tensor
}

// recordStream adds the order the caching allocator keeps for a block that
// was freed after record_stream and handed out again in the step: the
// allocator records an event on each stream the block was recorded on when
// it is freed (c10/cuda/CUDACachingAllocator.cpp, insert_events) and hands
// the block out only once those events have completed (process_events, the
// cudaEventQuery "Event Sync" entries in the trace). The importer writes
// that as a record on each such stream at the free and a wait before the
// kernel that writes the reused block. The execution trace does not name
// record_stream's stream ("<Stream>"), so the streams are the ones, other
// than the reusing kernel's, whose kernels used the block before: a guess.
func (b *builder) recordStream(out []*item) []*item {
	var rs []*cpuOp
	for _, op := range b.rt.ops {
		if op.name == "aten::record_stream" && b.rt.window.has(op.ts) {
			rs = append(rs, op)
		}
	}
	if len(rs) == 0 {
		return out
	}
	if b.et == nil {
		b.p.notef("%d record_stream calls: without an execution trace the importer cannot tell which block each protects; the allocator's order is left out", len(rs))
		return out
	}
	n := 0
	for _, op := range rs {
		eo := b.et[op.rf]
		if eo == nil || len(eo.Inputs) == 0 {
			continue
		}
		key := "s" + strconv.FormatInt(eo.Inputs[0].Storage, 10)
		ri := -1
		for i, it := range out {
			if it.kind == scenarios.OpKernel && it.ts > op.ts && contains(it.writes, key) && !contains(it.reads, key) {
				ri = i
				break
			}
		}
		if ri < 0 {
			continue // not reused within the step
		}
		w := out[ri].stream
		var users []int64
		for _, it := range out[:ri] {
			if it.kind == scenarios.OpKernel && it.stream != w && (contains(it.reads, key) || contains(it.writes, key)) && !containsInt(users, it.stream) {
				users = append(users, it.stream)
			}
		}
		if len(users) == 0 {
			continue
		}
		free := out[ri].ts
		for _, m := range b.rt.mem {
			if m.bytes < 0 && m.ts > op.ts && m.ts < out[ri].ts && -m.bytes >= b.tensors[key].bytes {
				free = m.ts
				break
			}
		}
		for _, s := range users {
			n++
			ev := "rs" + strconv.Itoa(n)
			b.p.events = append(b.p.events, ev)
			out = append(out,
				&item{kind: scenarios.OpRecord, ts: free, before: true, issue: free, stream: s, event: ev},
				&item{kind: scenarios.OpWait, ts: out[ri].ts, before: true, issue: out[ri].ts, stream: w, event: ev})
		}
		b.p.notef("record_stream: the block of execution-trace storage %s was freed after record_stream and reused by %s on %s: ordered after the work of %d other streams that used it before the free, as the caching allocator orders it (the streams are a guess: the execution trace does not name record_stream's stream)", key[1:], out[ri].name, streamName(w), len(users))
	}
	sortItems(out)
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func containsInt(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// sortItems orders items by host time; an inserted wait goes before the
// items of its time.
func sortItems(xs []*item) {
	sort.SliceStable(xs, func(i, j int) bool {
		if xs[i].ts != xs[j].ts {
			return xs[i].ts < xs[j].ts
		}
		return xs[i].before && !xs[j].before
	})
}

// isColl says whether k is communication on a stream: a collective, a send
// or a receive.
func isColl(k scenarios.OpKind) bool {
	switch k {
	case scenarios.OpAllReduce, scenarios.OpAllGather, scenarios.OpReduceScatter, scenarios.OpAllToAll, scenarios.OpBroadcast, scenarios.OpSend, scenarios.OpRecv:
		return true
	}
	return false
}

// p2pKind maps record_param_comms' "send" and "recv" (ProcessGroupNCCL's
// send and recv) to the format's ops.
func p2pKind(name string) (scenarios.OpKind, bool) {
	switch strings.ToLower(name) {
	case "send":
		return scenarios.OpSend, true
	case "recv":
		return scenarios.OpRecv, true
	}
	return "", false
}

// p2p turns the kernel of a send or receive into the format's op with its
// peer. ProcessGroupNCCL records the peer's rank in the group as "Rank"
// and, for a send, its global rank as "Dst Rank" (a receive: "Src Rank";
// torch/csrc/profiler/util.cpp, saveNcclMeta). NCCL pairs the sends from
// one rank to another with that peer's receives from it in issue order,
// per communicator: the call's name is that pair and the call's position
// among this rank's calls to (or from) the peer, so a send and the receive
// it meets have one name on both ranks.
func (b *builder) p2p(it *item, c *cpuOp, kind scenarios.OpKind, n map[string]int) bool {
	p := b.p
	if !c.hasRanks || len(c.pgRanks) == 0 {
		p.notef("%s on process group %q has no readable \"Process Group Ranks\": kept as an opaque kernel", c.coll, c.pg)
		return false
	}
	peer := c.peer
	if peer < 0 && c.groupRank >= 0 && c.groupRank < int64(len(c.pgRanks)) {
		peer = int64(c.pgRanks[c.groupRank])
	}
	idx := slices.Index(c.pgRanks, int(peer))
	if peer < 0 || idx < 0 || int(peer) == p.rank {
		p.notef("%s on process group %q names no peer of the group (Dst/Src Rank %d, Rank %d, group %v): kept as an opaque kernel", c.coll, c.pg, c.peer, c.groupRank, c.pgRanks)
		return false
	}
	comm := sanitize("pg" + c.pg)
	src, dst := p.rank, int(peer)
	if kind == scenarios.OpRecv {
		src, dst = dst, src
	}
	pair := fmt.Sprintf("%s.p2p.%d-%d", comm, src, dst)
	n[pair]++
	it.kind, it.event, it.peer = kind, comm, strconv.Itoa(idx)
	it.name = fmt.Sprintf("%s.%d", pair, n[pair])
	key := "c:" + it.name + ".msg"
	t := b.tensor(key, max(c.nelems, 1)*dtypeBytes(c.dtype))
	t.chunks = 4
	t.touched = true
	t.labels = []string{it.name + ".msg"}
	if kind == scenarios.OpSend {
		t.readFirst = true
		it.reads = []string{key}
	} else {
		it.writes = []string{key}
	}
	b.touch(it, "")
	p.colls[comm] = c.pgRanks
	p.collectives++
	return true
}
