package streamsched

import "fmt"

// Placement names a stream-placement transform.
type Placement string

const (
	// Single: every op on the caller's stream, no markers.
	Single Placement = "single"
	// Buggy: multi_stream_moe before TensorRT-LLM PR #14917: the whole shared
	// branch, its trailing all-reduce included, inside the aux window;
	// end_aux after the shared output, wait_aux before the merge.
	Buggy Placement = "buggy"
	// Fixed: after PR #14917: with a trailing collective the aux window holds
	// only the shared GEMMs; end_aux + wait_aux are emitted right after them,
	// so the collective runs on the main stream; a mid-branch collective makes
	// the transform skip the layer.
	Fixed Placement = "fixed"
	// FixedOverlap: like Fixed, but the join (wait_aux) and the shared
	// collective are issued after the routed experts' compute, so the GEMMs
	// still overlap while both collectives stay on main, in the same order.
	FixedOverlap Placement = "fixed-overlap"
)

// ParsePlacement parses a placement name.
func ParsePlacement(s string) (Placement, error) {
	switch Placement(s) {
	case Single, Buggy, Fixed, FixedOverlap:
		return Placement(s), nil
	}
	return "", fmt.Errorf("unknown placement %q (want single, buggy, fixed or fixed-overlap)", s)
}

// Marker is a stream helper inserted by a transform.
type Marker uint8

const (
	NoMarker Marker = iota
	BeginAux        // begin_aux_stream_passthrough
	EndAux          // end_aux_stream_passthrough
	WaitAux         // wait_aux_stream_passthrough
)

func (m Marker) String() string {
	switch m {
	case BeginAux:
		return "begin_aux"
	case EndAux:
		return "end_aux"
	case WaitAux:
		return "wait_aux"
	}
	return ""
}

// Step is one entry of a placed schedule: an op (index into Graph.Ops) or a
// marker.
type Step struct {
	Op     int // -1 for a marker
	Marker Marker
}

// Layer reports what the transform did with one MoE node.
type Layer struct {
	MoE      string
	Matched  bool
	Reason   string // why it was skipped
	AuxOps   []string
	MainColl string // shared collective moved to main, if any
}

// Schedule is a placed graph: the node order with stream markers.
type Schedule struct {
	Steps  []Step
	Layers []Layer
}

// Place applies placement p to g.
func Place(g *Graph, p Placement) (*Schedule, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	order := make([]int, len(g.Ops))
	for i := range order {
		order[i] = i
	}
	s := &Schedule{}
	if p == Single {
		for _, i := range order {
			s.Steps = append(s.Steps, Step{Op: i})
		}
		return s, nil
	}
	deps := g.deps()
	// markers to insert: before[i] / after[i] relative to op i.
	before := map[int][]Marker{}
	after := map[int][]Marker{}
	// moveAfter[i] = j: op i (and markers attached before it) is re-issued
	// right after op j (fixed-overlap).
	for mi, op := range g.Ops {
		if op.Kind != MoE {
			continue
		}
		lr := Layer{MoE: op.Name}
		plan, reason := planLayer(g, deps, mi, p)
		if plan == nil {
			lr.Reason = reason
			s.Layers = append(s.Layers, lr)
			continue
		}
		lr.Matched = true
		for _, a := range plan.aux {
			lr.AuxOps = append(lr.AuxOps, g.Ops[a].Name)
		}
		if plan.coll >= 0 {
			lr.MainColl = g.Ops[plan.coll].Name
		}
		s.Layers = append(s.Layers, lr)
		// Compaction: the aux window is positional, so hoist the aux ops to
		// be contiguous from the first one.
		order = compact(order, plan.aux)
		before[plan.aux[0]] = append(before[plan.aux[0]], BeginAux)
		after[plan.endAfter] = append(after[plan.endAfter], EndAux)
		switch {
		case plan.waitBefore >= 0:
			before[plan.waitBefore] = append([]Marker{WaitAux}, before[plan.waitBefore]...)
		default:
			after[plan.endAfter] = append(after[plan.endAfter], WaitAux)
		}
		if plan.delayColl >= 0 {
			order = moveBefore(order, plan.coll, plan.delayColl)
		}
	}
	for _, i := range order {
		for _, m := range before[i] {
			s.Steps = append(s.Steps, Step{Op: -1, Marker: m})
		}
		s.Steps = append(s.Steps, Step{Op: i})
		for _, m := range after[i] {
			s.Steps = append(s.Steps, Step{Op: -1, Marker: m})
		}
	}
	return s, nil
}

type layerPlan struct {
	aux        []int // ops in the aux window, in node order
	endAfter   int   // end_aux after this op
	waitBefore int   // wait_aux before this op (-1: right after end_aux)
	coll       int   // shared trailing collective kept on main (-1: none)
	delayColl  int   // fixed-overlap: issue coll (and wait_aux) before this op
}

