package analysis

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/idletrace/idletrace/pkg/model"
)

// The HTML report is one self-contained file: inline CSS and hand-written
// inline SVG, no script, no external resource of any kind (the SVG elements
// carry no xmlns: HTML5 does not need it). Output depends only on the
// report, so the same inputs give byte-identical files.

var policyColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// stateColors go from warm (shallow, polling) to cool (deep).
var stateColors = []string{"#f4a261", "#e9c46a", "#8ab17d", "#2a9d8f", "#287271", "#264653", "#6d597a", "#b56576", "#e56b6f", "#adb5bd"}

func color(list []string, i int) string { return list[i%len(list)] }

const htmlStyle = `body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;max-width:1180px;margin:1.5em auto;padding:0 1em;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em;font-variant-numeric:tabular-nums}
th,td{padding:.25em .6em;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}
th{background:#f5f5f5;white-space:normal;vertical-align:bottom}td.l,th.l{text-align:left}
.wide{overflow-x:auto;max-width:100%}.meta{color:#555;font-size:.9em}.caption{color:#555;font-size:.85em;max-width:900px}
p,li{overflow-wrap:anywhere}
svg{display:block;margin:.5em 0;max-width:100%;height:auto}svg text{font-family:system-ui,sans-serif;font-size:12px;fill:#333}
`

func esc(s string) string { return html.EscapeString(s) }

// htmlCommand writes the command line that made the report, if known.
func htmlCommand(w io.Writer, argv []string) {
	if len(argv) > 0 {
		fmt.Fprintf(w, "<p class=\"meta\">Made by <code>%s</code></p>\n", esc(CommandLine(argv)))
	}
}

// htmlEnd writes a report's notes and model assumptions, closes the page
// and flushes it: the end of every HTML report.
func htmlEnd(w *bufio.Writer, notes []string, assumptions string) error {
	if len(notes) > 0 {
		fmt.Fprintf(w, "<h2>Notes</h2>\n<ul>\n")
		for _, n := range notes {
			fmt.Fprintf(w, "<li>%s</li>\n", esc(n))
		}
		fmt.Fprintf(w, "</ul>\n")
	}
	if assumptions != "" {
		fmt.Fprintf(w, "<h2>Model assumptions</h2>\n<p>%s</p>\n", esc(assumptions))
	}
	fmt.Fprintf(w, "</body>\n</html>\n")
	return w.Flush()
}

