package explore

import (
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// Options bound an exploration.
type Options struct {
	// Budget is the most schedules to run (≥ 1).
	Budget int
	// Deadline, when non-zero, stops handing out schedules once it has
	// passed; those already handed out finish and are merged, so what ran
	// is the first N schedules (wall clock: it bounds effort, and the
	// summary says how many schedules ran).
	Deadline time.Time
	// Workers run independent schedules in parallel (≤ 1: one).
	Workers int
	// Outcomes keeps the output values (with provenance) of each distinct
	// outcome.
	Outcomes bool
	// Progress, when set, is called after each merged schedule with the
	// number done so far.
	Progress func(done int)
	// Shard, when Count > 0, runs only the schedules with index ≡ Index
	// (mod Count) and keeps their records for [Merge] (in Summary.Records,
	// unless RecordsElsewhere).
	Shard Shard
	// RecordsElsewhere: a sharded run keeps no records, its caller reads
	// them back from where Checkpoint put them.
	RecordsElsewhere bool
	// GCPercent, when > 0, is the garbage collector's target percentage
	// while Explore runs ([TuneGC]; simctl uses [DefaultGCPercent]).
	GCPercent int
	// Stop, when set, is asked before each schedule is handed out, like
	// Deadline (a signal handler sets it); a stopped run is Partial.
	Stop func() bool
	// Checkpoint, when set, sees every record in schedule order as it is
	// merged (checkpoint.go).
	Checkpoint func(*Record)
	// Resume, when set, yields the records of a checkpoint: the first
	// schedules of this exploration, already run. Explore folds each into
	// the summary as it comes (keeping none, unless Shard asks for the
	// records) and runs the rest; an error it yields ends Explore with it.
	// [Records] makes one of a slice.
	Resume iter.Seq2[*Record, error]
}

// Outcome is one distinct result of the schedules: the output tensors of
// every rank, with how many schedules gave it.
type Outcome struct {
	Hash    string        `json:"hash"`
	Count   int           `json:"count"`
	First   int           `json:"first_schedule"`
	Verdict string        `json:"verdict"`
	Ranks   []RankOutputs `json:"ranks,omitempty"`
}

// Summary is the result of an exploration. It depends only on the target,
// the strategy, the seed and the budget, never on the number of workers or
// the machine (wall-clock figures are kept apart in Elapsed).
type Summary struct {
	Exploration
	Schedules int `json:"schedules"`
	// Complete is set by exhaustive strategies: every equivalence class of
	// interleavings was explored.
	Complete *bool `json:"complete,omitempty"`
	// Traces is the number of executions an exhaustive strategy ran (one
	// per class of interleavings explored, up to the reduction's redundancy).
	Traces *int `json:"traces,omitempty"`
	// Races is, for DPOR, the number of reversible races found over all
	// traces (0: every conflicting pair of steps is ordered by causality, so
	// one trace covers every interleaving).
	Races *int `json:"races,omitempty"`
	// SleepBlocked is, for DPOR, how many of the traces were cut short
	// because every enabled step was asleep (their continuations were
	// explored already): the search's redundancy. Sleep sets never let two
	// equivalent executions both run to the end (Abdulla et al. 2014), so
	// the other traces are as many distinct classes of interleavings, one
	// each: a search with no redundant trace (optimal DPOR, with wakeup
	// trees) would run as many, and save at most SleepBlocked.
	SleepBlocked *int `json:"sleep_blocked,omitempty"`
	// Partial: the run stopped (--time, a signal) before it had run every
	// schedule it planned; Planned is how many it planned.
	Partial bool   `json:"partial,omitempty"`
	Planned int    `json:"planned,omitempty"`
	Verdict string `json:"verdict"`
	// Findings counts, per kind, the schedules with at least one finding of
	// that kind.
	Findings map[string]int `json:"findings"`
	// Outcomes are the distinct outcomes, in order of first appearance.
	Outcomes []*Outcome `json:"outcomes"`
	// Witness is the first schedule with the worst verdict (nil when every
	// schedule was ok).
	Witness *Witness `json:"-"`
	// WitnessInfo describes Witness without its choices (those go to the
	// witness file).
	WitnessInfo *WitnessInfo `json:"witness,omitempty"`
	// Example findings of the witness.
	WitnessFindings []ranks.Finding `json:"witness_findings,omitempty"`
	// WitnessFindingsTotal counts the witness's findings, including those
	// past the per-kind cap (32) that WitnessFindings leaves out, which
	// WitnessFindingsTruncated says.
	WitnessFindingsTotal     int  `json:"witness_findings_total,omitempty"`
	WitnessFindingsTruncated bool `json:"witness_findings_truncated,omitempty"`

	Elapsed time.Duration `json:"-"`
	// Records are the per-schedule records of a sharded run (see [Merge]).
	Records []*Record `json:"-"`
}

// Exploration is what an exploration explores: the scenario, variant and
// overrides, the strategy and the seed. A summary and every shard file of
// it carry one; shards merge only when theirs are equal.
type Exploration struct {
	Scenario string           `json:"scenario"`
	Variant  string           `json:"variant"`
	Sets     []string         `json:"sets"`
	Config   scenarios.Config `json:"config"`
	Strategy string           `json:"strategy"`
	Seed     sim.Seed         `json:"seed"`
}

// Equal reports whether e and o explore the same thing.
func (e Exploration) Equal(o Exploration) bool {
	return e.Scenario == o.Scenario && e.Variant == o.Variant && slices.Equal(e.Sets, o.Sets) &&
		e.Config == o.Config && e.Strategy == o.Strategy && e.Seed == o.Seed
}

// Explore runs strategy s against t within opt and summarises.
func Explore(t *Target, s Strategy, seed uint64, opt Options) (*Summary, error) {
	defer TuneGC(opt.GCPercent)()
	start := time.Now()
	sum := &Summary{
		Exploration: Exploration{Scenario: t.Scenario.Name, Variant: t.Variant, Sets: append([]string{}, t.Sets...),
			Config: t.Config, Strategy: s.Name(), Seed: sim.Seed(seed)},
		Verdict: check.OK, Findings: map[string]int{},
	}
	t.Provenance = opt.Outcomes
	m := &merger{sum: sum, byHash: map[string]*Outcome{}, outcomes: opt.Outcomes, progress: opt.Progress}
	best := check.OK // this run's worst verdict so far: which records carry a witness
	merge := func(sc *Schedule) {
		r := &Record{Index: sc.Index, Seed: sim.Seed(sc.Seed), Verdict: sc.Verdict, Kinds: sc.Kinds(), OutHash: sc.OutHash}
		if opt.Outcomes {
			r.Outputs = sc.Outputs
		}
		if check.Worse(sc.Verdict, best) {
			best = sc.Verdict
			sc.Explain()
			r.Witness, r.Findings = newWitness(t, s, sc), sc.Findings
			r.FindingsTotal = sc.FindingsTotal()
		}
		if opt.Shard.Count > 0 && !opt.RecordsElsewhere {
			sum.Records = append(sum.Records, r)
		}
		m.add(r)
		if opt.Checkpoint != nil {
			opt.Checkpoint(r)
		}
		sc.Release() // its memory serves the next schedule
	}
	budget := max(opt.Budget, 1)
	indices := planOf(budget, opt.Shard) // checkpoint.go: no slice of the budget's size
	planned := indices.n
	var err error
	if indices, best, err = resume(s, sum, m, indices, opt); err != nil {
		return nil, err
	}
	expired := func() bool {
		return !opt.Deadline.IsZero() && time.Now().After(opt.Deadline) || opt.Stop != nil && opt.Stop()
	}
	if ind, ok := s.(Independent); ok && opt.Workers > 1 {
		if err := exploreParallel(t, ind, indices, opt.Workers, expired, merge); err != nil {
			return nil, err
		}
	} else {
		if opt.Shard.Count > 1 {
			if _, ok := s.(Independent); !ok {
				return nil, fmt.Errorf("strategy %s cannot be sharded: its schedules depend on each other (shard random or pct)", s.Name())
			}
		}
		for k := range indices.n {
			i := indices.at(k)
			if expired() {
				break
			}
			ch, sd, ok := s.Begin(i)
			if !ok {
				break
			}
			sc, err := t.Run(s.Mode(), ch)
			if err != nil {
				return nil, err
			}
			sc.Index, sc.Seed = i, sd
			if err := s.End(i, sc); err != nil {
				return nil, err
			}
			merge(sc)
		}
	}
	if d, ok := s.(*DPOR); ok {
		c, n, r, b := s.Complete(), sum.Schedules, d.Races, d.SleepBlocked
		sum.Complete, sum.Traces, sum.Races, sum.SleepBlocked = &c, &n, &r, &b
	} else if sum.Schedules < planned {
		sum.Partial, sum.Planned = true, planned
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// exploreParallel runs independent schedules on workers goroutines and
// merges them in schedule order as they come in: workers never wait for a
// batch's slowest schedule, and the merge overlaps their runs. At most
// window schedules are in flight or waiting to be merged. The deadline is
// checked before each schedule is handed out (up to one per worker waits
// in the channel, ready for the next free worker); whatever was handed out
// is run and merged, in order.
func exploreParallel(t *Target, s Independent, indices schedules, workers int, expired func() bool, merge func(*Schedule)) error {
	type result struct {
		sc  *Schedule
		err error
	}
	window := workers * 16
	slots := make([]chan result, window) // schedule k's result goes to slots[k%window]
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	next := make(chan int, workers)     // a worker that finishes finds its next schedule waiting, without a switch to the feeder
	free := make(chan struct{}, window) // tokens: a slot may be handed out
	for range window {
		free <- struct{}{}
	}
	stop := make(chan struct{})
	issued := make(chan int, 1) // how many schedules the feeder handed out
	go func() {
		defer close(next)
		k := 0
		defer func() { issued <- k }()
		for ; k < indices.n; k++ {
			select {
			case <-stop: // an error: hand out nothing more
				return
			default:
			}
			select {
			case <-free:
			case <-stop:
				return
			}
			if expired() {
				return
			}
			next <- k
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range next {
				i := indices.at(k)
				ch, sd, _ := s.Begin(i)
				sc, err := t.Run(s.Mode(), ch)
				if err == nil {
					sc.Index, sc.Seed = i, sd
					if sc.Verdict == check.OK {
						// It can never be the witness (only a verdict worse
						// than ok is explained), so its world is done with:
						// this worker's next schedule runs in its memory,
						// still in this core's cache.
						sc.Release()
					}
				}
				slots[k%window] <- result{sc, err}
			}
		})
	}
	var err error
	n := -1 // schedules handed out, once the feeder has stopped
	for k := 0; n < 0 || k < n; k++ {
		var r result
		select {
		case r = <-slots[k%window]:
		case n = <-issued:
			if k >= n {
				continue // the loop condition ends it
			}
			r = <-slots[k%window]
		}
		if r.err != nil {
			err = r.err
			break
		}
		merge(r.sc)
		free <- struct{}{}
	}
	close(stop)
	wg.Wait()
	return err
}

var _ sim.Chooser = (*sim.PCT)(nil)
