// Package check runs scenarios and judges them: it compares a run's memory
// with the reference run (each rank's ops serialized in program order),
// collects the engine's happens-before races, ghost-data mismatches and hangs,
// explores schedules, and turns the worst outcome into a verdict.
//
// Verdicts, in increasing severity: ok, race (a latent happens-before race;
// outputs right in every schedule tried), mismatch (a collective consumed
// another's signal or data, outputs still right), corruption, dropped, hang,
// invalid-access (a kernel touched memory its rank never mapped),
// capture-error, build-error.
package check