func fnum(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func renderWhatifHTML(out io.Writer, rep *WhatifReport) error {
	w := bufio.NewWriter(out)
	title := "idletrace whatif"
	if rep.Trace != "" {
		title += ": " + rep.Trace
	}
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", esc(title), htmlStyle)
	fmt.Fprintf(w, "<h1>idletrace whatif</h1>\n")
	if rep.Trace != "" {
		fmt.Fprintf(w, "<p class=\"meta\">Trace <code>%s</code>: %d idle periods replayed.</p>\n", esc(rep.Trace), periodsOf(rep))
	}
	htmlCommand(w, rep.Command)

	// Profile.
	fmt.Fprintf(w, "<h2>Profile</h2>\n")
	if p := rep.Profile; p != nil {
		fmt.Fprintf(w, "<p class=\"meta\"><b>%s</b>, HZ %s. %s</p>\n", esc(p.Name), esc(hzString(p.HZ)), esc(p.Source))
		fmt.Fprintf(w, "<table>\n<tr><th class=\"l\">State</th><th>Exit latency µs</th><th>Target residency µs</th><th>Power</th><th class=\"l\">Flags</th></tr>\n")
		for _, s := range p.States {
			flags := stateFlags(s, true)
			fmt.Fprintf(w, "<tr><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">%s</td></tr>\n",
				esc(s.Name), FormatUs(s.ExitLatencyNs), FormatUs(s.TargetResidencyNs), energy(s.Power), esc(strings.Join(flags, ", ")))
		}
		fmt.Fprintf(w, "</table>\n")
	} else {
		fmt.Fprintf(w, "<p>No profile.</p>\n")
	}

	// Results table.
	fmt.Fprintf(w, "<h2>Results</h2>\n")
	if len(rep.Results) == 0 {
		fmt.Fprintf(w, "<p>No policy was replayed.</p>\n")
	} else {
		costHeader, costRows, shareHeader, shareRows := whatifTables(rep)
		htmlTable(w, costHeader, costRows, true)
		if cl := changeLines(rep.Results); len(cl) > 0 {
			fmt.Fprintf(w, "<ul class=\"changes\">\n")
			for _, l := range cl {
				fmt.Fprintf(w, "<li>%s</li>\n", esc(l))
			}
			fmt.Fprintf(w, "</ul>\n<p class=\"caption\">%s</p>\n", esc(changesCaption))
		}
		fmt.Fprintf(w, "<p class=\"caption\">%s</p>\n", esc(costCaption))
		fmt.Fprintf(w, "<h3>Share of idle time per state</h3>\n")
		htmlTable(w, shareHeader, shareRows, true)
		caption := shareCaption
		if slices.Contains(shareHeader, "Woke polling") {
			caption += " " + pollCaption
		}
		fmt.Fprintf(w, "<p class=\"caption\">%s</p>\n", esc(caption))
	}

	// Plots.
	fmt.Fprintf(w, "<h2>Wake-up latency</h2>\n")
	writeTail(w, rep, wakeDist,
		"Share of wake-ups that pay more than each exit latency, per policy (log–log: the tail is at the bottom right; 0 has its own column at the left).")
	fmt.Fprintf(w, "<h2>IO completion latency</h2>\n")
	writeTail(w, rep, ioDist,
		"Share of block IO completions whose issue → completion latency exceeds each value, per policy (log–log).")
	fmt.Fprintf(w, "<h2>Time share per state</h2>\n")
	writeShares(w, rep)

	return htmlEnd(w, rep.Notes, rep.Assumptions)
}

// nsLabel labels a decade tick.
func nsLabel(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%g s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%g ms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%g µs", v/1e3)
	}
	return fmt.Sprintf("%g ns", v)
}

// The latency plots show the tail: the share of samples above each
// latency (complementary CDF) on log–log axes, one line per policy. Where
// lines coincide (policies that pay the same latencies) each must still
// show: they are drawn widest first, so each shows as a band of its own
// colour around the next, each with its own dash pattern and marker shape,
// with markers at p50, p90, p99, p99.9 and the maximum.
const (
	distW, distH                       = 900, 400
	distL, distR, distT, distB         = 70, 230, 16, 48
	distPlotW, distPlotH       float64 = distW - distL - distR, distH - distT - distB
	distZeroW                  float64 = 44 // the column for latency 0, left of the log axis
	legendRowH                         = 22
)

// seriesDash is each policy's dash pattern, by its index.
var seriesDash = []string{"", "9 4", "2 3", "12 4 2 4", "5 5", "1 5", "14 3 3 3 3 3", "7 2 2 2"}

// seriesWidths are the stroke widths of n lines, widest first.
func seriesWidths(n int) []float64 {
	step := 1.2
	if n > 1 {
		step = math.Min(step, 8/float64(n-1))
	}
	ws := make([]float64, n)
	for k := range ws {
		ws[k] = 1.6 + step*float64(n-1-k)
	}
	return ws
}

