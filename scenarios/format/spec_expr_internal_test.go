package format

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
)

// TestExpr: sizes and times as functions of the knobs (spec_expr.go).
func TestExpr(t *testing.T) {
	cfg := DefaultConfig() // tokens 8, hidden 8192
	require.NoError(t, cfg.Set("routed_dtype", "fp32"))
	hw, err := cfg.Profile()
	require.NoError(t, err)
	params := []ParamSpec{{Name: "width", Values: []string{"narrow", "wide"}, Sizes: map[string]int64{"narrow": 2, "wide": 4}}}
	cfg.Params = "width=wide"
	tests := []struct {
		src  string
		want int64
		err  string
	}{
		{"tokens*hidden*2", 8 * 8192 * 2, ""},
		{"tokens * (hidden + 2)", 8 * 8194, ""},
		{"7/2", 3, ""},
		{"10-3-2", 5, ""},
		{"2*3+4*5", 26, ""},
		{"tokens*hidden*routed_dtype", 8 * 8192 * 4, ""}, // a dtype value stands for its size
		{"tokens*width", 8 * 4, ""},                      // a param's sizes
		{"gemm(tokens, hidden, hidden)", int64(hw.GEMMTime(8, 8192, 8192)), ""},
		{"2*gemm(tokens, hidden, hidden/8)", 2 * int64(hw.GEMMTime(8, 8192, 1024)), ""},
		{"mem(1000)", int64(hw.KStart + ranks.Bytes(1000, hw.HBM)), ""},
		{"1/0", 0, "division by zero"},
		{"tokens-100", 0, "out of range"},
		{"mode*2", 0, "neither an integer nor a dtype"},
		{"1099511627776*2", 0, "out of range"},
	}
	for _, tt := range tests {
		e, _, err := ParseExpr(tt.src)
		require.NoError(t, err, tt.src)
		got, err := e.eval(exprEnv{cfg: &cfg, params: params, hw: &hw})
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.src)
			continue
		}
		require.NoError(t, err, tt.src)
		require.Equal(t, tt.want, got, tt.src)
	}
	for _, bad := range []struct {
		src string
		at  int
		err string
	}{
		{"tokens*", 7, "expected a number"},
		{"(1+2", 4, "expected )"},
		{"gemm(1, 2)", 10, "takes 3 arguments"},
		{"foo(1)", 0, "unknown function"},
		{"1 2", 2, "unexpected"},
		{"3 $ 4", 2, "unexpected"},
		{"((((((((((((((((((1))))))))))))))))))", 17, "nested more than"},
	} {
		_, at, err := ParseExpr(bad.src)
		require.ErrorContains(t, err, bad.err, bad.src)
		require.Equal(t, bad.at, at, bad.src)
	}
}

// FuzzExpr: no text panics the expression parser or its evaluation, and
// an error offset lies within the text.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{"tokens*hidden*2", "2*gemm(tokens, hidden, hidden/8)", "mem(3*tokens*hidden*2)", "(1+2", "1/0", "tokens*routed_dtype", "gemm(1,2)", "a(", ")"} {
		f.Add(s)
	}
	cfg := DefaultConfig()
	hw, _ := cfg.Profile()
	f.Fuzz(func(t *testing.T, s string) {
		e, at, err := ParseExpr(s)
		if err != nil {
			require.LessOrEqual(t, at, len(s)+1)
			return
		}
		v, err := e.eval(exprEnv{cfg: &cfg, hw: &hw})
		if err == nil {
			require.GreaterOrEqual(t, v, int64(0))
		}
	})
}
