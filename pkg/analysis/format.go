package analysis

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Human units for text and Markdown; JSON always carries raw ns.

// FormatUs formats ns as microseconds with a precision that suits the size:
// 0.35, 8.12, 42.7, 1234.
func FormatUs(ns uint64) string { return FormatUsF(float64(ns)) }

// FormatUsF is FormatUs for a float (a mean).
func FormatUsF(ns float64) string {
	if math.IsNaN(ns) || math.IsInf(ns, 0) {
		return "—"
	}
	us := ns / 1000
	switch a := math.Abs(us); {
	case a == 0:
		return "0"
	case a < 10:
		return fmt.Sprintf("%.2f", us)
	case a < 100:
		return fmt.Sprintf("%.1f", us)
	default:
		return fmt.Sprintf("%.0f", us)
	}
}

// FormatMs formats ns as milliseconds with µs resolution (sysfs residency is
// kept in µs).
func FormatMs(ns uint64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }

// FormatDuration formats ns in the largest fitting unit.
func FormatDuration(ns uint64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", float64(ns)/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%d ns", ns)
}

// FormatPct formats a fraction as a percentage.
func FormatPct(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	switch {
	case f == 0:
		return "0 %"
	case f*100 < 0.1:
		return fmt.Sprintf("%.3f %%", f*100)
	}
	return fmt.Sprintf("%.1f %%", f*100)
}

const dash = "—"

// doc writes a report as text or Markdown: headings, paragraphs, bullet lists
// and tables (tablewriter for both).
type doc struct {
	w        *bufio.Writer
	markdown bool
	started  bool
}

func newDoc(w io.Writer, markdown bool) *doc { return &doc{w: bufio.NewWriter(w), markdown: markdown} }

func (d *doc) gap() {
	if d.started {
		d.w.WriteString("\n")
	}
	d.started = true
}

func (d *doc) title(s string) {
	d.gap()
	if d.markdown {
		fmt.Fprintf(d.w, "## %s\n", mdInline(s))
		return
	}
	fmt.Fprintf(d.w, "%s\n%s\n", s, strings.Repeat("=", displayLen(s)))
}

func (d *doc) heading(s string) {
	d.gap()
	if d.markdown {
		fmt.Fprintf(d.w, "### %s\n", mdInline(s))
		return
	}
	fmt.Fprintf(d.w, "%s\n%s\n", s, strings.Repeat("-", displayLen(s)))
}

// para writes a paragraph, wrapped at 100 columns in text.
func (d *doc) para(s string) {
	d.gap()
	if d.markdown {
		fmt.Fprintf(d.w, "%s\n", mdInline(s))
		return
	}
	d.w.WriteString(wrap(s, 100, ""))
}

// lines writes short lines without a gap between them.
func (d *doc) lines(ls ...string) {
	d.gap()
	for _, l := range ls {
		if d.markdown {
			fmt.Fprintf(d.w, "%s  \n", mdInline(l))
		} else {
			fmt.Fprintf(d.w, "%s\n", l)
		}
	}
}

func (d *doc) bullets(items []string) {
	if len(items) == 0 {
		return
	}
	d.gap()
	for _, it := range items {
		if d.markdown {
			fmt.Fprintf(d.w, "- %s\n", mdInline(it))
		} else {
			d.w.WriteString(wrap(it, 100, "  - "))
		}
	}
}

// table renders rows under header; left lists the columns aligned left (the
// others are right-aligned: numbers).
func (d *doc) table(header []string, rows [][]string, left ...int) error {
	d.gap()
	aligns := make([]tw.Align, len(header))
	for i := range aligns {
		aligns[i] = tw.AlignRight
	}
	for _, i := range left {
		if i < len(aligns) {
			aligns[i] = tw.AlignLeft
		}
	}
	opts := []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
	}
	if d.markdown {
		opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
		header = mdCells(header)
		esc := make([][]string, len(rows))
		for i, r := range rows {
			esc[i] = mdCells(r)
		}
		rows = esc
	}
	t := tablewriter.NewTable(d.w, opts...)
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}

func (d *doc) flush() error { return d.w.Flush() }

func mdCells(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = mdInline(c)
		if out[i] == "" {
			out[i] = " "
		}
	}
	return out
}

// mdInline escapes what would break a Markdown paragraph or table cell.
var mdReplacer = strings.NewReplacer(
	`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;", "[", `\[`, "]", `\]`, "\n", " ",
)

func mdInline(s string) string { return mdReplacer.Replace(s) }

func displayLen(s string) int { return len([]rune(s)) }

// wrap breaks s into lines of at most width runes, the first prefixed with
// prefix and the rest indented to match.
func wrap(s string, width int, prefix string) string {
	var b strings.Builder
	indent := strings.Repeat(" ", displayLen(prefix))
	line := prefix
	n := displayLen(prefix)
	empty := true
	for _, word := range strings.Fields(s) {
		wl := displayLen(word)
		if !empty && n+1+wl > width {
			b.WriteString(line)
			b.WriteString("\n")
			line, n, empty = indent, len(indent), true
		}
		if !empty {
			line += " "
			n++
		}
		line += word
		n += wl
		empty = false
	}
	b.WriteString(line)
	b.WriteString("\n")
	return b.String()
}
