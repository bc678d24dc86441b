package importer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Error is input the importer cannot read: the file, the position (line and
// column, 1-based; 0 when unknown), the index of the event in the trace's
// event array (-1 when the problem is outside it) and what was wrong.
type Error struct {
	File      string
	Line, Col int
	Event     int
	Offset    int64 // byte offset in the (decompressed) input
	Msg       string
	What      string // what Event counts: "event" (traceEvents) or "node" (an execution trace's nodes)
	skipSpace bool   // the position is the next value after Offset
	limit     bool   // a reading limit (Limits) was passed
}

// Is reports a limit passed as [ErrLimit].
func (e *Error) Is(target error) bool { return e.limit && target == ErrLimit }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Event >= 0 {
		what := e.What
		if what == "" {
			what = "event"
		}
		fmt.Fprintf(&b, "%s %d: ", what, e.Event)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ID is a Chrome-trace pid or tid: a number, or a string (Kineto writes
// "Spans" and "Traces" for its own rows). Strings read as -1.
type ID int64

// UnmarshalJSON accepts a number or a string.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			*id = ID(v)
		} else {
			*id = -1
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("pid/tid: %s is not a number or a string", b)
	}
	*id = ID(f)
	return nil
}

// Event is one trace event with the fields the importer reads; every other
// field is skipped. Kineto writes ts and dur in microseconds with a
// fractional part (nanosecond resolution).
type Event struct {
	Index int     `json:"-"`
	Ph    string  `json:"ph"`
	Cat   string  `json:"cat"`
	Name  string  `json:"name"`
	Pid   ID      `json:"pid"`
	Tid   ID      `json:"tid"`
	Ts    float64 `json:"ts"`
	Dur   float64 `json:"dur"`
	Args  Args    `json:"args"`
}

// Args are the event arguments the importer reads (Kineto's names). A
// missing integer reads as -1 (see [Event.reset]).
type Args struct {
	ExternalID int64 `json:"External id"`
	RecordFn   int64 `json:"Record function id"`
	Corr       int64 `json:"correlation"`
	Stream     int64 `json:"stream"`
	// cuda_sync
	SyncKind   string `json:"cuda_sync_kind"`
	WaitEvent  int64  `json:"wait_on_cuda_event_id"`
	WaitStream int64  `json:"wait_on_stream"`
	WaitCorr   int64  `json:"wait_on_cuda_event_record_corr_id"`
	// kernel: its launch shape, and the CUDA graph that ran it (newer
	// Kineto; 0 or absent outside a graph)
	Grid    []int64 `json:"grid"`
	Block   []int64 `json:"block"`
	GraphID int64   `json:"graph id"`
	// [memory]
	Addr       json.Number `json:"Addr"`
	Bytes      int64       `json:"Bytes"`
	DeviceType int64       `json:"Device Type"`
	// record_param_comms
	Collective string `json:"Collective name"`
	PGName     string `json:"Process Group Name"`
	PGRanksRaw any    `json:"Process Group Ranks"`
	InNelems   int64  `json:"In msg nelems"`
	OutNelems  int64  `json:"Out msg nelems"`
	DType      string `json:"dtype"`
	GroupSize  int64  `json:"Group size"`
	Seq        int64  `json:"Seq"`
	Rank       int64  `json:"Rank"`
	// send / recv: the peer's global rank (torch/csrc/profiler/util.cpp,
	// saveNcclMeta: kP2pDst, kP2pSrc)
	DstRank int64 `json:"Dst Rank"`
	SrcRank int64 `json:"Src Rank"`
}

func (e *Event) reset(i int) {
	*e = Event{Index: i, Args: Args{ExternalID: -1, RecordFn: -1, Corr: -1, Stream: -1, WaitEvent: -1,
		WaitStream: -1, WaitCorr: -1, DeviceType: -1, InNelems: -1, OutNelems: -1, GroupSize: -1, Seq: -1, Rank: -1, DstRank: -1, SrcRank: -1}}
}

// End is the event's end time (µs).
func (e *Event) End() float64 { return e.Ts + e.Dur }

// open opens a trace file, decompressing it when its name ends in .gz.
// Only a regular file is accepted: it is opened without blocking, so a FIFO
// or a device given as a trace is refused instead of hanging the import.
func open(path string) (io.ReadCloser, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, err
		}
		return nil, &Error{File: path, Event: -1, Msg: fmt.Sprintf("not a regular file (%s); want a trace file", st.Mode().Type())}
	}
	// gzip by its magic number, whatever the name: a .json that is
	// compressed reads, and a .gz that is not is said to be so.
	br := bufio.NewReader(f)
	magic, _ := br.Peek(2)
	isGz := len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	if !isGz {
		if strings.HasSuffix(path, ".gz") {
			f.Close()
			return nil, &Error{File: path, Event: -1, Msg: "not a gzip file (its name ends in .gz); expected gzip-compressed JSON"}
		}
		return struct {
			io.Reader
			io.Closer
		}{br, f}, nil
	}
	// Concatenated gzip members read as one stream (gzip.Reader's
	// multistream mode), as gunzip reads them.
	z, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, &Error{File: path, Event: -1, Msg: "not a gzip file: " + err.Error()}
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}

