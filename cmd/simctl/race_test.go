//go:build race

package main

// raceEnabled: built with -race (norace_test.go: without).
const raceEnabled = true
