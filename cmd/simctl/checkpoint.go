package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/collsim/collsim/explore"
)

// Checkpoints (explore --checkpoint FILE, --resume FILE; the format is
// explore.CheckpointHeader's). A run that plans at least
// checkpointThreshold schedules checkpoints by default, to
// defaultCheckpointName in the working directory, and removes that file
// when it finishes.
const (
	checkpointThreshold = 100000
	checkpointEvery     = 3 * time.Second
)

// defaultCheckpointName is where an unnamed checkpoint goes: one file per
// exploration, so two runs in one directory do not share one.
func defaultCheckpointName(e explore.Exploration, budget int, sh explore.Shard) string {
	safe := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
				return r
			}
			return '_'
		}, s)
	}
	name := fmt.Sprintf("simctl-%s-%s-%s-seed%d-budget%d", safe(filepath.Base(e.Scenario)), safe(e.Variant), e.Strategy, e.Seed, budget)
	if sh.Count > 1 {
		name += fmt.Sprintf("-shard%dof%d", sh.Index, sh.Count)
	}
	return name + ".checkpoint"
}

// checkpointer appends each merged schedule record to a checkpoint file,
// writing and syncing a batch every checkpointEvery (and at the end), so
// a killed run loses at most the last few seconds.
type checkpointer struct {
	path  string
	f     *os.File
	buf   []byte
	last  time.Time
	err   error // the first write error; later records are dropped
	every time.Duration
	auto  bool // the default checkpoint: removed when the run finishes
}

// openCheckpoint starts a checkpoint at path for the exploration h. With
// resume it reads the records already there (checking that they belong to
// h), cuts off a torn last line, and appends after them.
func openCheckpoint(path string, h explore.CheckpointHeader, resume bool) (*checkpointer, []*explore.Record, error) {
	var recs []*explore.Record
	var f *os.File
	var data []byte
	if resume {
		var err error
		data, err = readFile(path, "checkpoint", maxShardBytes)
		switch {
		case errors.Is(err, fs.ErrNotExist) || err == nil && !bytes.Contains(data, []byte("\n")):
			// Killed before its header was written: nothing to resume.
			resume = false
		case err != nil:
			return nil, nil, usagef("--resume: %w", err)
		}
	}
	if resume {
		got, rs, good, err := explore.ParseCheckpoint(data)
		if err != nil {
			return nil, nil, usagef("--resume %s: %w", quoteName(path), err)
		}
		if why := got.Matches(h.Exploration, h.Budget, h.Outcomes, h.Shard); why != "" {
			return nil, nil, usagef("--resume %s: not a checkpoint of this exploration: %s", quoteName(path), why)
		}
		recs = rs
		if f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err != nil {
			return nil, nil, usagef("--resume: %w", err)
		}
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, nil, usagef("--resume: %w", err)
		}
		if _, err := f.Seek(int64(good), io.SeekStart); err != nil {
			f.Close()
			return nil, nil, usagef("--resume: %w", err)
		}
	} else {
		var err error
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			return nil, nil, usagef("--checkpoint: %w", err)
		}
		line, err := explore.AppendLine(nil, h)
		if err == nil {
			_, err = f.Write(line)
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, nil, usagef("--checkpoint: %w", err)
		}
		syncDir(filepath.Dir(path))
	}
	return &checkpointer{path: path, f: f, last: time.Now(), every: checkpointEvery}, recs, nil
}

// add is explore.Options.Checkpoint: it buffers r and writes the batch
// when the last one is checkpointEvery old.
func (c *checkpointer) add(r *explore.Record) {
	if c.err != nil {
		return
	}
	if c.buf, c.err = explore.AppendLine(c.buf, r); c.err != nil {
		return
	}
	if time.Since(c.last) >= c.every {
		c.flush()
	}
}

// flush writes and syncs what is buffered.
func (c *checkpointer) flush() {
	if c.err != nil || len(c.buf) == 0 {
		return
	}
	if _, err := c.f.Write(c.buf); err != nil {
		c.err = err
		return
	}
	if err := c.f.Sync(); err != nil {
		c.err = err
		return
	}
	c.buf, c.last = c.buf[:0], time.Now()
}

// close flushes and closes; it returns the first error of the checkpoint.
func (c *checkpointer) close() error {
	c.flush()
	if err := c.f.Close(); err != nil && c.err == nil {
		c.err = err
	}
	return c.err
}

// onSignals makes SIGINT and SIGTERM ask a running exploration to stop
// (explore.Options.Stop): schedules already handed out finish and are
// merged and checkpointed, and the partial summary is printed. A second
// signal is not caught: the default action ends the process.
func onSignals() (stopped func() bool, release func()) {
	var stop atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			stop.Store(true)
			signal.Stop(sigs)
		case <-done:
		}
	}()
	return stop.Load, func() { signal.Stop(sigs); close(done) }
}