// ScanFile streams the events of the Chrome trace at path to visit, in file
// order, under the default limits. A malformed file gives an [*Error] with
// its line and column.
func ScanFile(path string, meta *Meta, visit func(*Event) error) error {
	return scanFile(path, Limits{}, meta, visit)
}

// scanFile is ScanFile under lim.
func scanFile(path string, lim Limits, meta *Meta, visit func(*Event) error) error {
	g, f, err := openGuarded(path, lim)
	if err != nil {
		return err
	}
	defer f.Close()
	return g.finish(scan(g, path, meta, visit), path)
}

// Scan streams the events of a Chrome trace: a JSON object with a
// "traceEvents" array (other keys are skipped), or a bare array of events.
// Each event is decoded on its own, so memory does not grow with the file.
// visit's *Event is reused: copy what you keep.
func Scan(r io.Reader, file string, visit func(*Event) error) error {
	g := guarded(r, file)
	err := scan(g, file, nil, visit)
	if err != nil && g.err != nil && g.delivered {
		return g.err
	}
	return err
}

// Meta is what the importer reads outside the event array.
type Meta struct {
	GPU string // deviceProperties[0].name
	// Rank and WorldSize are distributedInfo's "rank" and "world_size"
	// (libkineto's distributed metadata, written by torch.profiler when
	// torch.distributed is initialised); -1 when the trace has none.
	Rank, WorldSize int
}

func scan(r io.Reader, file string, meta *Meta, visit func(*Event) error) error {
	g := guarded(r, file)
	g.records("traceEvents")
	dec := json.NewDecoder(g)
	fail := func(ev int, format string, a ...any) error {
		return &Error{File: file, Event: ev, Offset: dec.InputOffset(), Msg: fmt.Sprintf(format, a...)}
	}
	tok, err := dec.Token()
	if err != nil {
		return fail(-1, "not JSON: %v; expected a Chrome trace (an object with \"traceEvents\", or an array of events)", jsonMsg(err))
	}
	var ev Event
	events := func() error {
		for i := 0; dec.More(); i++ {
			if i >= g.lim.MaxEvents {
				return g.tooMany(dec, "event", "events", i)
			}
			ev.reset(i)
			off := dec.InputOffset()
			err := dec.Decode(&ev)
			if err != nil {
				e := fail(i, "%s; expected an event object (ph, name, ts, dur, args)", jsonMsg(err)).(*Error)
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) || e.Offset < off {
					e.Offset, e.skipSpace = off, true // the event's start
				}
				return e
			}
			if msg := check(&ev); msg != "" {
				e := fail(i, "%s", msg).(*Error)
				e.Offset, e.skipSpace = off, true
				return e
			}
			if err := visit(&ev); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return fail(-1, "%s; expected ] closing the event array", jsonMsg(err))
		}
		return nil
	}
	switch tok {
	case json.Delim('['):
		if err := events(); err != nil {
			return err
		}
	case json.Delim('{'):
		seen := false
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fail(-1, "%s; expected a key", jsonMsg(err))
			}
			key, _ := kt.(string)
			if key == "deviceProperties" && meta != nil {
				var props []struct {
					Name string `json:"name"`
				}
				err := dec.Decode(&props)
				if err != nil {
					return fail(-1, "deviceProperties: %s; expected a list of {name, …}", jsonMsg(err))
				}
				if len(props) > 0 {
					meta.GPU = props[0].Name
				}
				continue
			}
			if key == "distributedInfo" && meta != nil {
				di := struct {
					Rank      *int `json:"rank"`
					WorldSize *int `json:"world_size"`
				}{}
				err := dec.Decode(&di)
				if err != nil {
					return fail(-1, "distributedInfo: %s; expected {rank, world_size, …}", jsonMsg(err))
				}
				if di.Rank != nil && di.WorldSize != nil {
					meta.Rank, meta.WorldSize = *di.Rank, *di.WorldSize
				}
				continue
			}
			if key != "traceEvents" {
				if err := skipRecord(dec, g); err != nil {
					return fail(-1, "%s in the value of %q", jsonMsg(err), key)
				}
				continue
			}
			if seen {
				return fail(-1, "a second \"traceEvents\"; expected one")
			}
			seen = true
			t, err := dec.Token()
			if err != nil || t != json.Delim('[') {
				return fail(-1, "\"traceEvents\" is not an array; expected [ {event}, … ]")
			}
			if err := events(); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return fail(-1, "%s; expected } closing the trace", jsonMsg(err))
		}
		if !seen {
			return fail(-1, "no \"traceEvents\"; expected a Chrome trace from torch.profiler's export_chrome_trace")
		}
	default:
		return fail(-1, "the trace starts with %v; expected { or [", tok)
	}
	if t, err := dec.Token(); err != io.EOF {
		if err != nil {
			return fail(-1, "%s after the trace; expected the end of the file", jsonMsg(err))
		}
		return fail(-1, "%v after the trace; expected the end of the file", t)
	}
	return nil
}

