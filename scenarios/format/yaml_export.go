package format

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/collsim/collsim/scenarios/knobs"
)

// MarshalSpec writes s as YAML in the documented layout. Every knob its
// form reads is written out, so the file does not depend on the defaults.
func MarshalSpec(s *Spec) []byte {
	var b strings.Builder
	p := func(indent int, format string, a ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, a...)
		b.WriteByte('\n')
	}
	p(0, "name: %s", quote(s.Name))
	if s.Description != "" {
		writeText(&b, 0, "description", s.Description)
	}
	c := s.Base
	p(0, "hardware: %s", quote(c.Arch))
	p(0, "ranks: %d", c.TP)
	p(0, "mode: %s", quote(c.Mode))
	p(0, "replays: %d", c.Replays)
	p(0, "chunks: %d", c.Chunks)
	p(0, "knobs:")
	used := s.UsedKnobs()
	for _, k := range knobs.All() {
		if _, top := topKeyOf(k.Key()); top || !used[k.Key()] {
			continue
		}
		val := k.Get(&c)
		if probe := c; k.Set(&probe, val) != nil {
			// The zero value of a knob that only some scenarios use
			// ("" or 0): unset, and not a value a file may spell.
			continue
		}
		p(1, "%s: %s", k.Key(), knobVal(val))
	}
	marshalRefs(p, s) // spec_refs.go
	if len(s.Params) > 0 {
		p(0, "params:")
		for _, pr := range s.Params {
			sizes := ""
			if pr.Sizes != nil {
				var kv []string
				for _, v := range pr.Values {
					kv = append(kv, fmt.Sprintf("%s: %d", quote(v), pr.Sizes[v]))
				}
				sizes = ", sizes: {" + strings.Join(kv, ", ") + "}"
			}
			p(1, "- {name: %s, values: %s, default: %s%s}", quote(pr.Name), names(pr.Values), quote(pr.Default), sizes)
		}
	}
	writeHostTop(p, s)
	if len(s.Comms) > 0 {
		p(0, "communicators:")
		for _, cm := range s.Comms {
			p(1, "- name: %s", quote(cm.Name))
			p(2, "ranks: %s", cm.Ranks)
			if cm.Workspace != "" {
				p(2, "workspace: %s", quote(cm.Workspace))
			}
		}
	}
	if len(s.Symm) > 0 {
		p(0, "symmetric:")
		for _, sy := range s.Symm {
			line := fmt.Sprintf("- {name: %s, ranks: %s, chunks: %d", quote(sy.Name), sy.Ranks, sy.Chunks)
			if sy.Pad != "" {
				line += ", pad: " + quote(sy.Pad)
			}
			if sy.Registration != "" {
				line += ", registration: " + quote(sy.Registration)
			}
			p(1, "%s}", line)
		}
	}
	if len(s.Tensors) > 0 {
		p(0, "tensors:")
		for _, t := range s.Tensors {
			p(1, "- name: %s", quote(t.Name))
			if t.BytesExpr != nil {
				p(2, "bytes: %s", strconv.Quote(t.BytesExpr.Src))
			} else {
				p(2, "bytes: %d", t.Bytes)
			}
			if len(t.PerReplay) > 0 {
				p(2, "per_replay:")
				for _, row := range t.PerReplay {
					p(3, "- %s", uints(row))
				}
			}
			if t.Chunks != 0 {
				p(2, "chunks: %d", t.Chunks)
			}
			if len(t.Init) > 0 {
				p(2, "init: %s", uints(t.Init))
			}
			if len(t.InitPerRank) > 0 {
				p(2, "init_per_rank:")
				for _, row := range t.InitPerRank {
					p(3, "- %s", uints(row))
				}
			}
			if t.Output {
				p(2, "output: true")
			}
		}
	}
	if s.Graph != nil {
		p(0, "graph:")
		if s.Graph.Builder != "" {
			p(1, "builder: %s", quote(s.Graph.Builder))
		} else {
			p(1, "ops:")
			for _, op := range s.Graph.Ops {
				p(2, "- name: %s", quote(op.Name))
				p(3, "kind: %s", quote(op.Kind))
				p(3, "inputs: %s", names(op.Inputs))
				p(3, "output: %s", quote(op.Output))
				for _, f := range []struct {
					k string
					v int64
				}{{"m", op.M}, {"k", op.K}, {"n", op.N}, {"experts", op.Experts}, {"weight", op.Weight}} {
					if f.v != 0 {
						p(3, "%s: %d", f.k, f.v)
					}
				}
				if op.Comm != "" {
					p(3, "comm: %s", quote(op.Comm))
				}
				if op.TimeNs != 0 {
					p(3, "time: %dns", op.TimeNs)
				}
			}
		}
	}
	if len(s.Programs) > 0 {
		p(0, "programs:")
		for _, pr := range s.Programs {
			p(1, "- ranks: %s", pr.Ranks)
			p(2, "streams: %s", names(pr.Streams))
			if len(pr.Events) > 0 {
				p(2, "events: %s", names(pr.Events))
			}
			if len(pr.Ops) == 0 {
				p(2, "ops: []")
				continue
			}
			p(2, "ops:")
			for _, op := range pr.Ops {
				if op.Capture != nil {
					writeCapture(p, op)
					continue
				}
				r := op.Repeat
				if r == nil {
					p(3, "- %s", opLine(op))
					continue
				}
				count := strconv.Itoa(r.Count)
				if r.CountKnob != "" {
					count = r.CountKnob
				}
				p(3, "- repeat: {count: %s, as: %s}", count, quote(r.As))
				if len(op.When) > 0 {
					p(4, "when: %s", whenLine(op.When))
				}
				if len(r.Ops) == 0 {
					p(4, "ops: []")
					continue
				}
				p(4, "ops:")
				for _, in := range r.Ops {
					p(5, "- %s", opLine(in))
				}
			}
		}
	}
	p(0, "variants:")
	for vi, v := range s.Variants {
		p(1, "- name: %s", quote(v.Name))
		if v.Expect != "" {
			p(2, "expect: %s", quote(v.Expect))
		}
		if v.Doc != "" {
			writeText(&b, 2, "doc", v.Doc)
		}
		var sets []string
		for _, kv := range v.Sets {
			if !strings.HasPrefix(kv, "patch=") {
				sets = append(sets, kv)
			}
		}
		if len(sets) > 0 {
			p(2, "set:")
			for _, kv := range sets {
				k, val, _ := strings.Cut(kv, "=")
				p(3, "%s: %s", k, knobVal(val))
			}
		}
		if vi < len(s.patches) && len(s.patches[vi]) > 0 {
			p(2, "patch:")
			for _, st := range s.patches[vi] {
				p(3, "- %s", patchLine(st))
			}
		}
	}
	if len(s.Compare) > 0 {
		p(0, "compare:")
		for _, c := range s.Compare {
			p(1, "- variant: %s", quote(c.Variant))
			p(2, "against: %s", quote(c.Against))
			if c.Label != "" {
				p(2, "label: %s", quote(c.Label))
			}
		}
	}
	return []byte(b.String())
}

