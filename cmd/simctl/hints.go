package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// knobHint adds "did you mean" to a knob error for a --set key that is
// no knob but is close to one (--set worksapce=per-call).
func knobHint(sets []string, err error) error {
	if err == nil || !errors.Is(err, scenarios.ErrBadKnob) {
		return err
	}
	keys := scenarios.KnobKeys()
	for _, s := range sets {
		k, _, _ := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		known := false
		for _, x := range keys {
			known = known || x == k
		}
		if near := scenarios.Nearest(k, keys); !known && near != "" {
			return fmt.Errorf("--set %s: did you mean %q? %w", s, near, err)
		}
	}
	return err
}

// plural is "1 rank", "2 ranks".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
