package corpus

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
)

// Program is one corpus program with its ground truth.
type Program struct {
	Name      string
	Mechanism string
	// Label is what the GPU showed: "racy" (a wrong output in some trial),
	// "clean" (none, also with the delay), or "frozen" (wrong in every
	// replay: a host value frozen at capture, not a race).
	Label          string
	WrongNatural   int
	WrongDelayed   int
	Trials         int
	Sanitizer      *bool // PyTorch's CUDA sanitizer flagged it (nil: not run)
	SanitizerError string
}

type runFile struct {
	Programs map[string]struct {
		Mechanism    string `json:"mechanism"`
		Label        string `json:"label"`
		WrongNatural int    `json:"wrong_natural"`
		WrongDelayed int    `json:"wrong_delayed"`
		Trials       int    `json:"trials"`
		Error        string `json:"error"`
	} `json:"programs"`
}

// Load reads the corpus in dir (validation/corpus): its labels, from every
// results/*run*.json (one file per recording batch: h200-run.json, then
// h200-run-b.json, ...), and the sanitizer's detections from the matching
// *sanitize*.json files, in name order. A program labelled in two files is
// an error.
func Load(dir string) ([]Program, error) {
	runs, err := filepath.Glob(filepath.Join(dir, "results", "*run*.json"))
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no results/*run*.json; record the corpus with validation/corpus/corpus.py", dir)
	}
	sort.Strings(runs)
	type sanEntry struct {
		Detected *bool  `json:"detected"`
		Error    string `json:"error"`
	}
	san := map[string]sanEntry{}
	sans, err := filepath.Glob(filepath.Join(dir, "results", "*sanitize*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(sans)
	for _, f := range sans {
		m := map[string]sanEntry{}
		if err := readJSON(f, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			san[k] = v
		}
	}
	var out []Program
	seen := map[string]string{}
	for _, f := range runs {
		var rf runFile
		if err := readJSON(f, &rf); err != nil {
			return nil, err
		}
		for name, r := range rf.Programs {
			if prev, ok := seen[name]; ok {
				return nil, fmt.Errorf("%s: program %q is labelled in %s too", f, name, prev)
			}
			seen[name] = f
			if r.Error != "" || r.Label == "" {
				return nil, fmt.Errorf("%s: program %q has no label (%s); rerun validation/corpus/corpus.py", f, name, r.Error)
			}
			p := Program{Name: name, Mechanism: r.Mechanism, Label: r.Label, WrongNatural: r.WrongNatural, WrongDelayed: r.WrongDelayed, Trials: r.Trials}
			if s, ok := san[name]; ok {
				p.Sanitizer, p.SanitizerError = s.Detected, s.Error
			}
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Program) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Result is collsim's answer on one program.
type Result struct {
	Program
	ImportErr string
	Notes     []string
	Run       string // run's verdict (nominal and the schedules run tries)
	DPOR      string // DPOR's verdict
	Complete  bool   // DPOR explored every class within the bound
	Traces    int
	// RecordedNs is the step time the trace recorded (first issue to the
	// last kernel's end); SimulatedNs the imported scenario's nominal one.
	RecordedNs, SimulatedNs int64
	Mode                    string // eager or graph, as imported
	// Detected: collsim says the program is buggy (race or worse from run
	// or DPOR; for a frozen label, a note naming a frozen host value).
	Detected bool
	// Right: Detected matches the label, and a clean program's DPOR is
	// complete.
	Right bool
}

// Options bound the work per program.
type Options struct {
	DPORBudget int // traces (default 20000)
	// Traces is the folder under dir the recordings are read from:
	// "traces" (the default) holds each program recorded with the current
	// recorder, "traces-first" its first recording (some made before the
	// recorder's probes, as a trace from a plain profiler is).
	Traces string
}

// Score imports and checks every program.
func Score(dir string, progs []Program, o Options) []Result {
	if o.DPORBudget <= 0 {
		o.DPORBudget = 20000
	}
	if o.Traces == "" {
		o.Traces = "traces"
	}
	var out []Result
	for _, p := range progs {
		out = append(out, scoreOne(dir, p, o))
	}
	return out
}

func scoreOne(dir string, p Program, o Options) Result {
	r := Result{Program: p}
	tr := filepath.Join(dir, o.Traces, p.Name)
	res, err := importer.Import(importer.Options{Traces: []string{tr + ".json.gz"}, ET: []string{tr + ".et.json.gz"}})
	if err != nil {
		r.ImportErr = err.Error()
		return r
	}
	for _, rk := range res.Ranks {
		r.Notes = append(r.Notes, rk.Notes...)
	}
	sc, err := scenarios.Load(res.Spec.Name+".yaml", res.YAML)
	if err != nil {
		r.ImportErr = err.Error()
		return r
	}
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
	if err != nil {
		r.ImportErr = "run: " + err.Error()
		return r
	}
	r.Run = rep.Verdict
	r.RecordedNs, r.SimulatedNs, r.Mode = res.StepNs, rep.StepTimeNs, res.Ranks[0].Mode
	read := func(string) ([]byte, error) { return res.YAML, nil }
	tg, err := explore.NewTargetFrom(res.Spec.Name+".yaml", sc.Variants[0].Name, nil, scenarios.ReadFunc(read))
	if err != nil {
		r.ImportErr = "explore: " + err.Error()
		return r
	}
	sum, err := explore.Explore(tg, &explore.DPOR{}, 0, explore.Options{Budget: o.DPORBudget})
	if err != nil {
		r.ImportErr = "dpor: " + err.Error()
		return r
	}
	r.DPOR, r.Traces = sum.Verdict, sum.Schedules
	r.Complete = sum.Complete != nil && *sum.Complete
	buggy := func(v string) bool { return v != "" && v != check.OK }
	switch p.Label {
	case "frozen":
		r.Detected = slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "frozen at capture") })
		r.Right = r.Detected
	case "racy":
		r.Detected = buggy(r.Run) || buggy(r.DPOR)
		r.Right = r.Detected
	default:
		r.Detected = buggy(r.Run) || buggy(r.DPOR)
		r.Right = !r.Detected && r.Complete
	}
	return r
}

// Scores are precision and recall of one detector on one set of programs.
type Scores struct {
	TP, FP, FN, TN int
}

func (s Scores) add(detected, buggy bool) Scores {
	switch {
	case detected && buggy:
		s.TP++
	case detected:
		s.FP++
	case buggy:
		s.FN++
	default:
		s.TN++
	}
	return s
}

// Precision is TP/(TP+FP) (1 when nothing was flagged).
func (s Scores) Precision() float64 {
	if s.TP+s.FP == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.TP+s.FP)
}

// Recall is TP/(TP+FN) (1 when nothing was buggy).
func (s Scores) Recall() float64 {
	if s.TP+s.FN == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.TP+s.FN)
}

func (s Scores) String() string {
	return fmt.Sprintf("precision %.2f, recall %.2f (TP %d, FP %d, FN %d, TN %d)", s.Precision(), s.Recall(), s.TP, s.FP, s.FN, s.TN)
}

// Totals are collsim's and the sanitizer's scores, overall and per
// mechanism. A clean program that DPOR could not finish counts as a false
// positive for collsim: it did not show the program clean.
func Totals(rs []Result) (collsim, sanitizer Scores, perMech map[string][2]Scores) {
	perMech = map[string][2]Scores{}
	for _, r := range rs {
		buggy := r.Label != "clean"
		det := r.Detected || (!buggy && !r.Complete)
		collsim = collsim.add(det, buggy)
		m := perMech[r.Mechanism]
		m[0] = m[0].add(det, buggy)
		if r.Sanitizer != nil {
			sanitizer = sanitizer.add(*r.Sanitizer, buggy)
			m[1] = m[1].add(*r.Sanitizer, buggy)
		}
		perMech[r.Mechanism] = m
	}
	return collsim, sanitizer, perMech
}

// Table writes the benchmark as markdown: one row per program, then the
// scores per mechanism and overall.
func Table(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| program | mechanism | GPU: wrong natural / delayed | label | collsim run | DPOR | collsim | CUDA sanitizer |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		dp := r.DPOR
		if r.DPOR != "" {
			dp = fmt.Sprintf("%s (%d traces%s)", r.DPOR, r.Traces, map[bool]string{true: ", complete", false: ""}[r.Complete])
		}
		if r.ImportErr != "" {
			dp = "error: " + r.ImportErr
		}
		san := "not run"
		if r.Sanitizer != nil {
			san = map[bool]string{true: "flagged", false: "silent"}[*r.Sanitizer]
		}
		got := map[bool]string{true: "right", false: "WRONG"}[r.Right]
		fmt.Fprintf(w, "| %s | %s | %d / %d of %d | %s | %s | %s | %s | %s |\n", r.Name, r.Mechanism, r.WrongNatural, r.WrongDelayed, r.Trials, r.Label, r.Run, dp, got, san)
	}
	c, s, per := Totals(rs)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mechanism | collsim | CUDA sanitizer |")
	fmt.Fprintln(w, "|---|---|---|")
	var ms []string
	for m := range per {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	for _, m := range ms {
		fmt.Fprintf(w, "| %s | %s | %s |\n", m, per[m][0], per[m][1])
	}
	fmt.Fprintf(w, "| **all** | **%s** | **%s** |\n", c, s)
}
