package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
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
	// pending: the records of the checkpoint resumed are not all read
	// yet, so nothing may be written (they are read as the run folds them).
	pending bool
	// resumed counts the records of the checkpoint resumed, once read;
	// continued says that a run without --resume found the checkpoint of
	// the same exploration at its path (and says so, on stderr).
	resumed   int
	continued bool
	stderr    io.Writer
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
// resume it reads the header there (checking that it is h's) and returns
// the records that follow as an iterator (explore.Options.Resume): each is
// decoded as the exploration folds it, none held, and once they are all
// read a torn last line is cut off and the run's records go after them.
func openCheckpoint(path string, h explore.CheckpointHeader, resume bool) (*checkpointer, iter.Seq2[*explore.Record, error], error) {
	var f *os.File
	var rd *explore.CheckpointReader
	var in *os.File
	if resume {
		fd, err := openRegular(path, "checkpoint")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			resume = false
		case err != nil:
			return nil, nil, usagef("--resume: %w", err)
		default:
			var rerr error
			rd, rerr = explore.NewCheckpointReader(fd)
			switch {
			case rerr != nil && !hasNewline(path):
				// Killed before its header was written: nothing to resume.
				fd.Close()
				resume = false
			case rerr != nil:
				fd.Close()
				return nil, nil, usagef("--resume %s: %w", quoteName(path), rerr)
			default:
				in = fd
			}
		}
	}
	if resume {
		var err error
		if why := rd.Header.Matches(h.Exploration, h.Budget, h.Outcomes, h.Shard); why != "" {
			in.Close()
			return nil, nil, usagef("--resume %s: not a checkpoint of this exploration: %s", quoteName(path), why)
		}
		if f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err != nil {
			in.Close()
			return nil, nil, usagef("--resume: %w", err)
		}
		c := &checkpointer{path: path, f: f, last: time.Now(), every: checkpointEvery, pending: true}
		return c, c.resumeFrom(in, rd), nil
	}
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
				ck.continued = true
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
	return &checkpointer{path: path, f: f, last: time.Now(), every: checkpointEvery}, nil, nil
}

// resumeError is an error of reading the checkpoint a run resumes; simctl
// says it as it is, without the exploration's name before it.
type resumeError struct{ error }

func (e resumeError) Unwrap() error { return e.error }

// resumeFrom yields the records rd reads from in. Once they are all read,
// it closes in, cuts the checkpoint after its last whole line and appends
// there, and counts the records (resumed).
func (c *checkpointer) resumeFrom(in *os.File, rd *explore.CheckpointReader) iter.Seq2[*explore.Record, error] {
	return func(yield func(*explore.Record, error) bool) {
		defer in.Close()
		n := 0
		for r, err := range rd.Records() {
			if err != nil {
				yield(nil, resumeError{usagef("--resume %s: %w", quoteName(c.path), err)})
				return
			}
			n++
			if !yield(r, nil) {
				return
			}
		}
		good := rd.Good()
		if err := c.f.Truncate(good); err != nil {
			yield(nil, resumeError{usagef("--resume: %w", err)})
			return
		}
		if _, err := c.f.Seek(good, io.SeekStart); err != nil {
			yield(nil, resumeError{usagef("--resume: %w", err)})
			return
		}
		c.pending, c.resumed = false, n
		if c.continued && c.stderr != nil {
			fmt.Fprintf(c.stderr, "simctl: %s holds %d schedules of this exploration: continuing it (remove the file to start over)\n", quoteName(c.path), n)
		}
	}
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
	if c.pending {
		c.err = errors.New("the checkpoint resumed was not read to its end: nothing appended")
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

// writeShardFile prints a shard's file as json.Encoder (indent " ") prints
// sf with its records; with fromCheckpoint they are the lines of the
// checkpoint ck, read back and indented, none held, rather than sf's.
func writeShardFile(w io.Writer, sf *explore.ShardFile, ck *checkpointer, fromCheckpoint bool) error {
	if !fromCheckpoint {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(sf)
	}
	if ck.err != nil {
		return usagef("--shard: the shard file is made from the checkpoint %s, which could not be written: %v", quoteName(ck.path), ck.err)
	}
	in, err := openRegular(ck.path, "checkpoint")
	if err != nil {
		return usagef("--shard: %w", err)
	}
	defer in.Close()
	rd, err := explore.NewCheckpointReader(in)
	if err != nil {
		return usagef("--shard: %s: %w", quoteName(ck.path), err)
	}
	g := *sf
	g.Records = []*explore.Record{}
	head, err := json.MarshalIndent(&g, "", " ")
	if err != nil {
		return err
	}
	cut := bytes.LastIndex(head, []byte("[]")) // "records" comes last
	bw := bufio.NewWriterSize(w, 1<<16)
	_, _ = bw.Write(head[:cut])
	n := 0
	var b bytes.Buffer
	for line, err := range rd.Lines() {
		if err != nil {
			return usagef("--shard: %s: %w", quoteName(ck.path), err)
		}
		sep := ",\n  "
		if n == 0 {
			sep = "[\n  "
		}
		b.Reset()
		if err := json.Indent(&b, line, "  ", " "); err != nil {
			return usagef("--shard: %s: record %d: %w", quoteName(ck.path), n+1, err)
		}
		_, _ = bw.WriteString(sep)
		_, _ = bw.Write(b.Bytes())
		n++
	}
	if n == 0 {
		_, _ = bw.WriteString("null")
	} else {
		_, _ = bw.WriteString("\n ]")
	}
	_, _ = bw.Write(head[cut+2:])
	_ = bw.WriteByte('\n')
	return bw.Flush()
}
