package format

import (
	"fmt"
	"slices"
)

// DiffOps returns the patch that turns program ops base into target, ops
// named as a patch names them (their id, else their name; each name once
// in each list): the ops target lacks removed, the ops whose content
// differs replaced, then, in target's order, every op target adds or that
// leaves base's order (the ops outside a longest common order) placed
// right after its predecessor in target. Applying it gives target exactly;
// DiffOps checks that and returns an error otherwise. (simctl show
// --lowered writes each variant of a graph's program this way.)
func DiffOps(base, target []OpSpec) ([]PatchSpec, error) {
	B, T := base, target
	inT := map[string]int{}
	for i := range T {
		if _, dup := inT[opRef(&T[i])]; dup {
			return nil, fmt.Errorf("the target names %q twice", opRef(&T[i]))
		}
		inT[opRef(&T[i])] = i
	}
	inB := map[string]int{}
	for i := range B {
		if _, dup := inB[opRef(&B[i])]; dup {
			return nil, fmt.Errorf("the base names %q twice", opRef(&B[i]))
		}
		inB[opRef(&B[i])] = i
	}
	var steps []PatchSpec
	for i := range B {
		if _, ok := inT[opRef(&B[i])]; !ok {
			steps = append(steps, PatchSpec{Verb: "remove", Ref: opRef(&B[i]), Program: -1})
		}
	}
	for i := range T {
		if j, ok := inB[opRef(&T[i])]; ok && opLine(B[j]) != opLine(T[i]) {
			op := T[i]
			steps = append(steps, PatchSpec{Verb: "replace", Ref: opRef(&T[i]), Op: &op, Program: -1})
		}
	}
	// the common ops in base's order, as indices into T: a longest
	// increasing run of them stays, the rest move
	var common []int
	for i := range B {
		if j, ok := inT[opRef(&B[i])]; ok {
			common = append(common, j)
		}
	}
	stays := map[int]bool{}
	for _, j := range longestIncreasing(common) {
		stays[j] = true
	}
	for i := range T {
		if stays[i] {
			continue
		}
		st := PatchSpec{Ref: opRef(&T[i]), Program: -1}
		if i > 0 {
			st.Anchor, st.After = opRef(&T[i-1]), true
		} else {
			// before the first op that stays
			for j := range T {
				if stays[j] {
					st.Anchor = opRef(&T[j])
					break
				}
			}
			if st.Anchor == "" {
				return nil, fmt.Errorf("no op of the base is left to place the first op before")
			}
		}
		if _, ok := inB[st.Ref]; ok {
			st.Verb = "move"
		} else {
			op := T[i]
			st.Verb, st.Op = "add", &op
		}
		steps = append(steps, st)
	}
	var err error
	got := applyPatch([]ProgramSpec{{Ops: B}}, steps, func(_ Pos, msg string) { err = fmt.Errorf("%s", msg) })
	if err != nil {
		return nil, fmt.Errorf("the patch does not apply: %w", err)
	}
	if len(got[0].Ops) != len(T) {
		return nil, fmt.Errorf("the patch gives %d ops, not %d", len(got[0].Ops), len(T))
	}
	for i := range T {
		if opLine(got[0].Ops[i]) != opLine(T[i]) {
			return nil, fmt.Errorf("the patch gives %s at op %d, not %s", opLine(got[0].Ops[i]), i, opLine(T[i]))
		}
	}
	return steps, nil
}

// OpLine is op as a program file writes it: one flow mapping.
func OpLine(op OpSpec) string { return opLine(op) }

// OpRef is what a patch calls op: its id, or its name.
func OpRef(op *OpSpec) string { return opRef(op) }

// longestIncreasing is a longest strictly increasing subsequence of xs.
func longestIncreasing(xs []int) []int {
	// patience sorting: tails[k] is the index in xs of the smallest tail
	// of an increasing run of length k+1
	var tails []int
	prev := make([]int, len(xs))
	for i, x := range xs {
		k, _ := slices.BinarySearchFunc(tails, x, func(t, x int) int { return xs[t] - x })
		prev[i] = -1
		if k > 0 {
			prev[i] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	out := make([]int, len(tails))
	k := -1
	if len(tails) > 0 {
		k = tails[len(tails)-1]
	}
	for i := len(tails) - 1; i >= 0; i-- {
		out[i] = xs[k]
		k = prev[k]
	}
	return out
}
