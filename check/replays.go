package check

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
)

// Every replay checked (ranks/replays.go). A graph of R replays whose
// inputs are per-replay computes R steps, each on inputs of its own: the
// world copies the compared tensors at the end of every replay but the
// last, and each copy is compared with the reference run on that replay's
// inputs (the last replay's is the final state, compared as always). A
// rank's finding names the first replay that went wrong, so a corrupted
// replay is never hidden by a clean later one.

// buildReplayRefs gives ref the records of replays 0…R-2 of cfg (the one
// NewReference ran is the last replay's) when the program's replays are
// independent steps (independent): run apart on each replay's inputs
// when they are per-replay (perReplay), otherwise the one reference
// (every replay computes the same thing). Replays that carry state are
// judged by the final state. Each run's world is released once recorded.
func (ref *Reference) buildReplayRefs(p Program, R int, independent, perReplay bool) error {
	if R < 2 || !independent {
		return nil
	}
	for k := range R - 1 {
		if !perReplay {
			ref.replays = append(ref.replays, ref.rec)
			continue
		}
		b, res, err := runReference(p, k, true)
		if err != nil {
			return fmt.Errorf("reference of replay %d: %w", k, err)
		}
		if res.Hung {
			// a finding, as the last replay's reference hanging is
			// (nominalBaseline): the replays are not checked one by one,
			// the final state still is
			h := res.Findings[len(res.Findings)-1]
			ref.hangs = append(ref.hangs, refHangFinding(h, fmt.Sprintf("the reference of replay %d", k),
				fmt.Sprintf("the reference program on replay %d's inputs hangs, so replays are not checked one by one (the final state still is): %s", k, h.Message)))
			ref.replays = nil
			releaseBuilt(b)
			return nil
		}
		ref.replays = append(ref.replays, newRefRecord(b, p, k, false))
		releaseBuilt(b)
	}
	return nil
}

// compareReplays reports, per rank, the first replay whose copy of the
// compared tensors differs from that replay's reference, with its first
// differing chunk. The second result makes each finding's message and
// resource (see compare; rw rebuilds the replay's reference run for its
// provenance); bad marks the ranks reported.
func compareReplays(got *Built, ref *Reference, rw *refWorlds) (out []ranks.Finding, details []func() (message, resource string), bad map[int]bool) {
	if len(ref.replays) == 0 || mutant.On(mutant.ReplaysNotChecked) {
		return nil, nil, nil
	}
	R := len(ref.replays) + 1
	for r := range got.Compare {
	replays:
		for k, want := range ref.replays {
			vals := got.World.ReplayValues(r, k)
			if vals == nil || r >= len(want.ranks) {
				continue
			}
			wr := &want.ranks[r]
			i, n := 0, 0
			var first *ranks.Buffer
			var fj, fc int
			var gv ranks.Value
			var wv uint64
			for j := range wr.tensors() {
				for c, w := range wr.vals(j) {
					if i >= len(vals) {
						break replays
					}
					if g := vals[i]; g.N != w {
						n++
						if first == nil {
							first, fj, fc, gv, wv = got.Compare[r][j], j, c, g, w
						}
					}
					i++
				}
			}
			if n == 0 {
				continue
			}
			if bad == nil {
				bad = map[int]bool{}
			}
			bad[r] = true
			out = append(out, ranks.Finding{Kind: ranks.KindCorruption, Ranks: []int{r}, Ops: []string{first.Name}})
			r, k, name, gw, want := r, k, first.Name, got.World, want
			details = append(details, func() (message, resource string) {
				return fmt.Sprintf("replay %d (%s of %d, the first that went wrong on rank %d): rank %d tensor %s[%d]: expected %d = %s; observed %d = %s (%d chunks differ from replay %d's reference on rank %d)",
						k, ordinal(k+1), R, r, r, name, fc, wv, rw.provenance(want, r, fj, fc), gv.N, gw.Srcs.Format(gv), n, k, r),
					fmt.Sprintf("rank %d tensor %q (replay %d)", r, name, k)
			})
			break
		}
	}
	return out, details, bad
}

// ordinal writes n ≥ 1 as "1st", "2nd", "3rd", "4th", ….
func ordinal(n int) string {
	suf := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suf = "st"
	case n%10 == 2:
		suf = "nd"
	case n%10 == 3:
		suf = "rd"
	}
	return fmt.Sprintf("%d%s", n, suf)
}