// check rejects events the importer would misread.
func check(e *Event) string {
	if e.Ph == "" {
		return "no \"ph\"; expected a Chrome trace event with a phase"
	}
	if math.IsNaN(e.Ts) || math.IsInf(e.Ts, 0) || math.IsNaN(e.Dur) || math.IsInf(e.Dur, 0) {
		return "ts or dur is not a finite number"
	}
	if e.Dur < 0 {
		return fmt.Sprintf("dur %g is negative; expected a duration ≥ 0 (µs)", e.Dur)
	}
	if math.Abs(e.Ts) > 1e15 || e.Dur > 1e12 {
		return "ts or dur out of range; expected microseconds"
	}
	return ""
}

func jsonMsg(err error) string {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return "the file ends too early"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if f == "" {
			f = "value"
		}
		return fmt.Sprintf("%q is a JSON %s, not a %s", f, te.Value, te.Type)
	}
	return err.Error()
}

// locate turns a byte offset of path into a 1-based line and column by
// reading the file again up to it (only when reporting an error).
func locate(path string, off int64, skipSpace bool) (int, int) {
	f, err := open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	line, col := 1, 1
	buf := make([]byte, 1<<16)
	for off > 0 {
		n, err := f.Read(buf[:min(int64(len(buf)), off)])
		for _, c := range buf[:n] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		off -= int64(n)
		if err != nil {
			return line, col
		}
	}
	// Past the separator to the value that starts here.
	for c := [1]byte{}; skipSpace; {
		if n, _ := f.Read(c[:]); n == 0 {
			break
		}
		switch c[0] {
		case '\n':
			line, col = line+1, 1
		case ' ', '\t', '\r', ',':
			col++
		default:
			skipSpace = false
		}
	}
	return line, col
}

// ranksOf reads "Process Group Ranks", which PyTorch writes as a string
// "[0, 1]" (or a list in other versions).
func ranksOf(v any) ([]int, bool) {
	var out []int
	switch x := v.(type) {
	case nil:
		return nil, false
	case string:
		s := strings.TrimSpace(x)
		s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n > 1<<20 {
				return nil, false
			}
			out = append(out, n)
		}
	case []any:
		for _, p := range x {
			f, ok := p.(float64)
			if !ok || f < 0 || f > 1<<20 || f != math.Trunc(f) {
				return nil, false
			}
			out = append(out, int(f))
		}
	default:
		return nil, false
	}
	return out, true
}
