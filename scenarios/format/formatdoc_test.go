package format

import (
	"os"
	"strings"
	"testing"

	"github.com/collsim/collsim/scenarios/knobs"
	"github.com/stretchr/testify/require"
)

// docKnobRows maps the first cell of a table row of docs/scenario-format.md
// to the knob whose values that row must list: the top-level keys that are
// knobs under another name (hardware is the arch knob) and every enumerated
// knob of the Knobs table.
func docKnobRows() map[string]string {
	rows := map[string]string{}
	for top, knob := range topKnob {
		rows[top] = knob
	}
	for _, k := range knobs.Enums() {
		if _, ok := rows[k]; !ok {
			rows[k] = k
		}
	}
	return rows
}

// TestFormatDocListsEveryValue keeps docs/scenario-format.md's lists of
// accepted values equal to the parser's: every value an enumerated knob
// accepts (strategies, hardware, …) is named, in backquotes, on the row of
// the table that documents it, and the rows for strategy and hardware
// exist. A value added to a knob table (package knobs: config.go, family.go, …) without
// its line in the doc fails here.
func TestFormatDocListsEveryValue(t *testing.T) {
	data, err := os.ReadFile("../../docs/scenario-format.md")
	require.NoError(t, err)
	rows := docKnobRows()
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Trim(strings.TrimSpace(strings.Split(line, "|")[1]), "`")
		knob, ok := rows[cell]
		if !ok {
			continue
		}
		seen[cell] = true
		for _, v := range knobs.Values(knob) {
			require.Contains(t, line, "`"+v+"`", "docs/scenario-format.md: the %q row does not list %q, which the %s knob accepts", cell, v, knob)
		}
	}
	for _, must := range []string{"strategy", "hardware", "mode", "workspace", "placement"} {
		require.True(t, seen[must], "docs/scenario-format.md has a table row for %q", must)
	}
}
