package report

import (
	"bufio"
	_ "embed"
	"html/template"
	"io"
)

//go:embed report.html.tmpl
var pageSource string

var page = template.Must(template.New("report").Parse(pageSource))

// WriteHTML writes d as one self-contained HTML page: inline CSS, JavaScript
// and SVG, no network access. The data is embedded as JSON (html/template
// escapes it for the script context) and drawn by the page's script: the
// variants side by side with verdicts and step times, then per variant the
// per-rank stream lanes over simulated time, collectives coloured by
// instance, the racing pair and mis-consumed signals highlighted, and the
// values that differ from the reference with their provenance.
func WriteHTML(w io.Writer, d *Data) error {
	bw := bufio.NewWriter(w)
	if err := page.Execute(bw, d); err != nil {
		return err
	}
	return bw.Flush()
}
