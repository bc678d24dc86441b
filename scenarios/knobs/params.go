package knobs

import (
	"errors"
	"fmt"
	"strings"
)

// Param returns the value of file-declared knob name, and whether c has it.
func (c *Config) Param(name string) (string, bool) {
	for _, kv := range strings.Split(c.Params, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// setParam sets file-declared knob name, which c has, to value. Whether the
// file allows value is checked when the scenario is validated or built.
func (c *Config) setParam(name, value string) error {
	if err := CheckName(value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrBadKnob, name, value, err)
	}
	parts := strings.Split(c.Params, ",")
	for i, kv := range parts {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			parts[i] = name + "=" + value
		}
	}
	c.Params = strings.Join(parts, ",")
	return nil
}

// MaxNameLen bounds a name: a variant's, a param's value, any name a
// scenario file gives.
const MaxNameLen = 128

// CheckName says why s is not a name: empty, longer than [MaxNameLen], or
// holding a space or one of = | , (which --set and params use as
// separators).
func CheckName(s string) error {
	switch {
	case s == "":
		return errors.New("expected a non-empty name")
	case len(s) > MaxNameLen:
		return fmt.Errorf("name is %d characters; at most %d", len(s), MaxNameLen)
	case strings.ContainsAny(s, " \t\r\n=|,"):
		return fmt.Errorf("name %q: expected no spaces and none of = | ,", s)
	}
	return nil
}
