package explore

import (
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
	dec := json.NewDecoder(r)
	bad := func(err error) error { return fmt.Errorf("%w: not a shard file: %w", ErrBadInput, err) }
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad(fmt.Errorf("want a JSON object"))
	}
	head := map[string]json.RawMessage{}
	var recs []*Record
	seen := false
	intern := interner{}.of
	kinds := map[string][]string{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		key, _ := kt.(string)
		isRecs := strings.EqualFold(key, "records") // as json.Unmarshal matches it
		if isRecs && seen {
			return nil, bad(fmt.Errorf("a second \"records\""))
		}
		if !isRecs {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, bad(err)
			}
			head[key] = v
			continue
		}
		seen = true
		if t, err := dec.Token(); err != nil {
			return nil, bad(err)
		} else if t == nil {
			continue // "records": null
		} else if t != json.Delim('[') {
			return nil, bad(fmt.Errorf("records: want an array"))
		}
		recs = []*Record{}
		for dec.More() {
			var r *Record // null stays nil, as json.Unmarshal leaves it
			if err := dec.Decode(&r); err != nil {
				return nil, bad(err)
			}
			if r == nil {
				recs = append(recs, nil)
				continue
			}
			r.Verdict, r.OutHash = intern(r.Verdict), intern(r.OutHash)
			if len(r.Kinds) > 0 {
				k := strings.Join(r.Kinds, "\x00")
				if ks, ok := kinds[k]; ok {
					r.Kinds = ks
				} else {
					kinds[k] = r.Kinds
				}
			}
			recs = append(recs, r)
		}
		if _, err := dec.Token(); err != nil {
			return nil, bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(fmt.Errorf("data after the shard file's object"))
	}
	data, err := json.Marshal(head)
	if err != nil {
		return nil, bad(err)
	}
	var f ShardFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, bad(err)
	}
	if seen {
		f.Records = recs
	}
	return &f, nil
}
