package explore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