// marker draws series k's marker shape (circle, square, triangle, diamond,
// inverted triangle, cross) of half-size r at x, y.
func marker(w io.Writer, k int, x, y, r float64, fill, policy, title string) {
	attrs := fmt.Sprintf(`class="marker" data-policy="%s" fill="%s" stroke="#fff" stroke-width="0.8"`, esc(policy), fill)
	t := "<title>" + esc(title) + "</title>"
	pt := func(dx, dy float64) string { return fnum(x+dx) + "," + fnum(y+dy) }
	switch k % 6 {
	case 0:
		fmt.Fprintf(w, "<circle %s cx=\"%s\" cy=\"%s\" r=\"%s\">%s</circle>\n", attrs, fnum(x), fnum(y), fnum(r), t)
	case 1:
		fmt.Fprintf(w, "<rect %s x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\">%s</rect>\n", attrs, fnum(x-r*0.9), fnum(y-r*0.9), fnum(1.8*r), fnum(1.8*r), t)
	case 2:
		fmt.Fprintf(w, "<polygon %s points=\"%s %s %s\">%s</polygon>\n", attrs, pt(0, -1.2*r), pt(1.1*r, 0.8*r), pt(-1.1*r, 0.8*r), t)
	case 3:
		fmt.Fprintf(w, "<polygon %s points=\"%s %s %s %s\">%s</polygon>\n", attrs, pt(0, -1.25*r), pt(1.25*r, 0), pt(0, 1.25*r), pt(-1.25*r, 0), t)
	case 4:
		fmt.Fprintf(w, "<polygon %s points=\"%s %s %s\">%s</polygon>\n", attrs, pt(0, 1.2*r), pt(1.1*r, -0.8*r), pt(-1.1*r, -0.8*r), t)
	default:
		a, b := 1.2*r, 0.4*r
		fmt.Fprintf(w, "<polygon %s points=\"%s %s %s %s %s %s %s %s %s %s %s %s\">%s</polygon>\n", attrs,
			pt(-b, -a), pt(b, -a), pt(b, -b), pt(a, -b), pt(a, b), pt(b, b), pt(b, a), pt(-b, a), pt(-b, b), pt(-a, b), pt(-a, -b), pt(-b, -b), t)
	}
}

