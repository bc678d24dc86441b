// Package forms holds the Go models a scenario file may name with
// `graph: {builder: NAME}` ([Lookup], [Names]): code that makes the op
// graph, its tensors and communicators from the knobs, where writing them
// out would only repeat what the model computes — the MoE layer stack
// ([BuildMoE]) and the Torch-TensorRT engine build (trt.go). A form
// builds a world from a [knobs.Config]; it never decides a verdict.
//
// It imports the layers below the format (ranks, collectives,
// streamsched, check for the build types) and package knobs; the file
// format (package scenarios) imports it, never the other way.
package forms
