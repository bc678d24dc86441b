package sim

import (
	"bytes"
	"fmt"
	"strconv"
)

// Seed is a 64-bit seed as JSON writes it: a decimal string ("1234"), so
// that readers that hold every JSON number as a float64 (jq, JavaScript) do
// not round a seed above 2^53 to another seed. It reads a string or, as
// files written before it did, a bare number.
type Seed uint64

// MarshalJSON implements json.Marshaler.
func (s Seed) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatUint(uint64(s), 10)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Seed) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '"' {
		u, err := strconv.Unquote(string(t))
		if err != nil {
			return fmt.Errorf("seed %s: want a decimal string or number", b)
		}
		t = []byte(u)
	}
	v, err := strconv.ParseUint(string(t), 10, 64)
	if err != nil {
		return fmt.Errorf("seed %s: want a non-negative 64-bit integer, as a decimal string or number", b)
	}
	*s = Seed(v)
	return nil
}
