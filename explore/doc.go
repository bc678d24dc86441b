// Package explore searches the schedules of a scenario variant for findings.
//
// A run of collsim is a pure function of (scenario, schedule), where a
// schedule is the list of choices the engine's [sim.Chooser] made. A
// [Strategy] generates schedules:
//
//   - [Random]: seeded timing jitter on durations and launch costs plus rank
//     skew, in the engine's Timed mode (the cost model still orders events).
//   - [PCT]: adversarial untimed scheduling (any pending item may run next)
//     with random priorities and d-1 priority change points, after Burckhardt,
//     Kothari, Musuvathi and Nagarakatte, "A Randomized Scheduler with
//     Probabilistic Guarantees of Finding Bugs", ASPLOS 2010.
//   - [DPOR]: exhaustive stateless model checking over the orderings of
//     dependent micro-ops with dynamic partial-order reduction: source sets
//     and race reversal after Abdulla, Aronis, Jonsson and Sagonas, "Optimal
//     Dynamic Partial Order Reduction", POPL 2014 (Algorithm 1, source-DPOR)
//     with sleep sets, and Flanagan and Godefroid's race test from "Dynamic
//     Partial-Order Reduction for Model Checking Software", POPL 2005 (steps
//     that spin count as attempts, like next(s, p) of a disabled process).
//     Steps are identified across executions by [ranks.ActorID]; dependence
//     comes from [ranks.World.NextStep] (buffer chunks, signal slots, FIFO
//     messages). A property test checks DPOR's outcome set against a naive
//     enumeration of every interleaving of generated small programs.
//
// [Explore] runs a strategy against a [Target] and summarises the schedules:
// verdicts, findings by kind, distinct outcomes (output values per rank) and
// the first witness. Strategies whose schedules are independent of each other
// (random, PCT) run on several goroutines; results are merged in schedule
// order, so the summary never depends on the number of workers.
//
// A [Witness] is a versioned JSON record of one schedule (scenario, overrides,
// variant, strategy, seed and the recorded choices). [Replay] reproduces it
// with the same trace hash; [Shrink] resets choices to nominal (0) while the
// finding persists.
//
// Concurrency: a Target is safe for concurrent use by [Explore]'s workers once
// built; a Strategy's choosers are used by one goroutine each.
package explore
