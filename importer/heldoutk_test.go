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