// tailPercentiles are the percentiles marked on the plots and listed in
// their tables.
var tailPercentiles = []struct {
	q     float64
	label string
}{{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p99.9"}}

// cdfQuantile is the q-quantile of an empirical CDF by the nearest-rank
// rule: the smallest value whose cumulative share reaches q.
func cdfQuantile(pts []model.CDFPoint, q float64) uint64 {
	for _, p := range pts {
		if p.Fraction >= q-1e-12 {
			return p.ValueNs
		}
	}
	return pts[len(pts)-1].ValueNs
}

// percentiles are a distribution's p50, p90, p99, p99.9 and max: from its
// summary (what the other tables show), p90 from its CDF.
func percentiles(s *model.LatencySummary, pts []model.CDFPoint) [5]uint64 {
	return [5]uint64{s.P50, cdfQuantile(pts, 0.9), s.P99, s.P999, s.Max}
}

// distribution is one latency distribution of every result.
type distribution struct {
	id      string // "wake" or "io"
	what    string // what a sample is: "wake-ups"
	summary func(*model.Result) *model.LatencySummary
	cdf     func(*model.Result) []model.CDFPoint
}

var (
	wakeDist = distribution{"wake", "wake-ups",
		func(r *model.Result) *model.LatencySummary { return &r.WakeLatencyNs },
		func(r *model.Result) []model.CDFPoint { return r.WakeLatencyCDF }}
	ioDist = distribution{"io", "IO completions",
		func(r *model.Result) *model.LatencySummary { return r.IOLatencyNs },
		func(r *model.Result) []model.CDFPoint { return r.IOLatencyCDF }}
)

// writeTail draws the distribution's tail, one line per policy with data,
// and the table of its percentiles under it.
func writeTail(w *bufio.Writer, rep *WhatifReport, d distribution, caption string) {
	type series struct {
		idx   int
		name  string
		pts   []model.CDFPoint
		count uint64
		pct   [5]uint64
	}
	var ss []series
	minPos, maxV, maxN, zero := math.Inf(1), 0.0, uint64(0), false
	for i := range rep.Results {
		r := &rep.Results[i]
		p, s := d.cdf(r), d.summary(r)
		if len(p) == 0 || s == nil || s.Count == 0 {
			continue
		}
		ss = append(ss, series{i, r.Policy, p, s.Count, percentiles(s, p)})
		maxN = max(maxN, s.Count)
		for _, q := range p {
			v := float64(q.ValueNs)
			if v > 0 && v < minPos {
				minPos = v
			}
			zero = zero || q.ValueNs == 0
			maxV = max(maxV, v)
		}
	}
	if len(ss) == 0 {
		fmt.Fprintf(w, "<p>No data: %s</p>\n", esc(map[string]string{"wake": "no wake-up was replayed.", "io": "the trace has no block IO."}[d.id]))
		return
	}
	if math.IsInf(minPos, 1) { // every value is 0
		minPos, maxV = 1000, 1000
	}
	lo := math.Pow(10, math.Floor(math.Log10(minPos)))
	hi := math.Pow(10, math.Ceil(math.Log10(max(maxV, minPos))))
	if hi <= lo {
		hi = lo * 10
	}
	llo, lhi := math.Log10(lo), math.Log10(hi)
	x0 := float64(distL) // latency 0, or the log axis's start
	xl := x0             // the log axis's start
	if zero {
		xl += distZeroW
	}
	x := func(v float64) float64 {
		if v <= 0 {
			return x0
		}
		return xl + (math.Log10(max(v, lo))-llo)/(lhi-llo)*(distL+distPlotW-xl)
	}
	// y: the share of samples above, from 1 down to one sample in the
	// largest distribution (10^-3 to 10^-6); below it, the bottom edge.
	decades := math.Min(6, math.Max(3, math.Ceil(math.Log10(float64(maxN)))))
	floor := math.Pow(10, -decades)
	bottom := distT + distPlotH
	y := func(c float64) float64 {
		if c <= floor {
			return bottom
		}
		return distT + (-math.Log10(math.Min(c, 1)))/decades*distPlotH
	}
	height := max(distH, distT+len(ss)*legendRowH+10)
	fmt.Fprintf(w, "<svg id=\"cdf-%s\" class=\"dist\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n", d.id, distW, height, distW, height, esc(caption))
	// Grid and axes: latency decades (and 0) across, shares of samples
	// above down, percentile lines.
	right := fnum(distL + distPlotW)
	vline := func(xx string, stroke string) {
		fmt.Fprintf(w, "<line stroke=\"%s\" x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%s\"/>\n", stroke, xx, distT, xx, fnum(bottom))
	}
	xlabel := func(xx, s string) {
		fmt.Fprintf(w, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n", xx, fnum(bottom+16), esc(s))
	}
	if zero {
		vline(fnum(x0), "#dcdcdc")
		xlabel(fnum(x0), "0")
		fmt.Fprintf(w, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" style=\"fill:#999\">//</text>\n", fnum(x0+distZeroW/2), fnum(bottom+4))
	}
	for e := llo; e <= lhi+1e-9; e++ {
		v := math.Pow(10, e)
		vline(fnum(x(v)), "#dcdcdc")
		xlabel(fnum(x(v)), nsLabel(v))
		if e < lhi-1e-9 {
			for m := 2; m <= 9; m++ {
				vline(fnum(x(v*float64(m))), "#f0f0f0")
			}
		}
	}
	for e := 0.0; e <= decades; e++ {
		yy := fnum(y(math.Pow(10, -e)))
		fmt.Fprintf(w, "<line stroke=\"#dcdcdc\" x1=\"%d\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", distL, yy, right, yy)
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>\n", distL-6, fnum(y(math.Pow(10, -e))+4), strconv.FormatFloat(100*math.Pow(10, -e), 'f', -1, 64)+" %")
	}
	for _, q := range tailPercentiles {
		yy := fnum(y(1 - q.q))
		fmt.Fprintf(w, "<line stroke=\"#999\" stroke-dasharray=\"4 3\" x1=\"%d\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", distL, yy, right, yy)
		fmt.Fprintf(w, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\" style=\"fill:#777\">%s</text>\n", fnum(distL+distPlotW-4), fnum(y(1-q.q)-3), q.label)
	}
	fmt.Fprintf(w, "<line stroke=\"#888\" x1=\"%d\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", distL, fnum(bottom), right, fnum(bottom))
	fmt.Fprintf(w, "<line stroke=\"#888\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%s\"/>\n", distL, distT, distL, fnum(bottom))
	fmt.Fprintf(w, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">latency</text>\n", fnum(distL+distPlotW/2), distH-8)
	fmt.Fprintf(w, "<text transform=\"translate(14 %s) rotate(-90)\" text-anchor=\"middle\">share of %s above</text>\n", fnum(distT+distPlotH/2), esc(d.what))

	// Series: step paths (the share above each value), coalesced to 0.1 px,
	// widest first.
	widths := seriesWidths(len(ss))
	style := func(k int) string {
		s := fmt.Sprintf(`stroke="%s" stroke-width="%s"`, color(policyColors, ss[k].idx), fnum(widths[k]))
		if dash := seriesDash[ss[k].idx%len(seriesDash)]; dash != "" {
			s += fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		return s
	}
	for k, s := range ss {
		var b strings.Builder
		curX, curY := fnum(x0), fnum(y(1))
		fmt.Fprintf(&b, "M%s %s", curX, curY)
		for _, q := range s.pts {
			if px := fnum(x(float64(q.ValueNs))); px != curX {
				fmt.Fprintf(&b, "H%s", px)
				curX = px
			}
			if py := fnum(y(1 - q.Fraction)); py != curY {
				fmt.Fprintf(&b, "V%s", py)
				curY = py
			}
		}
		fmt.Fprintf(w, "<path class=\"series\" data-policy=\"%s\" d=\"%s\" fill=\"none\" %s><title>%s</title></path>\n", esc(s.name), b.String(), style(k), esc(s.name))
	}
	// Markers, widest line's largest: p50 … p99.9 on their lines, the
	// maximum on the bottom edge.
	for k, s := range ss {
		r := 3 + (widths[k]-widths[len(ss)-1])*0.5
		for j, q := range tailPercentiles {
			marker(w, s.idx, x(float64(s.pct[j])), y(1-q.q), r, color(policyColors, s.idx), s.name,
				fmt.Sprintf("%s %s: %s µs", s.name, q.label, FormatUs(s.pct[j])))
		}
		marker(w, s.idx, x(float64(s.pct[4])), bottom, r, color(policyColors, s.idx), s.name,
			fmt.Sprintf("%s max: %s µs", s.name, FormatUs(s.pct[4])))
	}
	// Legend.
	for k, s := range ss {
		ly := float64(distT + 10 + k*legendRowH)
		lx := float64(distL) + distPlotW + 14
		fmt.Fprintf(w, "<g class=\"legend\" data-policy=\"%s\"><title>%s</title>\n", esc(s.name), esc(s.name))
		fmt.Fprintf(w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" %s/>\n", fnum(lx), fnum(ly), fnum(lx+34), fnum(ly), style(k))
		marker(w, s.idx, lx+17, ly, 4, color(policyColors, s.idx), s.name, s.name)
		fmt.Fprintf(w, "<text x=\"%s\" y=\"%s\">%s</text>\n</g>\n", fnum(lx+42), fnum(ly+4), esc(truncate(s.name, 24)))
	}
	fmt.Fprintf(w, "</svg>\n<p class=\"caption\">%s Markers: p50, p90, p99 and p99.9 on their dashed lines, the maximum on the bottom edge. "+
		"Lines are drawn widest first, each with its own dash pattern, so where policies pay the same latencies each shows as a band around the next.</p>\n", esc(caption))

	// The percentiles as numbers, every policy.
	header := []string{"Policy", strings.ToUpper(d.what[:1]) + d.what[1:], "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs"}
	var rows [][]string
	k := 0
	for i := range rep.Results {
		row := []string{rep.Results[i].Policy, "0", dash, dash, dash, dash, dash}
		if k < len(ss) && ss[k].idx == i {
			row[1] = fmt.Sprint(ss[k].count)
			for j, v := range ss[k].pct {
				row[2+j] = FormatUs(v)
			}
			k++
		}
		rows = append(rows, row)
	}
	htmlTableClass(w, "percentiles", header, rows, true)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// writeShares draws one horizontal stacked bar per policy: the share of idle
// time spent in each state, shallow to deep.
func writeShares(w *bufio.Writer, rep *WhatifReport) {
	if len(rep.Results) == 0 {
		fmt.Fprintf(w, "<p>No data.</p>\n")
		return
	}
	states := stateOrder(rep)
	const labelW, barW, rowH, top = 220, 600, 30, 8
	width := labelW + barW + 20
	// Legend layout first: it wraps, and sets the height.
	type item struct{ x, y int }
	legend := make([]item, len(states))
	legendY := top + len(rep.Results)*rowH + 14
	lx, ly := labelW, legendY
	for k, s := range states {
		iw := 24 + 7*len([]rune(truncate(s, 16)))
		if lx > labelW && lx+iw > width {
			lx, ly = labelW, ly+20
		}
		legend[k] = item{lx, ly}
		lx += iw
	}
	height := ly + 24
	fmt.Fprintf(w, "<svg id=\"shares\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"time share per state per policy\">\n", width, height, width, height)
	for i := range rep.Results {
		r := &rep.Results[i]
		yy := top + i*rowH
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", labelW-8, yy+rowH/2+2, esc(truncate(r.Policy, 30)))
		var total float64
		for _, s := range states {
			if v := r.StateShare[s]; finite(v) && v > 0 {
				total += v
			}
		}
		scale := 1.0
		if total > 1 { // shares should sum to 1; never draw past the bar
			scale = 1 / total
		}
		xx := float64(labelW)
		for k, s := range states {
			v := r.StateShare[s]
			if !finite(v) || v <= 0 {
				continue
			}
			wd := v * scale * barW
			fmt.Fprintf(w, "<rect x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\" fill=\"%s\"><title>%s: %s %s</title></rect>\n",
				fnum(xx), yy+3, fnum(wd), rowH-6, color(stateColors, k), esc(r.Policy), esc(s), esc(FormatPct(v)))
			if wd >= 44 {
				fmt.Fprintf(w, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\" style=\"fill:%s\">%s</text>\n", fnum(xx+wd/2), yy+rowH/2+4, textOn(color(stateColors, k)), esc(FormatPct(v)))
			}
			xx += wd
		}
		fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", labelW, yy+3, barW, rowH-6)
	}
	for k, s := range states {
		it := legend[k]
		fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", it.x, it.y, color(stateColors, k))
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\">%s</text>\n", it.x+16, it.y+10, esc(truncate(s, 16)))
	}
	fmt.Fprintf(w, "</svg>\n<p class=\"caption\">Share of idle time in each state, shallow to deep, per policy.</p>\n")
}

// textOn picks black or white text for legibility on a #rrggbb fill.
func textOn(fill string) string {
	if len(fill) != 7 {
		return "#000"
	}
	v, err := strconv.ParseUint(fill[1:], 16, 32)
	if err != nil {
		return "#000"
	}
	r, g, b := float64(v>>16&0xff), float64(v>>8&0xff), float64(v&0xff)
	if 0.299*r+0.587*g+0.114*b > 150 {
		return "#222"
	}
	return "#fff"
}

// htmlTable writes a results table whose first column names the policy in
// its plot colour (swatches) or is a plain label. It scrolls in its own box
// where the page is too narrow for it.
func htmlTable(w io.Writer, header []string, rows [][]string, swatches bool) {
	htmlTableClass(w, "", header, rows, swatches)
}

// htmlTableClass is htmlTable for a table of the given class.
func htmlTableClass(w io.Writer, class string, header []string, rows [][]string, swatches bool) {
	if class != "" {
		class = " class=\"" + class + "\""
	}
	fmt.Fprintf(w, "<div class=\"wide\"><table%s>\n<tr>", class)
	for i, h := range header {
		if i == 0 {
			fmt.Fprintf(w, "<th class=\"l\">%s</th>", esc(h))
		} else {
			fmt.Fprintf(w, "<th>%s</th>", esc(h))
		}
	}
	fmt.Fprintf(w, "</tr>\n")
	for i, r := range rows {
		fmt.Fprintf(w, "<tr>")
		for j, c := range r {
			switch {
			case j == 0 && swatches:
				fmt.Fprintf(w, "<td class=\"l\"><span style=\"color:%s\">■</span> %s</td>", color(policyColors, i), esc(c))
			case j == 0:
				fmt.Fprintf(w, "<td class=\"l\">%s</td>", esc(c))
			default:
				fmt.Fprintf(w, "<td>%s</td>", esc(c))
			}
		}
		fmt.Fprintf(w, "</tr>\n")
	}
	fmt.Fprintf(w, "</table></div>\n")
}
