package ranks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
)

// CheckCapture names the first rule a program breaks and the op that
// breaks it, in issue order; an unjoined fork names its last op.
func TestCheckCapture(t *testing.T) {
	k := func(name string, stream int) ranks.HostOp {
		return ranks.HostOp{Kind: ranks.Launch, Stream: stream, Kernel: &ranks.KernelSpec{Name: name}}
	}
	rec := func(ev, stream int) ranks.HostOp { return ranks.HostOp{Kind: ranks.Record, Event: ev, Stream: stream} }
	wait := func(ev, stream int) ranks.HostOp { return ranks.HostOp{Kind: ranks.Wait, Event: ev, Stream: stream} }
	nccl := func(name string, stream int) ranks.HostOp {
		op := k(name, stream)
		op.Kernel.OrderKey = "comm"
		return op
	}
	for _, tc := range []struct {
		name string
		ops  []ranks.HostOp
		want *ranks.CaptureViolation
	}{
		{"origin only", []ranks.HostOp{k("a", 0), k("b", 0)}, nil},
		{"fork and join", []ranks.HostOp{rec(0, 0), wait(0, 1), k("side", 1), rec(1, 1), wait(1, 0)}, nil},
		{"launch on a stream that never joined", []ranks.HostOp{k("a", 0), k("side", 1)}, &ranks.CaptureViolation{Rule: ranks.CaptureLaunchOutside, Op: 1}},
		{"record outside", []ranks.HostOp{rec(0, 1)}, &ranks.CaptureViolation{Rule: ranks.CaptureRecordOutside, Op: 0}},
		{"wait on a never-recorded event joins nothing", []ranks.HostOp{wait(0, 1), k("side", 1)}, &ranks.CaptureViolation{Rule: ranks.CaptureLaunchOutside, Op: 1}},
		{"sync", []ranks.HostOp{k("a", 0), {Kind: ranks.Sync, Stream: -1}}, &ranks.CaptureViolation{Rule: ranks.CaptureSync, Op: 1}},
		{"unjoined fork names its last op", []ranks.HostOp{rec(0, 0), wait(0, 1), k("s1", 1), k("s2", 1), k("main", 0)},
			&ranks.CaptureViolation{Rule: ranks.CaptureUnjoined, Op: 3}},
		{"an NCCL communicator's order joins", []ranks.HostOp{rec(0, 0), wait(0, 1), nccl("ar1", 1), nccl("ar2", 0)}, nil},
		{"out of range ends the check", []ranks.HostOp{k("a", 0), k("b", 7), k("side", 1)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &ranks.Program{Streams: []string{"main", "aux"}, Events: []string{"fork", "join"}, Ops: tc.ops}
			require.Equal(t, tc.want, ranks.CheckCapture(p))
		})
	}
}

// A kernel forked onto a side stream and never joined back: graph capture
// would fail with cudaErrorStreamCaptureUnjoined.
func ExampleCheckCapture() {
	p := &ranks.Program{
		Streams: []string{"main", "aux"},
		Events:  []string{"fork"},
		Ops: []ranks.HostOp{
			{Kind: ranks.Record, Stream: 0, Event: 0},
			{Kind: ranks.Wait, Stream: 1, Event: 0},
			{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "shared_expert"}},
			{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "routed"}},
		},
	}
	v := ranks.CheckCapture(p)
	fmt.Println(v.Rule == ranks.CaptureUnjoined, p.Ops[v.Op].Kernel.Name)
	// Output: true shared_expert
}
