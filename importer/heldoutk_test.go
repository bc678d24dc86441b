package importer_test

import (
	"strings"
	"testing"

	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

// A polled torch.cuda.Event.query() waits for the event it names: its
// "Event Sync" entry gives the event's number, as a cudaEventSynchronize's
// does. LoggerPollsMainEvent polls main's "step done" event while the
// logger stream's copy into pinned memory, recorded on another event
// later, may still run: paired by host order with that later record, the
// query hid the race.
func TestEventQueryWaitsForTheEventItNames(t *testing.T) {
	twins(t, "LoggerPollsMainEvent", "LoggerPollsLogEvent")
}

// twins imports a racy corpus program and its clean twin and requires
// DPOR to find corruption in the first and nothing in the second; it
// returns the racy one's import.
func twins(t *testing.T, racy, clean string) *importer.Result {
	t.Helper()
	res := importCorpus(t, racy)
	require.Equal(t, "corruption", dporVerdict(t, res), racy)
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, clean)), clean)
	return res
}

// An operator's input existed before the operator: an allocation inside
// it (a reduction's workspace) is a temporary, never the input's block.
// MetricsAcrossIterationsNoJoin's aux stream sums a buffer made before the
// step; taking sum's workspace for that buffer made the read touch a
// fresh block, and the next iteration's matmul(out=) raced with nothing.
func TestAnInputNeverTakesAnAllocationOfItsOperator(t *testing.T) {
	res := twins(t, "MetricsAcrossIterationsNoJoin", "MetricsAcrossIterationsJoined")
	mm, sum := kernelNamed(t, res, "mm"), kernelNamed(t, res, "sum")
	require.Contains(t, sum.Reads, mm.Writes[0], "aux sums the buffer main's matmul(out=) writes")
}

// Threads a program starts inside the recorded region have no operators
// in the profiler's trace, and the system may give a second thread the id
// of a first that ended: ThreadMadeBatch* shows two such threads as one.
// Their launches take the execution trace's operators in the order they
// ran, and an output with no allocation in the trace whose storage id (it
// follows the data pointer) is a block the step freed is that block
// handed out again: the second thread's tensor reuses the first's block
// while aux still reads it, unless record_stream held it.
func TestThreadsStartedInTheRegionReuseAFreedBlock(t *testing.T) {
	res := twins(t, "ThreadMadeBatchDropped", "ThreadMadeBatchRecordStream")
	y := string(res.YAML)
	require.Contains(t, y, "in the order they ran")
	require.Contains(t, y, "storage id of a block the step freed")
	cos := kernelNamed(t, res, "cos")
	require.NotEmpty(t, cos.Writes)
	allocated := false
	for _, op := range res.Spec.Programs[0].Ops {
		allocated = allocated || (op.Kind == scenarios.OpAlloc && strings.HasPrefix(cos.Writes[0], op.Name))
	}
	require.True(t, allocated, "the second thread's tensor is allocated in the step, where the allocator can hand it the freed block")
}

// One function captured as two CUDA graphs at two sizes makes two captures
// of the same operators; the kernels' names cannot tell which one a replay
// runs, their grids can: the larger replay is the capture whose operators
// write more. TwoShapeGraphsJoined replays the large graph, the small one
// while aux reads the large one's output, then (after joining aux) the
// large one again: taken for replays of one capture, the small replay
// wrote the large one's output under aux's read.
func TestCapturesOfOneFunctionAtTwoSizes(t *testing.T) {
	twins(t, "TwoShapeGraphsOutputOverwritten", "TwoShapeGraphsJoined")
	require.Contains(t, string(importCorpus(t, "TwoShapeGraphsJoined").YAML), "one function captured at several sizes")
}

// Taking a view of a pinned host buffer (hp[i*S:(i+1)*S]: aten::slice,
// aten::as_strided) touches no element. MicrobatchEventsPolledLast copies
// each microbatch into its slot of a pinned buffer on a side stream; the
// host's slicing between the copies was taken for a write of the whole
// buffer, racing with the copies in flight.
func TestHostViewOpsTouchNothing(t *testing.T) {
	twins(t, "MicrobatchEventsPolledOffByOne", "MicrobatchEventsPolledLast")
}

// A thread that blocks on the device (cudaEventSynchronize) and launches
// nothing after it does so to tell another thread: QueueLoggerMain*'s
// logger thread answers the main thread through a queue, which the trace
// cannot show. Its sync still orders what the main thread does after it
// in host time (only non-blocking queries of such threads, as NCCL's
// watchdog makes, order nothing); the twin whose main thread goes on
// without the answer launched its overwrite before the sync returned.
func TestABlockingSyncOfAThreadThatLaunchesNothingStillOrders(t *testing.T) {
	twins(t, "QueueLoggerMainNoWait", "QueueLoggerMainWaitsNote")
}

// A graph's static output is the size of a tensor its capture's operators
// write. ThreeSizeGraphs* captures one function at three sizes and replays
// the smallest first: that replay was taken to write every static output
// the step read later, the full graph's among them, and the full graph's
// second replay (which rewrites what aux reads) wrote nothing of the step's.
func TestStaticBuffersHaveTheirCapturesSizes(t *testing.T) {
	twins(t, "ThreeSizeGraphsOutputRewritten", "ThreeSizeGraphsJoined")
}

// A thread pool's worker takes a slice of a tensor it made (aten::slice,
// aten::as_strided): operators that launch no kernel. Counted among the
// workers' operators, they broke the pairing of launches with operators
// (five operators, three launches) and every worker launch touched nothing.
func TestWorkerViewsPairWithNoLaunch(t *testing.T) {
	twins(t, "PoolMadeBatchDroppedUnjoined", "PoolMadeBatchJoinedBeforeDrop")
}
