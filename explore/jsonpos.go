package explore

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// jsonAt says where in data a JSON decoding error happened ("line 4,
// column 2: …"), for the files users hand simctl (witnesses, shard files):
// encoding/json reports only a byte offset, if anything.
func jsonAt(data []byte, err error) error {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF): // a json.Decoder's word for a cut-off file
		off = int64(len(data))
	default:
		return err
	}
	// Offset counts the bytes read, the offending one included.
	line, col := 1, 1
	for _, c := range data[:max(0, min(int(off)-1, len(data)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// ParseShardFile decodes a shard file (simctl explore --shard i/n
// --format json), saying where a malformed one goes wrong. What it holds
// is checked by [Merge].
func ParseShardFile(data []byte) (*ShardFile, error) {
	var f ShardFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: not a shard file: %w", ErrBadInput, jsonAt(data, err))
	}
	return &f, nil
}

// ReadShardFile decodes a shard file from r as [ParseShardFile] does,
// without holding its bytes: the records are decoded one at a time and
// the strings they repeat (verdicts, outcome hashes, finding kinds) are
// shared, so a file of a million records costs about a third of what
// decoding it whole did. A malformed file gives an error without a
// position: parse it whole to say where (simctl merge does).
func ReadShardFile(r io.Reader) (*ShardFile, error) {
	var recs []*Record
	intern := interner{}.of
	kinds := map[string][]string{}
	head, seen, err := scanShard(r, func(map[string]json.RawMessage) (func(*Record) error, error) {
		recs = []*Record{}
		return func(r *Record) error {
			if r != nil {
				r.Verdict, r.OutHash = intern(r.Verdict), intern(r.OutHash)
				if len(r.Kinds) > 0 {
					k := strings.Join(r.Kinds, "\x00")
					if ks, ok := kinds[k]; ok {
						r.Kinds = ks
					} else {
						kinds[k] = r.Kinds
					}
				}
			}
			recs = append(recs, r)
			return nil
		}, nil
	})
	if err != nil {
		return nil, err
	}
	f, err := headerOf(head)
	if err != nil {
		return nil, err
	}
	if seen {
		f.Records = recs
	}
	return f, nil
}

// ScanShardFile reads a shard file from r a record at a time, holding
// none: add gets each record, in file order (an error of add ends the
// scan with it), and the header (every key but "records") comes back at
// the end. To check each record against the header as it comes, whatever
// the order of the keys, read the header first ([ReadShardHeader]).
func ScanShardFile(r io.Reader, add func(*Record) error) (*ShardFile, error) {
	head, _, err := scanShard(r, func(map[string]json.RawMessage) (func(*Record) error, error) { return add, nil })
	if err != nil {
		return nil, err
	}
	return headerOf(head)
}

// maxHeaderBytes bounds the header of a shard file that [ReadShardHeader]
// holds (a header is a few hundred bytes; its records are skipped).
const maxHeaderBytes = 16 << 20

// ReadShardHeader reads the header of a shard file from r (every key but
// "records", as [ParseShardFile] decodes them), stepping over the records'
// bytes without decoding them: a pass at the speed of reading, before
// [ScanShardFile] decodes them. It does not check the records' syntax; a
// file it cannot read is an error without a position.
func ReadShardHeader(r io.Reader) (*ShardFile, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	bad := func(err error) error { return fmt.Errorf("%w: not a shard file: %w", ErrBadInput, err) }
	next := func() (byte, error) { // the next byte that is not white space
		for {
			c, err := br.ReadByte()
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, err
			}
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return c, nil
			}
		}
	}
	head := map[string]json.RawMessage{}
	c, err := next()
	if err != nil || c != '{' && c != 'n' {
		return nil, bad(fmt.Errorf("want a JSON object"))
	}
	if c == 'n' { // null: an empty header, as json.Unmarshal reads it
		rest := make([]byte, 3)
		if _, err := io.ReadFull(br, rest); err != nil || string(rest) != "ull" {
			return nil, bad(fmt.Errorf("want a JSON object"))
		}
		return headerOf(head)
	}
	held := 0
	for first := true; ; first = false {
		c, err := next()
		if err != nil {
			return nil, bad(err)
		}
		if c == '}' && first {
			break
		}
		if c != '"' {
			return nil, bad(fmt.Errorf("want a key"))
		}
		kb := []byte{'"'}
		if kb, err = skipString(br, kb, maxHeaderBytes); err != nil {
			return nil, bad(err)
		}
		var key string
		if err := json.Unmarshal(kb, &key); err != nil {
			return nil, bad(err)
		}
		if c, err := next(); err != nil || c != ':' {
			return nil, bad(fmt.Errorf("want a colon after key %q", key))
		}
		c, err = next()
		if err != nil {
			return nil, bad(err)
		}
		isRecs := strings.EqualFold(key, "records") // as json.Unmarshal matches it
		var v []byte
		if !isRecs {
			v = []byte{}
		}
		if v, c, err = skipValue(br, c, v, maxHeaderBytes-held); err != nil {
			return nil, bad(err)
		}
		if !isRecs {
			head[key] = v
			held += len(kb) + len(v)
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			if c, err = next(); err != nil {
				return nil, bad(err)
			}
		}
		if c == '}' {
			break
		}
		if c != ',' {
			return nil, bad(fmt.Errorf("want a comma or } after the value of %q", key))
		}
	}
	return headerOf(head)
}

