// Package gpu describes the hardware a rank runs on: the built-in
// profiles ([Profiles], [ProfileFor]: SMs, HBM and NVLink bandwidth,
// FLOPs, launch and signal latencies), the host issue costs and duration
// jitter measured on an H200 ([MeasuredHost], [MeasuredJitter]), the
// roofline and measured-fit kernel times ([Profile.GEMMTime],
// [Profile.MoEDecode]), and the load model of concurrent kernels: what a
// kernel asks of its GPU's SMs and bandwidth ([Share], [Load]).
//
// It is data and pure functions of it, imports only sim (for its time
// type), and knows nothing of worlds, tasks or schedules. Package ranks
// runs the sharing (ranks/share.go: rates recomputed as kernels start and
// end), SM residency and exclusive slots over these numbers; the sources
// of every number are cited where it is defined.
package gpu
