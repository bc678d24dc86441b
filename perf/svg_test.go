package perf

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.svg")

// TestSVGGolden pins the bytes of a plot of fixed numbers: the plots in
// docs/ change only when a measurement does.
func TestSVGGolden(t *testing.T) {
	rows := []Row{
		{Name: "tp-sweep-exponent", Points: []Point{{8, 0.0006, 30}, {16, 0.0014, 31}, {32, 0.0074, 33}, {64, 0.038, 40}, {128, 0.26, 70}, {256, 1.68, 190}}},
		{Name: "layers-sweep-exponent", Points: []Point{{4, 0.058, 40}, {8, 0.11, 41}, {16, 0.21, 43}, {32, 0.42, 45}}},
		{Name: "ring512-ms"},
	}
	files := Plots(rows)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		path := filepath.Join("testdata", f.Name)
		if *update {
			require.NoError(t, os.WriteFile(path, f.Data, 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "go test ./perf -run SVGGolden -update")
		require.Equal(t, string(want), string(f.Data), f.Name)
		// well-formed XML
		d := xml.NewDecoder(bytes.NewReader(f.Data))
		for {
			if _, err := d.Token(); err != nil {
				require.ErrorContains(t, err, "EOF", f.Name)
				break
			}
		}
	}
	require.Equal(t, []string{"tp-sweep.svg", "layers-sweep.svg", "layers-peak.svg"}, names)
	require.Equal(t, files, Plots(rows), "same numbers, same bytes")
}

// TestSVGSlope checks the legend's fitted slope: points on y = x² read 2.00.
func TestSVGSlope(t *testing.T) {
	s := string(SVG(Plot{Title: "a<b", X: []float64{2, 4, 8}, Y: []float64{4, 16, 64}, RefSlope: 1, RefLabel: "one"}))
	require.Contains(t, s, "fit: slope 2.00")
	require.Contains(t, s, "a&lt;b")
	require.Equal(t, 3, strings.Count(s, "<circle"))
	require.Contains(t, string(SVG(Plot{Title: "none"})), "no points")
}
