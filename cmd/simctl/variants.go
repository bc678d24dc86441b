package main

import (
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// pickVariants returns the variants of sc that --variant names, in the order
// named (each once), or every variant when none is named. An unknown name is
// a usage error that lists the variants there are.
func pickVariants(sc *scenarios.Scenario, arg string, names []string) ([]scenarios.Variant, error) {
	if len(names) == 0 {
		return sc.Variants, nil
	}
	var out []scenarios.Variant
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		v, ok := sc.Variant(n)
		if !ok {
			all := make([]string, len(sc.Variants))
			for i, v := range sc.Variants {
				all[i] = v.Name
			}
			return nil, usagef("scenario %q has no variant %q (variants: %s)", arg, n, strings.Join(all, ", "))
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, usagef("--variant: no variant named")
	}
	return out, nil
}
