package ranks

import "fmt"

// CUDA's stream-capture rules, in one place: graph mode applies them when
// it lowers a program (lower), and the scenario-file validator applies them
// to a program before it is built, to point at the line that breaks one.
// Each says it in its own words; what is a violation is decided here.

// CaptureRule is a stream-capture rule a program breaks.
type CaptureRule uint8

const (
	// CaptureSync: a host synchronize inside the capture
	// (cudaErrorStreamCaptureUnsupported).
	CaptureSync CaptureRule = iota + 1
	// CaptureRecordOutside: an event recorded on a stream that is not (yet)
	// part of the capture. A stream joins by waiting on an event recorded
	// in the capture; the origin stream (0) is part of it from the start.
	CaptureRecordOutside
	// CaptureLaunchOutside: a kernel launched on a stream that never joined
	// the capture.
	CaptureLaunchOutside
	// CaptureUnjoined: work that is not joined back into the origin stream
	// by the end (cudaErrorStreamCaptureUnjoined).
	CaptureUnjoined
)

// CaptureViolation is the first capture rule a program breaks and the op
// that breaks it (for CaptureUnjoined, the last op not joined back: an
// event recorded after it and waited on from the origin joins it and
// everything before it on its stream).
type CaptureViolation struct {
	Rule CaptureRule
	Op   int
}

// CheckCapture applies the capture rules to p, in issue order, as
// capturing it into a CUDA graph would, and returns the first violation,
// or nil. Dependencies are CUDA's at issue time: stream order, a wait on
// the event's latest record, and kernels of one order key (an NCCL
// communicator) in issue order. An op naming a stream or an event out of
// range ends the check there, with nothing said about it or what follows:
// reporting such programs is the caller's business.
func CheckCapture(p *Program) *CaptureViolation {
	ns := len(p.Streams)
	if ns == 0 {
		return nil
	}
	joined := make([]bool, ns)
	joined[0] = true
	tail := make([]int, ns) // last op per stream
	for i := range tail {
		tail[i] = -1
	}
	lastRecord := make([]int, len(p.Events))
	for i := range lastRecord {
		lastRecord[i] = -1
	}
	orderTail := map[string]int{}
	deps := make([][]int, len(p.Ops))
	for i, op := range p.Ops {
		if op.Kind == Sync {
			if op.Stream < -1 || op.Stream >= ns {
				return nil
			}
			return &CaptureViolation{CaptureSync, i}
		}
		if op.Stream < 0 || op.Stream >= ns || (op.Kind == Record || op.Kind == Wait) && (op.Event < 0 || op.Event >= len(p.Events)) {
			return nil
		}
		if t := tail[op.Stream]; t >= 0 {
			deps[i] = append(deps[i], t)
		}
		switch op.Kind {
		case Record:
			if !joined[op.Stream] {
				return &CaptureViolation{CaptureRecordOutside, i}
			}
		case Wait:
			if r := lastRecord[op.Event]; r >= 0 {
				deps[i] = append(deps[i], r)
				joined[op.Stream] = true
			}
		case Launch:
			if !joined[op.Stream] {
				return &CaptureViolation{CaptureLaunchOutside, i}
			}
			if k := op.Kernel.orderKey(); k != "" {
				if t, ok := orderTail[k]; ok {
					deps[i] = append(deps[i], t)
				}
				orderTail[k] = i
			}
		}
		tail[op.Stream] = i
		if op.Kind == Record {
			lastRecord[op.Event] = i
		}
	}
	// Every op must be an ancestor of (or be) the origin stream's tail.
	seen := make([]bool, len(p.Ops))
	var stack []int
	if tail[0] >= 0 {
		stack = append(stack, tail[0])
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !seen[x] {
			seen[x] = true
			stack = append(stack, deps[x]...)
		}
	}
	for i := len(seen) - 1; i >= 0; i-- {
		if !seen[i] {
			return &CaptureViolation{CaptureUnjoined, i}
		}
	}
	return nil
}

func (k *KernelSpec) name() string {
	if k == nil {
		return ""
	}
	return k.Name
}

func (k *KernelSpec) orderKey() string {
	if k == nil {
		return ""
	}
	return k.OrderKey
}

// captureError says v in the words of graph mode's lowering.
func captureError(rank int, p *Program, v *CaptureViolation) *CaptureError {
	op := p.Ops[v.Op]
	var msg string
	switch v.Rule {
	case CaptureSync:
		msg = fmt.Sprintf("%s during capture (cudaErrorStreamCaptureUnsupported)", syncCall(p, op.Stream))
	case CaptureRecordOutside:
		msg = fmt.Sprintf("record of event %q on stream %q, which is not part of the capture", p.Events[op.Event], p.Streams[op.Stream])
	case CaptureLaunchOutside:
		msg = fmt.Sprintf("kernel %q launched on stream %q, which never joined the capture (wait on an event recorded in the capture first)", op.Kernel.name(), p.Streams[op.Stream])
	default:
		what := op.Kind.String()
		if op.Kernel != nil {
			what = fmt.Sprintf("kernel %q", op.Kernel.name())
		}
		msg = fmt.Sprintf("unjoined work: %s on stream %q is not joined back into the origin stream %q (cudaErrorStreamCaptureUnjoined)", what, p.Streams[op.Stream], p.Streams[0])
	}
	return &CaptureError{rank, msg}
}
