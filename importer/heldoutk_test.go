package importer_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A polled torch.cuda.Event.query() waits for the event it names: its
// "Event Sync" entry gives the event's number, as a cudaEventSynchronize's
// does. LoggerPollsMainEvent polls main's "step done" event while the
// logger stream's copy into pinned memory, recorded on another event
// later, may still run: paired by host order with that later record, the
// query hid the race.
func TestEventQueryWaitsForTheEventItNames(t *testing.T) {
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "LoggerPollsMainEvent")))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "LoggerPollsLogEvent")))
}

// An operator's input existed before the operator: an allocation inside
// it (a reduction's workspace) is a temporary, never the input's block.
// MetricsAcrossIterationsNoJoin's aux stream sums a buffer made before the
// step; taking sum's workspace for that buffer made the read touch a
// fresh block, and the next iteration's matmul(out=) raced with nothing.
func TestAnInputNeverTakesAnAllocationOfItsOperator(t *testing.T) {
	res := importCorpus(t, "MetricsAcrossIterationsNoJoin")
	mm, sum := kernelNamed(t, res, "mm"), kernelNamed(t, res, "sum")
	require.Contains(t, sum.Reads, mm.Writes[0], "aux sums the buffer main's matmul(out=) writes")
	require.Equal(t, "corruption", dporVerdict(t, res))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "MetricsAcrossIterationsJoined")))
}