// skipString reads the rest of a JSON string whose opening quote has been
// read, appending its bytes to keep (nil: kept nowhere), at most limit.
func skipString(br *bufio.Reader, keep []byte, limit int) ([]byte, error) {
	for esc := false; ; {
		c, err := br.ReadByte()
		if err != nil {
			return nil, io.ErrUnexpectedEOF
		}
		if keep != nil {
			if keep = append(keep, c); len(keep) > limit {
				return nil, fmt.Errorf("a header longer than %d bytes", maxHeaderBytes)
			}
		}
		switch {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			return keep, nil
		}
	}
}

// skipValue reads the JSON value whose first byte is c, appending its
// bytes to keep (nil: kept nowhere), at most limit; it returns the byte
// after the value (a scalar ends at one).
func skipValue(br *bufio.Reader, c byte, keep []byte, limit int) ([]byte, byte, error) {
	add := func(c byte) error {
		if keep != nil {
			if keep = append(keep, c); len(keep) > limit {
				return fmt.Errorf("a header longer than %d bytes", maxHeaderBytes)
			}
		}
		return nil
	}
	depth := 0
	for {
		if err := add(c); err != nil {
			return nil, 0, err
		}
		switch c {
		case '"':
			var err error
			if keep, err = skipString(br, keep, limit); err != nil {
				return nil, 0, err
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, 0, fmt.Errorf("unexpected %q", c)
			}
		}
		var err error
		if c, err = br.ReadByte(); err != nil {
			return nil, 0, io.ErrUnexpectedEOF
		}
		if depth == 0 && (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			if keep != nil && !json.Valid(keep) {
				return nil, 0, fmt.Errorf("a malformed value")
			}
			return keep, c, nil
		}
	}
}

// scanShard reads a shard file's object from r: the keys other than
// "records" into head; at "records", records(head so far) says what takes
// each record (its error ends the scan). seen says whether the file has
// records.
func scanShard(r io.Reader, records func(head map[string]json.RawMessage) (func(*Record) error, error)) (head map[string]json.RawMessage, seen bool, err error) {
	dec := json.NewDecoder(r)
	bad := func(err error) error { return fmt.Errorf("%w: not a shard file: %w", ErrBadInput, err) }
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') && t != nil {
		return nil, false, bad(fmt.Errorf("want a JSON object"))
	}
	head = map[string]json.RawMessage{}
	for t != nil && dec.More() { // null: an empty header, as json.Unmarshal reads it
		kt, err := dec.Token()
		if err != nil {
			return nil, false, bad(err)
		}
		key, _ := kt.(string)
		isRecs := strings.EqualFold(key, "records") // as json.Unmarshal matches it
		if isRecs && seen {
			return nil, false, bad(fmt.Errorf("a second \"records\""))
		}
		if !isRecs {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, false, bad(err)
			}
			head[key] = v
			continue
		}
		seen = true
		add, err := records(head)
		if err != nil {
			return nil, false, err
		}
		if t, err := dec.Token(); err != nil {
			return nil, false, bad(err)
		} else if t == nil {
			continue // "records": null
		} else if t != json.Delim('[') {
			return nil, false, bad(fmt.Errorf("records: want an array"))
		}
		for dec.More() {
			var r *Record // null stays nil, as json.Unmarshal leaves it
			if err := dec.Decode(&r); err != nil {
				return nil, false, bad(err)
			}
			if err := add(r); err != nil {
				return nil, false, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, false, bad(err)
		}
	}
	if t != nil {
		if _, err := dec.Token(); err != nil {
			return nil, false, bad(err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, bad(fmt.Errorf("data after the shard file's object"))
	}
	return head, seen, nil
}

// headerOf decodes the keys of a shard file's header.
func headerOf(head map[string]json.RawMessage) (*ShardFile, error) {
	data, err := json.Marshal(head)
	if err == nil {
		var f ShardFile
		if err = json.Unmarshal(data, &f); err == nil {
			return &f, nil
		}
	}
	return nil, fmt.Errorf("%w: not a shard file: %w", ErrBadInput, err)
}
