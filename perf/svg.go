package perf

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// Plot is a log–log chart of measured points against a parameter, with the
// least-squares line through them and, when RefSlope is set, a reference
// line of that slope through the first point (the growth of the work
// itself: tp² steps for the TP sweep, layers for the layers sweep).
type Plot struct {
	Title  string
	XLabel string
	YLabel string
	X, Y   []float64 // the points, X increasing, all > 0
	// RefSlope, when non-zero, draws y ∝ x^RefSlope through the first
	// point, labelled RefLabel.
	RefSlope float64
	RefLabel string
}

// Geometry of every chart, in SVG user units.
const (
	svgW, svgH             = 560, 360
	padL, padR, padT, padB = 70, 20, 40, 50
)

// SVG renders p as a standalone SVG document. It is a pure function of p:
// the same numbers give the same bytes (every coordinate is printed with a
// fixed precision), so a plot committed to docs/ changes only when a
// measurement does.
func SVG(p Plot) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", padL, esc(p.Title))
	n := min(len(p.X), len(p.Y))
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no points</text>`+"\n</svg>\n", padL, svgH/2)
		return b.Bytes()
	}
	lx, ly := logs(p.X[:n]), logs(p.Y[:n])
	slope := fitSlope(lx, ly)
	icpt := mean(ly) - slope*mean(lx)
	// Axis ranges: whole decades (y) and the points' own span (x), so the
	// lines have room.
	x0, x1 := lx[0], lx[n-1]
	if x1 <= x0 {
		x0, x1 = x0-1, x0+1
	}
	ylo, yhi := minOf(ly), maxOf(ly)
	for _, lxv := range []float64{x0, x1} {
		ylo, yhi = math.Min(ylo, icpt+slope*lxv), math.Max(yhi, icpt+slope*lxv)
		if p.RefSlope != 0 {
			r := ly[0] + p.RefSlope*(lxv-lx[0])
			ylo, yhi = math.Min(ylo, r), math.Max(yhi, r)
		}
	}
	y0, y1 := math.Floor(ylo/math.Ln10)*math.Ln10, math.Ceil(yhi/math.Ln10)*math.Ln10
	if y1 <= y0 {
		y1 = y0 + math.Ln10
	}
	pw, ph := float64(svgW-padL-padR), float64(svgH-padT-padB)
	sx := func(l float64) float64 { return float64(padL) + (l-x0)/(x1-x0)*pw }
	sy := func(l float64) float64 { return float64(padT) + (y1-l)/(y1-y0)*ph }
	// Frame, grid and ticks: one per point on x, one per decade on y.
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#444"/>`+"\n", padL, padT, pw, ph)
	for i := range n {
		x := sx(lx[i])
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, padT, x, float64(padT)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, float64(padT)+ph+16, num(p.X[i]))
	}
	for e := math.Round(y0 / math.Ln10); e <= math.Round(y1/math.Ln10); e++ {
		y := sy(e * math.Ln10)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", padL, y, float64(padL)+pw, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, num(math.Pow(10, e)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(padL)+pw/2, svgH-12, esc(p.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", float64(padT)+ph/2, float64(padT)+ph/2, esc(p.YLabel))
	// The reference slope, the fit, the points.
	if p.RefSlope != 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="5 4"/>`+"\n",
			sx(x0), sy(ly[0]+p.RefSlope*(x0-lx[0])), sx(x1), sy(ly[0]+p.RefSlope*(x1-lx[0])))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c33"/>`+"\n", sx(x0), sy(icpt+slope*x0), sx(x1), sy(icpt+slope*x1))
	var pts []string
	for i := range n {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(lx[i]), sy(ly[i])))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#36c"/>`+"\n", strings.Join(pts, " "))
	for i := range n {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#36c"><title>%s: %s</title></circle>`+"\n", sx(lx[i]), sy(ly[i]), num(p.X[i]), num(p.Y[i]))
	}
	// Legend.
	lg := float64(padT) + 14
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#36c">● measured</text>`+"\n", padL+10, lg)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#c33">— fit: slope %.2f</text>`+"\n", padL+10, lg+16, slope)
	if p.RefSlope != 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#777">- - %s</text>`+"\n", padL+10, lg+32, esc(p.RefLabel))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func logs(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Log(math.Max(x, 1e-9))
	}
	return out
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = math.Max(m, x)
	}
	return m
}

// num prints a tick or point value briefly: 8, 1024, 0.01, 2.5e+03.
func num(x float64) string { return fmt.Sprintf("%.3g", x) }

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
