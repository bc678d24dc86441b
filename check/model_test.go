package check_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
)

func TestModelRun(t *testing.T) {
	m := &check.Model{Chunks: 2,
		Inputs: []check.ModelInput{{Name: "x", Init: func(c int) uint64 { return uint64(c + 1) }}},
		Ops: []check.ModelOp{
			{Name: "up", Kind: "linear", Inputs: []string{"x"}, Output: "h", Weight: 3},
			{Name: "skip", Kind: "add", Inputs: []string{"h", "x"}, Output: "y"},
		},
		Outputs: []string{"y"},
	}
	_, ts, err := m.Run()
	require.NoError(t, err)
	require.Equal(t, uint64(4), ts["y"].Vals[0].N) // 3·1 + 1
	require.Equal(t, uint64(8), ts["y"].Vals[1].N) // 3·2 + 2
	require.Equal(t, "up", m.Producer("h"))

	bad := []struct {
		name string
		edit func(m *check.Model)
		want string
	}{
		{"unknown kind", func(m *check.Model) { m.Ops[0].Kind = "conv" }, "unknown kind"},
		{"read before produced", func(m *check.Model) { m.Ops[0].Inputs = []string{"z"} }, "before it is produced"},
		{"output never produced", func(m *check.Model) { m.Outputs = []string{"q"} }, "never produced"},
		{"written twice", func(m *check.Model) { m.Ops[1].Output = "h" }, "already exists"},
		{"no chunks", func(m *check.Model) { m.Chunks = 0 }, "chunks"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			c := *m
			c.Ops = append([]check.ModelOp(nil), m.Ops...)
			tt.edit(&c)
			_, _, err := c.Run()
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func ExampleModel() {
	m := &check.Model{Chunks: 1,
		Inputs:  []check.ModelInput{{Name: "x", Init: func(int) uint64 { return 5 }}},
		Ops:     []check.ModelOp{{Name: "shared", Kind: "linear", Inputs: []string{"x"}, Output: "y", Weight: 7}},
		Outputs: []string{"y"},
	}
	_, ts, _ := m.Run()
	fmt.Println(ts["y"].Vals[0].N)
	// Output: 35
}