// planLayer follows _execute_shared_expert_in_aux_stream for one MoE node.
func planLayer(g *Graph, deps [][]int, mi int, p Placement) (*layerPlan, string) {
	n := len(g.Ops)
	// Forward cone of the MoE node.
	cone := make([]bool, n)
	cone[mi] = true
	for i := mi + 1; i < n; i++ {
		for _, d := range deps[i] {
			if cone[d] {
				cone[i] = true
			}
		}
	}
	moeAnc := ancestors(deps, mi)
	// 1. Merge: first node in the cone with a call_function input outside it.
	merge := -1
	for i := mi + 1; i < n && merge < 0; i++ {
		if !cone[i] {
			continue
		}
		for _, d := range deps[i] {
			if !cone[d] {
				merge = i
				break
			}
		}
	}
	if merge < 0 {
		return nil, "no merge node found"
	}
	// 2. Classify the merge's inputs.
	routed, shared := -1, -1
	for _, d := range deps[merge] {
		switch {
		case cone[d]:
			routed = d
		case moeAnc[d]:
			// pass-through
		default:
			shared = d
		}
	}
	if routed < 0 || shared < 0 {
		return nil, "merge has no routed or no shared input"
	}
	// 3. Walk back from the shared output; stop at ancestors of the MoE node.
	inShared := make([]bool, n)
	stack := []int{shared}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if inShared[x] || moeAnc[x] {
			continue
		}
		inShared[x] = true
		stack = append(stack, deps[x]...)
	}
	var sharedNodes []int
	for i := range n {
		if inShared[i] {
			sharedNodes = append(sharedNodes, i)
		}
	}
	plan := &layerPlan{waitBefore: merge, coll: -1, delayColl: -1, endAfter: shared}
	// 4. Collectives.
	aux := sharedNodes
	if p != Buggy && g.Ops[shared].Kind == AllReduce {
		plan.coll = shared
		aux = nil
		for _, x := range sharedNodes {
			if x != shared {
				aux = append(aux, x)
			}
		}
	}
	if p != Buggy {
		if len(aux) == 0 {
			return nil, fmt.Sprintf("shared branch of %s has no aux-stream compute outside of a collective", g.Ops[mi].Name)
		}
		for _, x := range aux {
			if g.Ops[x].Kind == AllReduce {
				return nil, fmt.Sprintf("shared branch of %s has a mid-branch collective %s; skipped", g.Ops[mi].Name, g.Ops[x].Name)
			}
		}
	}
	// 5. The first shared op must consume the fork point directly.
	first := aux[0]
	forkOK := false
	for _, in := range g.Ops[first].Inputs {
		pr := g.producer(in)
		if pr < 0 || moeAnc[pr] {
			forkOK = true
		}
	}
	if !forkOK {
		return nil, "first shared op does not consume the fork point"
	}
	plan.aux = aux
	if plan.coll >= 0 {
		// The fix: end_aux after the last aux-region input of the collective,
		// then wait_aux immediately.
		plan.endAfter = aux[len(aux)-1]
		plan.waitBefore = -1
		if p == FixedOverlap {
			// Issue the routed compute first: the join and the shared
			// collective go right before the first collective after it.
			for i := plan.coll + 1; i < n; i++ {
				if cone[i] && g.Ops[i].Kind == AllReduce || i == merge {
					plan.delayColl = i
					break
				}
			}
			if plan.delayColl >= 0 {
				plan.waitBefore = plan.coll
			}
		}
	}
	return plan, ""
}

// compact moves the ops of set (in node order) to be contiguous, starting at
// the position of the first.
func compact(order []int, set []int) []int {
	in := map[int]bool{}
	for _, x := range set {
		in[x] = true
	}
	out := make([]int, 0, len(order))
	placed := false
	for _, x := range order {
		if in[x] {
			if !placed {
				out = append(out, set...)
				placed = true
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// moveBefore moves op x to just before op y.
func moveBefore(order []int, x, y int) []int {
	out := make([]int, 0, len(order))
	for _, o := range order {
		if o == x {
			continue
		}
		if o == y {
			out = append(out, x)
		}
		out = append(out, o)
	}
	return out
}

// Placed is one op of a schedule with the stream it lands on.
type Placed struct {
	Op     string
	Stream string // "main" or "aux"
}

// Layout returns the ops of s in issue order with their streams and the
// markers as pseudo-ops ("begin_aux", …), following the stream helpers'
// semantics (ops between begin_aux and end_aux run on aux).
func (s *Schedule) Layout(g *Graph) []Placed {
	var out []Placed
	cur, caller := "main", "main"
	for _, st := range s.Steps {
		if st.Op < 0 {
			out = append(out, Placed{Op: st.Marker.String(), Stream: cur})
			switch st.Marker {
			case BeginAux:
				caller, cur = cur, "aux"
			case EndAux:
				cur = caller
			}
			continue
		}
		out = append(out, Placed{Op: g.Ops[st.Op].Name, Stream: cur})
	}
	return out
}
