package knobs

import "fmt"

// The patch knob: which variant's patch the programs of a scenario file
// take (the file format's patches).
func init() {
	knobs = append(knobs, knob{"patch", "the variant whose patch (added, removed, moved ops) the programs take (scenario files only)",
		func(c *Config, v string) error {
			if err := CheckName(v); err != nil {
				return fmt.Errorf("%w: patch=%q: want a variant name: %v", ErrBadKnob, v, err)
			}
			c.Patch = v
			return nil
		}, func(c *Config) string { return c.Patch }})
}
