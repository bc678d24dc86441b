// Package knobs holds [Config], every knob a scenario understands: its
// --set key, help, accepted values and how it reads and writes a Config
// ([All], [Get], [Config.Set]), the knobs a scenario file declares itself
// ([Config.Param]), and how the knobs complete a world's configuration
// from the hardware profile ([WorldConfig]: issue costs, jitter tables).
//
// It is the vocabulary the scenario format (package scenarios) and the Go
// forms (package forms) are written in, and imports only the simulator's
// layers below them (ranks, collectives, streamsched). The order of the
// knob table is the order of --help and of exported files: the base knobs
// (config.go), then each file's init in file-name order.
package knobs
