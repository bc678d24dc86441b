// Package corpus scores collsim on a labelled corpus of real programs: the
// PyTorch programs of validation/corpus, each recorded on a GPU with its
// ground truth measured there (wrong outputs over many trials at natural
// timing and with a delay injected on the stream that must lose), and the
// detections of PyTorch's CUDA sanitizer on the same programs.
//
// For every program [Score] imports the recorded trace exactly as
// docs/from-trace.md says (the trace and its execution trace, no other
// option), runs the scenario as `simctl run` does, explores it with DPOR
// under a bound, and compares the verdicts with the label: a racy program
// must read race or worse, a clean one ok with DPOR complete. A program
// labelled frozen (a host value a CUDA graph froze at capture) is detected
// when the import names the op. [Table] prints the per-program rows and the
// precision and recall of collsim and of the sanitizer, per mechanism.
//
// docs/benchmark.md shows the table; `go test ./corpus -run TestBenchmark -v`
// reproduces it from the committed traces.
package corpus
