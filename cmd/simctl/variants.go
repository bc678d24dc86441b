package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
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

// moreWhere says where the findings of kind the text leaves out are: in
// --format json, or, past the --max-findings cap, nowhere yet.
func moreWhere(v *check.VariantReport, kind string) string {
	kept := 0
	for _, f := range v.Findings {
		if f.Kind == kind {
			kept++
		}
	}
	if kept < v.Counts[kind] {
		return fmt.Sprintf("%d kept: see --format json; raise --max-findings for the rest", kept)
	}
	return "see --format json"
}

// writeFindingSample prints the root cause c (when known), then one line
// per group of findings (check.GroupFindings: kind, op pair, resource; the
// cause's first), at most maxGroupsShown of a kind, with how many more
// are like it, and how many of each kind are not shown and where they are
// (rest: "--format json").
func writeFindingSample(w io.Writer, fs []ranks.Finding, c *check.Cause, rest string) {
	count := map[string]int{}
	for _, f := range fs {
		count[f.Kind]++
	}
	writeCauseAndGroups(w, "  ", c, check.GroupFindings(fs, c), count, func(string) string { return rest })
}

// singleVariant is the --variant of a command that takes one variant
// (explore, show): given twice, or as a comma-separated list, it is an
// error rather than the last one silently winning.
type singleVariant struct {
	p   *string
	set bool
}

func (s *singleVariant) Set(v string) error {
	if s.set {
		return fmt.Errorf("given twice (%q, then %q): this command takes one variant (simctl run takes several)", *s.p, v)
	}
	if strings.Contains(v, ",") {
		return fmt.Errorf("%q: this command takes one variant (simctl run takes a comma-separated list)", v)
	}
	*s.p, s.set = v, true
	return nil
}

func (s *singleVariant) String() string { return *s.p }
func (s *singleVariant) Type() string   { return "string" }
