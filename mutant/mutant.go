// Package mutant names deliberate breakages of the simulator's core
// mechanisms, so that a test can show each one is guarded: with a mutant
// applied, at least one semantic test (not a golden file or a pinned hash)
// must fail. See harness_test.go for the list of mutants and the tests
// that kill each.
//
// A mutant is applied only in a build with the tag mutants and the
// environment variable COLLSIM_MUTANT set to its name:
//
//	COLLSIM_MUTANT=race-detector-off go test -tags mutants ./ranks/
//
// In an ordinary build [On] is a constant false that the compiler inlines
// away: the switches cost nothing and no mutant can be applied by accident.
package mutant

// Name names one mutant.
type Name string

// The mutants. Each constant's comment says what it breaks; the code it
// breaks asks [On] for it.
const (
	// RaceDetectorOff: no happens-before check on any access (buffers,
	// signal-pad slots, FIFOs).
	RaceDetectorOff Name = "race-detector-off"
	// MismatchCheckOff: a wait or receive never compares its ghost data
	// (collective instance and signature) with the producer's.
	MismatchCheckOff Name = "mismatch-check-off"
	// PadSignatureCheckOff: a signal-pad wait consumes a put of the same
	// collective instance without comparing the calls' signatures (a
	// one-shot call of 4096 B on one rank and 8192 B on another pass).
	PadSignatureCheckOff Name = "pad-signature-check-off"
	// P2PConnectOff: a point-to-point connection needs no setup handshake:
	// a send whose peer never posts a receive completes into the
	// connection's slots (collectives/sendrecv.go).
	P2PConnectOff Name = "p2p-connect-off"
	// ConnStepShared: a stepped NCCL connection's step counters advance at
	// every send and receive, as a queue's would, instead of being read by
	// a kernel at its first use and written back at its completion
	// (ranks/stepconn.go): two kernels of one communicator resident at
	// once then lose no increment.
	ConnStepShared Name = "conn-step-shared"
	// PadNotShared: every all-reduce call gets its own signal pad, even
	// when the workspace is shared (the pad is what the bug shares).
	PadNotShared Name = "pad-not-shared"
	// PadAlwaysShared: pad_scope=per-group behaves like per-allocation
	// (process groups on one allocation share its pad).
	PadAlwaysShared Name = "pad-always-shared"
	// EventWaitFirstRecord: a stream wait binds to the first record of its
	// event, not the most recent one issued before it.
	EventWaitFirstRecord Name = "event-wait-first-record"
	// WorkspaceCapRemoved: a symmetric all-reduce is accepted whatever its
	// message size (the workspace's size cap is gone).
	WorkspaceCapRemoved Name = "workspace-cap-removed"
	// RankSkewOff: random schedules never skew a rank's host start.
	RankSkewOff Name = "rank-skew-off"
	// ReplayDroppedFromSignal: a signal's ghost identity forgets which graph
	// replay produced it.
	ReplayDroppedFromSignal Name = "replay-dropped-from-signal"
	// RecvWithoutAcquire: an NCCL receive takes the message's data but not
	// its sender's happens-before clock.
	RecvWithoutAcquire Name = "recv-without-acquire"
	// BarrierNoExit: symmetric-memory all-reduces (one-shot, and the reduce
	// kernel of a split MULTIMEM all-reduce) skip their exit barrier.
	BarrierNoExit Name = "barrier-no-exit"
	// ReplayInputsFixed: a graph's inputs are not re-filled between
	// replays (every replay computes on the first one's).
	ReplayInputsFixed Name = "replay-inputs-fixed"
	// ReplaysNotChecked: only the final state of a graph's memory is
	// compared with the reference, not each replay's.
	ReplaysNotChecked Name = "replays-not-checked"
	// CoarseWhereShared: a collective runs as one coarse computation
	// even when another stream shares its lane's memory (the soundness
	// decision of ranks/coarse.go ignores other streams).
	CoarseWhereShared Name = "coarse-where-shared"
	// CoarseEarlyFinisher: a collective of micro-op lists runs as one
	// coarse loop even when one of its ranks may finish before another has
	// started (a broadcast's root): held for the others, it finishes later
	// than it would have (ranks/coarse.go listCallOK).
	CoarseEarlyFinisher Name = "coarse-early-finisher"
	// GuardOrdersCopies: PyTorch's GroupStreamGuard (Comm.StreamGuard)
	// orders the copy kernels of a split MULTIMEM all-reduce too, not only
	// its signal-pad kernel, as if the call were one fused kernel
	// (collectives/multimem.go).
	GuardOrdersCopies Name = "guard-orders-copies"
	// FlagAcquireAnyValue: a flag wait acquires the release of the last put
	// into each chunk whatever value it saw (not only that put's value).
	FlagAcquireAnyValue Name = "flag-acquire-any-value"
	// WakeOnFlagStoresOnly: a flag wait is woken only by flag stores into
	// its flag's buffer: not by a kernel's or a receive's plain store, a
	// host re-fill, or a change of the value it compares against
	// (ranks/flags.go flagWoke).
	WakeOnFlagStoresOnly Name = "wake-on-flag-stores-only"
	// RegistrationIgnored: a peer's copy of an allocation with
	// registration: op is reachable without a register op.
	RegistrationIgnored Name = "registration-ignored"
	// FoldPassesSeeProto: the static passes (shared lanes, carried clock
	// entries, replay inputs, coarse calls) read a folded rank's kernels as
	// its proto's, with the proto's memory (ranks/fold.go opView).
	FoldPassesSeeProto Name = "fold-passes-see-proto"
	// FoldTasksRunProto: a folded rank's tasks run its proto's kernels
	// over the proto's memory (ranks/fold.go taskOpIn).
	FoldTasksRunProto Name = "fold-tasks-run-proto"
	// DPORWaitRacesDropped: DPOR never reverses a race between two waits
	// on one signal slot (which waiter consumes a put), so it never
	// backtracks to let the other waiter take the flag
	// (explore/dpor.go analyse).
	DPORWaitRacesDropped Name = "dpor-wait-races-dropped"
	// DPORSleepReadWriteIndependent: DPOR's sleep sets treat a read and a
	// write of one resource as independent: only two writes wake a
	// sleeping actor (explore/dpor.go independent).
	DPORSleepReadWriteIndependent Name = "dpor-sleep-rw-independent"
	// DPORSleepMissedWakeup: a step that conflicts with a sleeping actor's
	// step leaves it asleep: a sleeper is never woken, and the
	// continuations it would have started are never explored
	// (explore/dpor.go observe).
	DPORSleepMissedWakeup Name = "dpor-sleep-missed-wakeup"
	// DeferredFreeAtSyncOnly: a malloc never finds a record_stream free's
	// events complete, however far the device got: the block is never
	// handed out again in the step (ranks/dynalloc.go memMalloc).
	DeferredFreeAtSyncOnly Name = "deferred-free-at-sync-only"
	// DPORFreeQueryIndependent: DPOR's footprint of a malloc leaves out its
	// reads of the pending frees' events, so the malloc and the recorded
	// stream's completion look independent and are never reordered
	// (explore/dpor.go accessesInto).
	DPORFreeQueryIndependent Name = "dpor-free-query-independent"
)

// All lists every mutant, in the order the harness applies them.
var All = []Name{
	RaceDetectorOff, MismatchCheckOff, PadNotShared, PadAlwaysShared,
	EventWaitFirstRecord, WorkspaceCapRemoved, RankSkewOff,
	ReplayDroppedFromSignal, RecvWithoutAcquire, BarrierNoExit,
	ReplayInputsFixed, ReplaysNotChecked, CoarseWhereShared, GuardOrdersCopies,
	FlagAcquireAnyValue, RegistrationIgnored, CoarseEarlyFinisher,
	FoldPassesSeeProto, FoldTasksRunProto, WakeOnFlagStoresOnly, PadSignatureCheckOff,
	P2PConnectOff,
	ConnStepShared,
	DPORWaitRacesDropped, DPORSleepReadWriteIndependent, DPORSleepMissedWakeup,
	DeferredFreeAtSyncOnly, DPORFreeQueryIndependent,
}
