package check

import (
	"regexp"
	"sort"
	"strings"

	"github.com/collsim/collsim/ranks"
)

// Group is findings of one kind between one pair of ops on one resource:
// the same bug seen on every rank, chunk and slot. Message is its first
// finding's; More counts the others.
type Group struct {
	Kind string `json:"kind"`
	// Ops is the unordered pair of ops (sorted; one op for a corrupted
	// tensor, which names the tensor).
	Ops []string `json:"ops"`
	// Object is the resource without rank, chunk or slot: `tensor "y"`,
	// `symmetric buffer "tp.ws"`, `signal pad "tp.ws"`.
	Object  string `json:"object"`
	Message string `json:"message"`
	More    int    `json:"more"`
	// Cause: the root cause's read and write are this group's pair (or
	// its corrupted tensor is the cause's output): the group whose
	// reordering produced the wrong value.
	Cause bool `json:"cause,omitempty"`
}

var (
	replayRe = regexp.MustCompile(` \(replay \d+\)`)
	// a resource's rank, slot and allocator-block details
	rankPrefixRe = regexp.MustCompile(`^rank \d+('s copy of)? `)
	onRankRe     = regexp.MustCompile(` on rank \d+(, slot \d+)?`)
	blockRe      = regexp.MustCompile(` \(caching-allocator block [^)]*\)`)
)

// objectOf is f's resource without rank, chunk or slot.
func objectOf(f ranks.Finding) string {
	s := f.Resource
	s = replayRe.ReplaceAllString(s, "")
	s = blockRe.ReplaceAllString(s, "")
	s = onRankRe.ReplaceAllString(s, "")
	s = rankPrefixRe.ReplaceAllString(s, "")
	return s
}

// opsOf is f's ops without replay numbers, sorted and without repeats.
func opsOf(f ranks.Finding) []string {
	var out []string
	for _, o := range f.Ops {
		o = replayRe.ReplaceAllString(o, "")
		if !containsStr(out, o) {
			out = append(out, o)
		}
	}
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// GroupFindings groups fs (sorted most severe first) by kind, op pair and
// object, in order of first appearance, then puts the groups of the root
// cause c first: the race between the cause's reader and writer (by the
// ops or the collectives they belong to) on the cause's tensor, then the
// corrupted tensor it explains.
func GroupFindings(fs []ranks.Finding, c *Cause) []Group {
	var out []Group
	idx := map[string]int{}
	for _, f := range fs {
		ops, obj := opsOf(f), objectOf(f)
		k := f.Kind + "\x00" + strings.Join(ops, "\x00") + "\x00" + obj
		if i, ok := idx[k]; ok {
			out[i].More++
			continue
		}
		idx[k] = len(out)
		out = append(out, Group{Kind: f.Kind, Ops: ops, Object: obj, Message: f.Message})
	}
	if c == nil {
		return out
	}
	type scored struct {
		g     Group
		score int
	}
	ss := make([]scored, len(out))
	for i := range out {
		ss[i] = scored{out[i], causeScore(&out[i], c)}
		ss[i].g.Cause = ss[i].score > 1
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].score > ss[j].score })
	for i := range ss {
		out[i] = ss[i].g
	}
	return out
}

// causeScore ranks g against cause c: 4 the race of exactly c's reader and
// writer on c's tensor, 3 one of their collectives' races on it, 2 the
// corrupted output, 1 another race of the pair; 0 unrelated.
func causeScore(g *Group, c *Cause) int {
	onTensor := strings.Contains(g.Object, `"`+c.Tensor+`"`)
	switch g.Kind {
	case Race, Mismatch:
		if c.Writer.Name == "" || len(g.Ops) != 2 {
			return 0
		}
		a, b := c.Reader.Name, c.Writer.Name
		if a > b {
			a, b = b, a
		}
		exact := g.Ops[0] == a && g.Ops[1] == b
		rd := func(op string) bool { return partOf(op, c.Reader.Name, c.ReaderCall) }
		wr := func(op string) bool { return partOf(op, c.Writer.Name, c.WriterCall) }
		family := rd(g.Ops[0]) && wr(g.Ops[1]) || wr(g.Ops[0]) && rd(g.Ops[1])
		switch {
		case exact && onTensor && g.Kind == Race:
			return 4
		case family && onTensor && g.Kind == Race:
			return 3
		case family:
			return 1
		}
	case Corruption:
		if c.Output != "" && strings.Contains(c.Output, " tensor "+strings.Trim(strings.TrimPrefix(g.Object, "tensor "), `"`)+"[") {
			return 2
		}
	}
	return 0
}

// partOf reports whether op is the op name or a part of collective call
// ("L0.ar" and "L0.ar.copy_in" of call "L0.ar").
func partOf(op, name, call string) bool {
	return op == name || call != "" && (op == call || strings.HasPrefix(op, call+"."))
}
