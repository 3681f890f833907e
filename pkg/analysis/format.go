package analysis

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"reflect"
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
	case a < 0.005: // what rounds to zero is 0, not "-0.00" or "0.00"
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
	case f > 0 && f*100 < 0.0005:
		return "<0.001 %" // above none, so never shown as 0.000
	case f*100 < 0.1:
		return fmt.Sprintf("%.3f %%", f*100)
	case f < 1 && f*100 >= 99.95:
		// Short of all, so never shown as 100: 99.970 %, cut, not rounded.
		return fmt.Sprintf("%.3f %%", math.Floor(f*100_000)/1000)
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
	// tbl is reused for every table of the document: tablewriter's
	// NewTable and Reset each allocate a 10,240-entry stringer cache (we
	// set no stringer), which was most of a report's memory and, on a
	// guest whose page faults cost microseconds, 2-3 % of `stats`'s run time.
	tbl *tablewriter.Table
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

// reportWidth is the widest line of a text or Markdown report outside its
// tables: what a terminal, a GitHub comment or a mailing-list reader shows
// without wrapping.
const reportWidth = 100

// para writes a paragraph, wrapped at reportWidth columns.
func (d *doc) para(s string) {
	d.gap()
	if d.markdown {
		d.w.WriteString(mdWrap(mdInline(s), reportWidth, "", ""))
		return
	}
	d.w.WriteString(wrap(s, reportWidth, ""))
}

// lines writes short lines without a gap between them: in text whole, so
// that a line such as the loss account can be found with grep; in Markdown
// each ends in a hard line break, one too long continued on the next.
func (d *doc) lines(ls ...string) {
	d.gap()
	for _, l := range ls {
		if d.markdown {
			// The two spaces of the hard break count in the width.
			fmt.Fprintf(d.w, "%s  \n", strings.TrimSuffix(mdWrap(mdInline(l), reportWidth-2, "", ""), "\n"))
		} else {
			fmt.Fprintf(d.w, "%s\n", l) // whole, for grep (a loss account, a head line)
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
			d.w.WriteString(mdWrap(mdInline(it), reportWidth, "- ", "  "))
		} else {
			d.w.WriteString(wrap(it, reportWidth, "  - "))
		}
	}
}

// command writes, in Markdown, the command line that produced the report
// (argv, shell-quoted) in a fenced block: a ticket then says how to make
// it again. A line too long is continued with a backslash. Text reports
// leave it out (their reader typed it).
func (d *doc) command(argv []string) {
	if !d.markdown || len(argv) == 0 {
		return
	}
	d.gap()
	d.w.WriteString("```sh\n")
	// Units that stay on one line: an option with its value
	// (--format markdown), else one argument.
	var units []string
	for i := 0; i < len(argv); i++ {
		u := ShellQuote(argv[i])
		if a := argv[i]; len(a) > 1 && a[0] == '-' && !strings.Contains(a, "=") && a != "--" &&
			i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
			i++
			u += " " + ShellQuote(argv[i])
		}
		units = append(units, u)
	}
	line, n := "", 0
	for i, q := range units {
		ql := displayLen(q)
		// Room for " \" after a word when the line goes on.
		if i > 0 && n+1+ql+2 > reportWidth {
			d.w.WriteString(line + " \\\n")
			line, n = "    ", 4
		} else if i > 0 {
			line += " "
			n++
		}
		line += q
		n += ql
	}
	d.w.WriteString(line + "\n```\n")
}

// folded writes a long paragraph that most readers skip: in Markdown in a
// <details> block under summary (GitHub shows it folded), in text as a
// paragraph led by the summary.
func (d *doc) folded(summary, s string) {
	if !d.markdown {
		d.para(summary + ". " + s)
		return
	}
	d.gap()
	fmt.Fprintf(d.w, "<details>\n<summary>%s</summary>\n\n", mdInline(summary))
	d.w.WriteString(mdWrap(mdInline(s), reportWidth, "", ""))
	d.w.WriteString("\n</details>\n")
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
		tablewriter.WithStringerCacheCustom(noStringerCache{}),
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
	t := d.tbl
	if t == nil {
		t = tablewriter.NewTable(d.w, opts...)
		d.tbl = t
	} else {
		t.Reset()
		t.Options(opts...)
	}
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}

// noStringerCache stands in for tablewriter's stringer cache, which a
// table of strings never uses, so that Reset has no map to make again.
type noStringerCache struct{}

func (noStringerCache) Add(reflect.Type, reflect.Value) bool        { return false }
func (noStringerCache) Get(reflect.Type) (v reflect.Value, ok bool) { return v, false }
func (noStringerCache) Purge()                                      {}

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
	return WrapWords(strings.Fields(s), width, prefix, strings.Repeat(" ", displayLen(prefix)))
}

// mdWrap wraps escaped Markdown s as wrap does, the lines after the first
// indented by indent, and never starts a line with a word that Markdown
// would read as the start of a block there (a list item, a heading, a
// setext underline, a quote, a fence, an ordered item): such a word stays
// on the line before it.
func mdWrap(s string, width int, prefix, indent string) string {
	var words []string
	for _, w := range strings.Fields(s) {
		if len(words) > 0 && mdBlockStart(w) {
			words[len(words)-1] += " " + w
			continue
		}
		words = append(words, w)
	}
	return WrapWords(words, width, prefix, indent)
}

func mdBlockStart(w string) bool {
	if strings.ContainsAny(w[:1], "-+*#=>~`|") {
		return true
	}
	i := 0
	for i < len(w) && w[i] >= '0' && w[i] <= '9' {
		i++
	}
	return i > 0 && i == len(w)-1 && (w[i] == '.' || w[i] == ')')
}

// ShellQuote quotes one argument for a POSIX shell: as it is when it holds
// nothing a shell would read otherwise, else in single quotes.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CommandLine is argv shell-quoted into one line.
func CommandLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// WrapWords joins words into lines of at most width runes (a longer word
// alone on its line), the first starting with prefix and the rest with
// indent; each line ends in a newline.
func WrapWords(words []string, width int, prefix, indent string) string {
	var b strings.Builder
	line := prefix
	n := displayLen(prefix)
	empty := true
	for _, word := range words {
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

// Count is n and the noun, plural unless n is 1: "1 idle period",
// "2 IO requests".
func Count[N ~int | ~int64 | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
