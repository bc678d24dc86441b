// Package gpu describes the hardware a rank runs on: the built-in
// profiles ([Profiles], [ProfileFor]: SMs, HBM and NVLink bandwidth,
// FLOPs, launch and signal latencies), the host issue costs and duration
// jitter measured on an H200 ([MeasuredHost], [MeasuredJitter]), the
// roofline and measured-fit kernel times ([Profile.GEMMTime],
// [Profile.MoEDecode]), the load model of concurrent kernels: what a
// kernel asks of its GPU's SMs and bandwidth ([Share], [Load]) and the
// rates kernels running at once progress at ([Rates]), and the
// pools kernels become resident from: a rank's SMs and its exclusive slots
// ([Pool]).
//
// It is data and pure functions of it, imports only sim (for its time
// type), and knows nothing of worlds, tasks or schedules. Package ranks
// runs the sharing (ranks/share.go: each GPU's running micro-ops, their
// rates recomputed as kernels start and end) and decides which kernel needs which pool and when
// (ranks/residency.go); the sources of every number are cited where it is
// defined.
package gpu
