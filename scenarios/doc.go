// Package scenarios holds the built-in scenarios (tp8-shared-expert and its
// variants, …) and their knobs. A scenario only builds a world — ranks,
// memory, programs — from a [Config]; it never decides a verdict. The check
// package runs what it builds and judges the outcome from the simulated
// memory, signals and timing.
package scenarios
