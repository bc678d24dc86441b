// Package sim is the deterministic discrete-event core of collsim.
//
// It owns three things and nothing else:
//
//   - virtual time ([Time], integer nanoseconds; never the wall clock),
//   - the event queue ([Engine]), a google/btree ordered by the strict total
//     order (time, tie-break key, sequence), and
//   - every nondeterministic decision, routed through one [Chooser] and recorded
//     by a [Recorder], so a run is a pure function of (scenario, schedule) and can
//     be replayed bit for bit and shrunk.
//
// The engine also keeps a running trace hash: a 64-bit multiply-rotate hash
// over the canonical sequence of executed events plus whatever the model mixes in with
// [Engine.Mix]. Two runs of the same scenario under the same schedule produce the
// same hash on any machine.
//
// Concurrency: an Engine is not safe for concurrent use. Parallel exploration
// runs one Engine per goroutine and merges results in a fixed order.
package sim
