package main

import (
	"io"
	"os"
	"sync"
)

// stdinPath is what a scenario argument of "-" becomes: a name that reads as
// a path (so errors say /dev/stdin:3:5) and that [readInput] serves from
// standard input, read once.
const stdinPath = "/dev/stdin"

// stdin is standard input; tests replace it.
var stdin io.Reader = os.Stdin

var stdinOnce struct {
	sync.Once
	data []byte
	err  error
}

// inputArg maps "-" to [stdinPath]; any other argument is returned as is.
func inputArg(arg string) string {
	if arg == "-" {
		return stdinPath
	}
	return arg
}

// readInput reads a named input file; [stdinPath] is standard input, read in
// full on first use and served from memory after, so a command may read it
// twice (explore resolves the scenario, then builds its target).
//
// Every scenario file goes through it: a regular file only, at most
// scenarios.MaxFileBytes (input.go).
func readInput(path string) ([]byte, error) { return readScenario(path) }

// readStdin reads standard input once, through the largest input limit
// (input.go's readFile applies each kind's own).
func readStdin() ([]byte, error) {
	stdinOnce.Do(func() { stdinOnce.data, stdinOnce.err = io.ReadAll(io.LimitReader(stdin, maxShardBytes+1)) })
	return stdinOnce.data, stdinOnce.err
}
