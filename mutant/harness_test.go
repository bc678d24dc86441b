package mutant_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/collsim/collsim/mutant"
)

var full = flag.Bool("mutants.full", false, "run every test of the mutated packages under every mutant and list all that kill it (slow)")

// killers lists, for every mutant, the semantic tests (by package) that
// must fail when it is applied: no golden file, no pinned hash. The fast
// sweep runs exactly these.
var killers = map[mutant.Name]map[string][]string{
	mutant.RaceDetectorOff:         {"ranks": {"TestPadSlotsRaceChecked", "TestSignalReleaseAcquireOrdersData", "TestEventSemantics"}},
	mutant.MismatchCheckOff:        {"ranks": {"TestSignatureMismatch"}, "collectives": {"TestPadScopeAllReduce"}},
	mutant.PadNotShared:            {"ranks": {"TestSharedPadRacesAcrossCalls"}},
	mutant.PadAlwaysShared:         {"collectives": {"TestPadAliases", "TestPadScopeAllReduce"}},
	mutant.EventWaitFirstRecord:    {"ranks": {"TestEventSemantics", "TestFlowsOrderedCalls"}},
	mutant.WorkspaceCapRemoved:     {"collectives": {"TestAutoRespectsWorkspaceCap"}},
	mutant.RankSkewOff:             {"ranks": {"TestRandomSchedulesSkewRanks"}},
	mutant.ReplayDroppedFromSignal: {"check": {"TestEveryReplayChecked"}},
	mutant.RecvWithoutAcquire:      {"ranks": {"TestFifoRaceChecked"}},
	mutant.BarrierNoExit:           {"ranks": {"TestFlowsOrderedCalls"}, "collectives": {"TestAllReduceEqualsIdealSum", "TestPropAllReduceIdealWhenOrdered", "TestPropMultimemSplitIsTheSum"}},
	mutant.ReplayInputsFixed:       {"ranks": {"TestEveryReplayOnItsOwnInputs"}},
	mutant.ReplaysNotChecked:       {"check": {"TestEveryReplayChecked"}},
	mutant.FlagAcquireAnyValue:     {"ranks": {"TestFlagWaitOnOverwrittenPutAcquiresNothing"}},
	mutant.WakeOnFlagStoresOnly:    {"ranks": {"TestEveryWriteWakesFlagWaits"}},
	mutant.PadSignatureCheckOff:    {"scenarios": {"TestPadSignatureMismatch"}},
	mutant.P2PConnectOff:           {"collectives": {"TestP2PConnectionSetup"}},
	mutant.ConnStepShared:          {"ranks": {"TestSteppedConnection"}, "scenarios": {"TestRCCLGraphsSharedConnections"}},
	mutant.RegistrationIgnored:     {"scenarios": {"TestFlagProtocols", "TestFlagRegistrationAtReplay"}},
	mutant.CoarseWhereShared:       {"collectives": {"TestCoarseWhereNothingInterleaves", "TestPropCoarseEqualsFine", "TestPropCoarseListEqualsFine"}},
	mutant.CoarseEarlyFinisher:     {"collectives": {"TestCoarseListKinds", "TestPropCoarseListEqualsFine"}},
	mutant.GuardOrdersCopies:       {"collectives": {"TestStreamGuardLeavesTheCopiesRacing"}, "scenarios": {"TestSymmGuardLeavesTheHeadlineCorrupt"}},
	mutant.FoldPassesSeeProto:      {"ranks": {"TestPropFoldRunsAsUnfolded"}},
	mutant.FoldTasksRunProto:       {"ranks": {"TestPropFoldRunsAsUnfolded"}, "scenarios": {"TestFoldMoE"}},
	// DPOR's: fixed programs checked against the naive enumeration (no
	// generator, no seed: rapid's luck plays no part).
	mutant.DPORWaitRacesDropped:          {"explore": {"TestDPORFixedMatchNaive"}},
	mutant.DPORSleepReadWriteIndependent: {"explore": {"TestDPORFixedMatchNaive"}},
	mutant.DPORSleepMissedWakeup:         {"explore": {"TestDPORFixedMatchNaive"}},
	mutant.DPORFreeQueryIndependent:      {"explore": {"TestDPORDeferredFreesMatchNaive"}},
	mutant.DeferredFreeAtSyncOnly:        {"scenarios": {"TestDeferredFreeAtTheMalloc"}, "explore": {"TestDPORDeferredFreesMatchNaive"}},
}

