package analysis

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
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
th{background:#f5f5f5}td.l,th.l{text-align:left}
.wide{overflow-x:auto}.meta{color:#555;font-size:.9em}.caption{color:#555;font-size:.85em;max-width:900px}
svg{display:block;margin:.5em 0}svg text{font-family:system-ui,sans-serif;font-size:12px;fill:#333}
`

func esc(s string) string { return html.EscapeString(s) }

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
		fmt.Fprintf(w, "<p class=\"caption\">Above/below: too deep/too shallow choices by the cpuidle core's rules (share of the policy's selections). Energy: idle energy relative to the first policy. Agreement: share of the recorded selections made the same way.</p>\n")
		fmt.Fprintf(w, "<h3>Share of idle time per state</h3>\n")
		htmlTable(w, shareHeader, shareRows, true)
	}

	// Plots.
	fmt.Fprintf(w, "<h2>Wake-up latency</h2>\n")
	writeCDF(w, rep, "wake", func(r *model.Result) []model.CDFPoint { return r.WakeLatencyCDF },
		"Cumulative share of wake-ups by the exit latency they pay, per policy (log scale; 0 is drawn at the left edge).")
	fmt.Fprintf(w, "<h2>IO completion latency</h2>\n")
	writeCDF(w, rep, "io", func(r *model.Result) []model.CDFPoint { return r.IOLatencyCDF },
		"Cumulative share of block IO completions by issue → completion latency under each policy (log scale).")
	fmt.Fprintf(w, "<h2>Time share per state</h2>\n")
	writeShares(w, rep)

	if len(rep.Notes) > 0 {
		fmt.Fprintf(w, "<h2>Notes</h2>\n<ul>\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "<li>%s</li>\n", esc(n))
		}
		fmt.Fprintf(w, "</ul>\n")
	}
	if rep.Assumptions != "" {
		fmt.Fprintf(w, "<h2>Model assumptions</h2>\n<p>%s</p>\n", esc(rep.Assumptions))
	}
	fmt.Fprintf(w, "</body>\n</html>\n")
	return w.Flush()
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

const (
	cdfW, cdfH                     = 900, 380
	cdfL, cdfR, cdfT, cdfB         = 60, 200, 16, 48
	cdfPlotW, cdfPlotH     float64 = cdfW - cdfL - cdfR, cdfH - cdfT - cdfB
)

// writeCDF draws one step CDF per policy on a log x axis.
func writeCDF(w *bufio.Writer, rep *WhatifReport, id string, pts func(*model.Result) []model.CDFPoint, caption string) {
	type series struct {
		idx  int
		name string
		pts  []model.CDFPoint
	}
	var ss []series
	minPos, maxV := math.Inf(1), 0.0
	for i := range rep.Results {
		p := pts(&rep.Results[i])
		if len(p) == 0 {
			continue
		}
		ss = append(ss, series{i, rep.Results[i].Policy, p})
		for _, q := range p {
			v := float64(q.ValueNs)
			if v > 0 && v < minPos {
				minPos = v
			}
			maxV = max(maxV, v)
		}
	}
	if len(ss) == 0 {
		fmt.Fprintf(w, "<p>No data: %s</p>\n", esc(map[string]string{"wake": "no wake-up was replayed.", "io": "the trace has no block IO."}[id]))
		return
	}
	if math.IsInf(minPos, 1) { // every value is 0
		minPos, maxV = 100, 1000
	}
	lo := math.Pow(10, math.Floor(math.Log10(minPos)))
	hi := math.Pow(10, math.Ceil(math.Log10(max(maxV, minPos))))
	if hi <= lo {
		hi = lo * 10
	}
	llo, lhi := math.Log10(lo), math.Log10(hi)
	x := func(v float64) float64 {
		if v < lo {
			v = lo
		}
		return cdfL + (math.Log10(v)-llo)/(lhi-llo)*cdfPlotW
	}
	y := func(f float64) float64 {
		f = math.Max(0, math.Min(1, f))
		return cdfT + (1-f)*cdfPlotH
	}
	fmt.Fprintf(w, "<svg id=\"cdf-%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n", id, cdfW, cdfH, cdfW, cdfH, esc(caption))
	// Grid and axes.
	for d := llo; d <= lhi+1e-9; d++ {
		v := math.Pow(10, d)
		xx := fnum(x(v))
		fmt.Fprintf(w, "<line stroke=\"#dcdcdc\" x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%s\"/>\n", xx, cdfT, xx, fnum(cdfT+cdfPlotH))
		fmt.Fprintf(w, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n", xx, fnum(cdfT+cdfPlotH+16), esc(nsLabel(v)))
		if d < lhi-1e-9 {
			for m := 2; m <= 9; m++ {
				mx := fnum(x(v * float64(m)))
				fmt.Fprintf(w, "<line stroke=\"#f0f0f0\" x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%s\"/>\n", mx, cdfT, mx, fnum(cdfT+cdfPlotH))
			}
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		yy := fnum(y(f))
		fmt.Fprintf(w, "<line stroke=\"#dcdcdc\" x1=\"%d\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", cdfL, yy, fnum(cdfL+cdfPlotW), yy)
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>\n", cdfL-6, fnum(y(f)+4), strconv.FormatFloat(f, 'f', -1, 64))
	}
	for _, q := range []struct {
		f     float64
		label string
	}{{0.5, "p50"}, {0.99, "p99"}} {
		yy := fnum(y(q.f))
		fmt.Fprintf(w, "<line stroke=\"#999\" stroke-dasharray=\"4 3\" x1=\"%d\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", cdfL, yy, fnum(cdfL+cdfPlotW), yy)
		fmt.Fprintf(w, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\" style=\"fill:#777\">%s</text>\n", fnum(cdfL+cdfPlotW-4), fnum(y(q.f)+13), q.label)
	}
	fmt.Fprintf(w, "<line stroke=\"#888\" x1=\"%d\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", cdfL, fnum(cdfT+cdfPlotH), fnum(cdfL+cdfPlotW), fnum(cdfT+cdfPlotH))
	fmt.Fprintf(w, "<line stroke=\"#888\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%s\"/>\n", cdfL, cdfT, cdfL, fnum(cdfT+cdfPlotH))
	fmt.Fprintf(w, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">latency</text>\n", fnum(cdfL+cdfPlotW/2), cdfH-8)
	fmt.Fprintf(w, "<text transform=\"translate(14 %s) rotate(-90)\" text-anchor=\"middle\">cumulative share</text>\n", fnum(cdfT+cdfPlotH/2))

	// Series, as step paths coalesced to 0.1 px.
	for _, s := range ss {
		c := color(policyColors, s.idx)
		var b strings.Builder
		curX := fnum(x(float64(s.pts[0].ValueNs)))
		fmt.Fprintf(&b, "M%s %s", curX, fnum(y(0)))
		lastY := ""
		pendingV := false
		for _, q := range s.pts {
			px := fnum(x(float64(q.ValueNs)))
			py := fnum(y(q.Fraction))
			if px != curX {
				if pendingV {
					fmt.Fprintf(&b, "V%s", lastY)
					pendingV = false
				}
				fmt.Fprintf(&b, "H%s", px)
				curX = px
			}
			lastY, pendingV = py, true
		}
		if pendingV {
			fmt.Fprintf(&b, "V%s", lastY)
		}
		fmt.Fprintf(&b, "H%s", fnum(cdfL+cdfPlotW))
		fmt.Fprintf(w, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"><title>%s</title></path>\n", b.String(), c, esc(s.name))
	}
	// Legend.
	for k, s := range ss {
		ly := cdfT + 10 + k*20
		lx := cdfL + int(cdfPlotW) + 16
		fmt.Fprintf(w, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", lx, ly, lx+18, ly, color(policyColors, s.idx))
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx+24, ly+4, esc(truncate(s.name, 26)))
	}
	fmt.Fprintf(w, "</svg>\n<p class=\"caption\">%s Dashed lines: p50 and p99.</p>\n", esc(caption))
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
// its plot colour (swatches) or is a plain label.
func htmlTable(w io.Writer, header []string, rows [][]string, swatches bool) {
	fmt.Fprintf(w, "<div class=\"wide\"><table>\n<tr>")
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
