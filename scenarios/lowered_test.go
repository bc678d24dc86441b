package scenarios_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// notLowered are the built-ins whose form has no programs file: the
// Torch-TensorRT engine builds fuse ops into one launch per engine.
var notLowered = map[string]bool{"moe-ep-dropped-allreduce": true, "trt-fused-collective": true}

// lowerBuiltin writes a built-in's lowered file and loads it back.
func lowerBuiltin(t *testing.T, name string) (*scenarios.Scenario, *scenarios.Scenario, []byte) {
	t.Helper()
	sc, ok := scenarios.Lookup(name)
	require.True(t, ok)
	spec, err := scenarios.Lowered(sc)
	require.NoError(t, err)
	data := scenarios.MarshalSpec(spec)
	low, err := scenarios.Load(name+"-lowered.yaml", data)
	require.NoError(t, err, "%s", data)
	require.Len(t, low.Variants, len(sc.Variants))
	return sc, low, data
}

// programText writes every rank's host program of a built world: each
// op's kind, stream, event and kernel, each kernel micro-op's kind,
// duration, destination, sources with their weights and load, and every
// buffer in allocation order. Two worlds with the same text run the same
// program (timeline labels aside).
func programText(w *ranks.World) string {
	var b strings.Builder
	for _, x := range w.Buffers() {
		fmt.Fprintf(&b, "buffer %s rank %d %d bytes %d chunks\n", x.Name, x.Rank, x.Bytes, x.Chunks())
	}
	for r := range w.N {
		p := w.Program(r)
		fmt.Fprintf(&b, "rank %d streams %v events %v\n", r, p.Streams, p.Events)
		for _, op := range p.Ops {
			fmt.Fprintf(&b, "  op %d stream %d event %d host %d", op.Kind, op.Stream, op.Event, op.Host)
			if k := op.Kernel; k != nil {
				// a label, but for the launch's cost: gemm and moe both cost
				// a GEMM's (ranks/hw.go); a moe op of its own time is one
				// kernel with a GEMM's cost and SM use
				kind := k.Kind
				switch {
				case kind == "add":
					kind = "kernel"
				case kind == "moe" && len(k.Instrs) == 1:
					kind = "gemm"
				}
				fmt.Fprintf(&b, " kernel %s kind %s coll %q order %q blocks %d spins %v", k.Name, kind, k.Coll, k.OrderKey, k.Blocks, k.Spins)
				for i, in := range k.Expand() {
					fmt.Fprintf(&b, "\n    instr %d dur %d n %d fresh %v", in.Op, in.Dur, in.N, in.Fresh)
					if in.Dst != nil {
						fmt.Fprintf(&b, " dst %s@%d", in.Dst.Name, in.DstLo)
					}
					for _, s := range in.Srcs {
						fmt.Fprintf(&b, " src %s@%d×%d", s.Buf.Name, s.Lo, s.Coef)
					}
					if i < len(k.Loads) {
						fmt.Fprintf(&b, " load %+v", k.Loads[i])
					}
				}
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestLoweredBuildsTheSameProgram: for every built-in, every variant's
// world built from `show --yaml --lowered` runs the host program the
// built-in's does, op by op and micro-op by micro-op, over the same
// buffers, and compares the same tensors. Lowering that drops, adds or
// reorders an op, or changes a time, weight or stream, fails it.
func TestLoweredBuildsTheSameProgram(t *testing.T) {
	for _, name := range scenarios.Names() {
		t.Run(name, func(t *testing.T) {
			if notLowered[name] {
				sc, _ := scenarios.Lookup(name)
				_, err := scenarios.Lowered(sc)
				require.True(t, errors.Is(err, scenarios.ErrNotExpressible), "%v", err)
				return
			}
			sc, low, _ := lowerBuiltin(t, name)
			for i, v := range sc.Variants {
				cfg, err := sc.VariantConfig(v, nil)
				require.NoError(t, err)
				lcfg, err := low.VariantConfig(low.Variants[i], nil)
				require.NoError(t, err)
				want, err := sc.Build(cfg, check.BuildOptions{}, sim.NewEngine(sim.Timed, nil))
				require.NoError(t, err)
				got, err := low.Build(lcfg, check.BuildOptions{}, sim.NewEngine(sim.Timed, nil))
				require.NoError(t, err)
				require.Equal(t, programText(want.World), programText(got.World), "variant %s", v.Name)
				require.Equal(t, len(want.Compare), len(got.Compare))
				for r := range want.Compare {
					require.Equal(t, names(want.Compare[r]), names(got.Compare[r]), "variant %s rank %d compares", v.Name, r)
				}
			}
		})
	}
}

func names(bs []*ranks.Buffer) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

// TestLoweredRunsTheSame: the lowered flagship gives the built-in's verdict
// and trace hash on every variant, nominal and explored schedules alike
// (the CLI's round trip covers every built-in: cmd/simctl).
func TestLoweredRunsTheSame(t *testing.T) {
	sc, low, _ := lowerBuiltin(t, "tp8-shared-expert")
	for i, v := range sc.Variants {
		opt := check.Options{Extra: []string{"budget=2"}}
		want, err := check.RunVariant(sc, v, opt)
		require.NoError(t, err)
		got, err := check.RunVariant(low, low.Variants[i], opt)
		require.NoError(t, err)
		require.Equal(t, want.Verdict, got.Verdict, v.Name)
		require.Equal(t, want.TraceHash, got.TraceHash, v.Name)
		require.Equal(t, want.WitnessHash, got.WitnessHash, v.Name)
		require.Equal(t, want.RootCause, got.RootCause, v.Name)
	}
}

// TestLoweredFlagshipIsEditable: the lowered flagship states every op, and
// an edit of one op reaches the run: moving the buggy variant's shared
// all-reduces to main behind a join (PR #14917's fix, by hand) makes it ok.
func TestLoweredFlagshipIsEditable(t *testing.T) {
	_, _, data := lowerBuiltin(t, "tp8-shared-expert")
	text := string(data)
	for _, op := range []string{"kernel: L0.gate", "kernel: L0.sh_up", "kernel: L0.sh_down", "allreduce: L0.shared_ar", "kernel: L0.moe",
		"allreduce: L0.routed_ar", "kernel: L0.merge", "record: main_event", "wait: aux_event", "allreduce: L1.routed_ar"} {
		require.Contains(t, text, op)
	}
	for _, l := range []string{"L0", "L1"} {
		old := fmt.Sprintf("      - {allreduce: %s.shared_ar, stream: aux, comm: tp, in: %s.sh_y, out: %s.sh_out}\n      - {record: aux_event, id: record.aux_event.before.%s.moe, stream: aux}\n",
			l, l, l, l)
		require.Contains(t, text, old)
		text = strings.Replace(text, old, fmt.Sprintf("      - {record: aux_event, id: record.aux_event.before.%s.moe, stream: aux}\n      - {wait: aux_event, id: join.%s, stream: main}\n      - {allreduce: %s.shared_ar, stream: main, comm: tp, in: %s.sh_y, out: %s.sh_out}\n",
			l, l, l, l, l), 1)
	}
	text = text[:strings.Index(text, "  - name: fixed\n")] // the buggy variant alone
	low, err := scenarios.Load("edited.yaml", []byte(text))
	require.NoError(t, err)
	rep, err := check.RunVariant(low, low.Variants[0], check.Options{Extra: []string{"budget=4"}})
	require.NoError(t, err)
	require.Equal(t, check.OK, rep.Verdict)
}