// patchLine writes one step of a variant's patch as a flow mapping.
func patchLine(st PatchSpec) string {
	var parts []string
	switch st.Verb {
	case "add":
		parts = append(parts, "add: "+opLine(*st.Op))
	case "replace":
		parts = append(parts, "replace: "+quote(st.Ref), "with: "+opLine(*st.Op))
	case "remove", "move":
		parts = append(parts, st.Verb+": "+quote(st.Ref))
	case "ranks":
		parts = append(parts, "ranks: "+st.Ranks.String())
	case "resize":
		parts = append(parts, "resize: "+quote(st.Ref), fmt.Sprintf("bytes: %d", st.Bytes))
	}
	if st.Anchor != "" {
		parts = append(parts, anchorKey(&st)+": "+quote(st.Anchor))
	}
	if st.Program >= 0 {
		parts = append(parts, fmt.Sprintf("program: %d", st.Program))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func opLine(op OpSpec) string {
	parts := []string{fmt.Sprintf("%s: %s", op.Kind, quote(op.Name))}
	if op.ID != "" {
		parts = append(parts, "id: "+quote(op.ID))
	}
	if op.Stream != "" && op.Kind != OpSync {
		parts = append(parts, "stream: "+quote(op.Stream))
	}
	switch op.Kind {
	case OpKernel:
		if len(op.Reads) > 0 {
			parts = append(parts, "reads: "+names(op.Reads))
		}
		parts = append(parts, "writes: "+names(op.Writes))
		parts = append(parts, timePart(op)...)
		if op.Weight != 0 {
			parts = append(parts, fmt.Sprintf("weight: %d", op.Weight))
		}
		if len(op.Weights) > 0 {
			ws := make([]string, len(op.Weights))
			for i, w := range op.Weights {
				ws[i] = strconv.FormatInt(w, 10)
			}
			parts = append(parts, "weight: ["+strings.Join(ws, ", ")+"]")
		}
		if op.Whole {
			parts = append(parts, "weight: whole")
		}
		if op.Sum {
			parts = append(parts, "sum: true")
		}
		if op.Scale != "" {
			parts = append(parts, "scale: "+quote(op.Scale))
		}
		if op.Launch != "" {
			parts = append(parts, "launch: "+op.Launch)
		}
		if op.Blocks != 0 {
			parts = append(parts, fmt.Sprintf("blocks: %d", op.Blocks))
		}
		if op.Spin {
			parts = append(parts, "spin: true")
		}
	case OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll, OpBroadcast:
		parts = append(parts, "comm: "+quote(op.Comm), "in: "+quote(op.In), "out: "+quote(op.Out))
		if op.Strategy != "" {
			parts = append(parts, "strategy: "+quote(op.Strategy))
		}
		if op.Blocks != 0 {
			parts = append(parts, fmt.Sprintf("blocks: %d", op.Blocks))
		}
		if op.Symmetric != "" {
			parts = append(parts, "symmetric: "+quote(op.Symmetric))
			if op.Offset != 0 {
				parts = append(parts, fmt.Sprintf("offset: %d", op.Offset))
			}
		}
		if op.Kind == OpBroadcast && op.Root != 0 {
			parts = append(parts, fmt.Sprintf("root: %d", op.Root))
		}
	case OpAlloc:
		if len(op.Values) > 0 {
			parts = append(parts, "init: "+uints(op.Values))
		}
	case OpFill:
		parts = append(parts, "values: "+uints(op.Values))
		parts = append(parts, timePart(op)...)
	case OpAdvance, OpIncrement:
		if op.By != 1 {
			parts = append(parts, fmt.Sprintf("by: %d", op.By))
		}
		parts = append(parts, timePart(op)...)
	case OpSend:
		parts = append(parts, "comm: "+quote(op.Comm), "in: "+quote(op.In), "peer: "+knobVal(op.Peer))
	case OpRecv:
		parts = append(parts, "comm: "+quote(op.Comm), "out: "+quote(op.Out), "peer: "+knobVal(op.Peer))
	case OpPut, OpAwait, OpReset:
		parts = append(parts, flagParts(op)...)
	}
	if op.HostNs != 0 {
		parts = append(parts, fmt.Sprintf("host: %dns", op.HostNs))
	}
	if len(op.When) > 0 {
		parts = append(parts, "when: "+whenLine(op.When))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// writeText writes a multi-line string as a literal block (|-) where that is
// exact, otherwise as a quoted string.
func writeText(b *strings.Builder, indent int, key, text string) {
	pad := strings.Repeat("  ", indent)
	literalOK := !strings.HasPrefix(text, " ") && !strings.HasSuffix(text, "\n") && !strings.ContainsAny(text, "\r\t")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasSuffix(line, " ") {
			literalOK = false
		}
	}
	if !literalOK || !strings.Contains(text, "\n") {
		fmt.Fprintf(b, "%s%s: %s\n", pad, key, quote(text))
		return
	}
	fmt.Fprintf(b, "%s%s: |-\n", pad, key)
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			b.WriteString("\n")
			continue
		}
		fmt.Fprintf(b, "%s  %s\n", pad, line)
	}
}

// quote writes a YAML scalar: plain when it is unambiguously a string or a
// number the knob expects, double-quoted otherwise.
func quote(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '/') {
			plain = false
			break
		}
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n":
		plain = false
	}
	if plain && (s[0] == '-' || s[0] == '.' || s[0] >= '0' && s[0] <= '9') {
		plain = false
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}

func names(ns []string) string {
	q := make([]string, len(ns))
	for i, n := range ns {
		q[i] = quote(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func uints(vs []uint64) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.FormatUint(v, 10)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// knobVal writes a knob value: a plain integer, or a string as quote does.
func knobVal(s string) string {
	if _, err := strconv.ParseUint(s, 10, 64); err == nil && (s == "0" || s[0] != '0') {
		return s
	}
	return quote(s)
}

// whenLine writes an op's conditions as a flow mapping.
func whenLine(when []Cond) string {
	conds := make([]string, len(when))
	for i, c := range when {
		conds[i] = c.Key + ": " + knobVal(c.Value)
	}
	return "{" + strings.Join(conds, ", ") + "}"
}
