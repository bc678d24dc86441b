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
	"github.com/collsim/collsim/scenarios"
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
	// resumed counts the records of an existing checkpoint of the same
	// exploration that a run without --resume found at its path and
	// continued.
	resumed int
}

// checkpointBytesPerFileByte is resume's memory per byte of checkpoint:
// its records, read a line at a time (a 63 MB checkpoint of 600,000
// schedules resumed in 200 MB resident under ulimit -v 2GiB; 460 MB when
// the file was read whole first).
const checkpointBytesPerFileByte = 2

// checkCheckpointMemory refuses a checkpoint whose records would not fit
// in --max-memory, naming the flag, before it is read.
func checkCheckpointMemory(path string) error {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil // readFile says what is wrong
	}
	if need := st.Size()*checkpointBytesPerFileByte + 32<<20; need > scenarios.MemoryBudget {
		return usagef("--resume %s: a checkpoint of %s needs about %s of memory to resume; the limit is %s (raise --max-memory)",
			quoteName(path), scenarios.FormatBytes(st.Size()), scenarios.FormatBytes(need), scenarios.FormatBytes(scenarios.MemoryBudget))
	}
	return nil
}

// existingCheckpoint decides what --checkpoint does with a file already at
// path: a checkpoint of this exploration is continued (nil); anything else
// (a scenario file, another exploration's checkpoint, a FIFO or device) is
// kept and refused, with what it is. An empty file (a checkpoint killed
// before its header was written) is written from the start (empty).
func existingCheckpoint(path string, h explore.CheckpointHeader) (empty bool, err error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, usagef("--checkpoint: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return false, usagef("--checkpoint: %w", err)
	}
	if !st.Mode().IsRegular() {
		return false, usagef("--checkpoint %s: %v (%s); want a checkpoint file", quoteName(path), errNotRegular, st.Mode().Type())
	}
	if st.Size() == 0 {
		return true, nil
	}
	line, _ := io.ReadAll(io.LimitReader(fd, 64<<10))
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i+1]
	} else {
		line = append(line, '\n')
	}
	got, _, _, err := explore.ParseCheckpoint(line)
	if err != nil {
		return false, usagef("--checkpoint %s: the file exists and is not a checkpoint; it is kept: name a new file, or a checkpoint of this exploration to continue it", quoteName(path))
	}
	if why := got.Matches(h.Exploration, h.Budget, h.Outcomes, h.Shard); why != "" {
		return false, usagef("--checkpoint %s: the file is a checkpoint of another exploration (%s); it is kept: name a new file", quoteName(path), why)
	}
	return false, nil
}

// openCheckpoint starts a checkpoint at path for the exploration h. With
// resume it reads the records already there (checking that they belong to
// h), cuts off a torn last line, and appends after them.
func openCheckpoint(path string, h explore.CheckpointHeader, resume bool) (*checkpointer, []*explore.Record, error) {
	var recs []*explore.Record
	var f *os.File
	var got *explore.CheckpointHeader
	var good int64
	if resume {
		if err := checkCheckpointMemory(path); err != nil {
			return nil, nil, err
		}
		// Read a line at a time (explore.ReadCheckpoint): any size the
		// memory budget allows.
		fd, err := openRegular(path, "checkpoint")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			resume = false
		case err != nil:
			return nil, nil, usagef("--resume: %w", err)
		default:
			var rerr error
			got, recs, good, rerr = explore.ReadCheckpoint(fd)
			fd.Close()
			switch {
			case rerr != nil && good == 0 && !hasNewline(path):
				// Killed before its header was written: nothing to resume.
				resume = false
			case rerr != nil:
				return nil, nil, usagef("--resume %s: %w", quoteName(path), rerr)
			}
		}
	}
	if resume {
		var err error
		if why := got.Matches(h.Exploration, h.Budget, h.Outcomes, h.Shard); why != "" {
			return nil, nil, usagef("--resume %s: not a checkpoint of this exploration: %s", quoteName(path), why)
		}
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
		// A new file only (O_EXCL): an existing one is looked at first,
		// and never truncated (O_NONBLOCK: a FIFO's open cannot block).
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o644)
		if errors.Is(err, fs.ErrExist) {
			empty, xerr := existingCheckpoint(path, h)
			if xerr != nil {
				return nil, nil, xerr
			}
			if !empty {
				ck, recs, err := openCheckpoint(path, h, true)
				if ck != nil {
					ck.resumed = len(recs)
				}
				return ck, recs, err
			}
			f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		}
		if err != nil {
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

// hasNewline reports whether the file at path holds a newline in its first
// 64 KiB: a checkpoint without one was killed before its header was
// written.
func hasNewline(path string) bool {
	f, err := openRegular(path, "checkpoint")
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	return bytes.IndexByte(b, '\n') >= 0
}