// shortMutants are those TestMutantsAreKilled applies under -short: the
// DPOR mutants, killed by TestDPORFixedMatchNaive in under a second each.
var shortMutants = []mutant.Name{mutant.DPORWaitRacesDropped, mutant.DPORSleepReadWriteIndependent, mutant.DPORSleepMissedWakeup}

// TestMutantsAreKilled builds the test binaries of the packages the
// mutants live in with the mutants tag, checks that every listed killing
// test passes unmutated, then applies each mutant (COLLSIM_MUTANT) and
// checks that each of its killing tests fails. It logs the table mutant →
// killing tests. With -mutants.full it runs every test of those packages
// under every mutant instead, and lists all that fail. Under -short (CI)
// it applies shortMutants only.
func TestMutantsAreKilled(t *testing.T) {
	for _, m := range mutant.All {
		if len(killers[m]) == 0 {
			t.Errorf("mutant %s has no killing test listed", m)
		}
	}
	// -short (CI) applies only the mutants whose killers take a second
	// and live in one package (one test binary to build); without it,
	// every mutant.
	all := mutant.All
	if testing.Short() {
		all = shortMutants
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the mutant test binaries")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bins := map[string]string{}
	pkgs := map[string]bool{}
	for _, m := range all {
		for p := range killers[m] {
			pkgs[p] = true
		}
	}
	for p := range pkgs {
		bin := filepath.Join(dir, p+".test")
		cmd := exec.Command(goBin, "test", "-c", "-tags", "mutants", "-o", bin, "./"+p)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s with the mutants tag: %v\n%s", p, err, out)
		}
		bins[p] = bin
	}
	run := func(p string, m mutant.Name, tests []string) (failed []string, ok bool) {
		// A mutant's failing inputs are not regressions of the real code:
		// rapid must not save them under the package's testdata.
		args := []string{"-test.count=1", "-rapid.nofailfile"}
		if tests != nil {
			args = append(args, "-test.run", "^("+strings.Join(tests, "|")+")$")
		}
		if *full || tests == nil {
			args = append(args, "-test.short")
		} else {
			args = append(args, "-test.v")
		}
		cmd := exec.Command(bins[p], args...)
		cmd.Dir = filepath.Join(root, p)
		cmd.Env = append(os.Environ(), "COLLSIM_MUTANT="+string(m))
		out, err := cmd.CombinedOutput()
		for _, line := range regexp.MustCompile(`(?m)^--- FAIL: (\S+)`).FindAllStringSubmatch(string(out), -1) {
			failed = append(failed, line[1])
		}
		return failed, err == nil
	}
	// Unmutated, every killing test passes.
	for p := range pkgs {
		var tests []string
		for _, m := range all {
			tests = append(tests, killers[m][p]...)
		}
		if failed, ok := run(p, "", tests); !ok {
			t.Fatalf("package %s: killing tests fail without a mutant: %v", p, failed)
		}
	}
	var table []string
	for _, m := range all {
		var killedBy []string
		pkgNames := make([]string, 0, len(killers[m]))
		for p := range killers[m] {
			pkgNames = append(pkgNames, p)
		}
		sort.Strings(pkgNames)
		for _, p := range pkgNames {
			tests := killers[m][p]
			if *full {
				tests = nil
			}
			failed, _ := run(p, m, tests)
			got := map[string]bool{}
			for _, f := range failed {
				got[f] = true
				killedBy = append(killedBy, p+"."+f)
			}
			if !*full {
				for _, k := range killers[m][p] {
					if !got[k] {
						t.Errorf("mutant %s: %s.%s does not fail", m, p, k)
					}
				}
			}
		}
		if len(killedBy) == 0 {
			t.Errorf("mutant %s survives", m)
		}
		table = append(table, string(m)+" → "+strings.Join(killedBy, ", "))
	}
	t.Log("mutant → killing tests:\n" + strings.Join(table, "\n"))
}
