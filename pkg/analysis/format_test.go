package analysis

import (
	"strings"
	"testing"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "''",
		"menu+blkqos=10us/3ms": "menu+blkqos=10us/3ms",
		"a b":                  "'a b'",
		"it's":                 `'it'\''s'`,
		"$HOME":                "'$HOME'",
		"comm=fio,op=read":     "comm=fio,op=read",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// mdWrap never starts a line with what Markdown reads as a block: a
// paragraph must not turn into a list, a heading or a setext heading.
func TestMarkdownWrapKeepsParagraphs(t *testing.T) {
	s := strings.Repeat("word ", 19) + "- not a list, " + strings.Repeat("word ", 18) + "# no heading " +
		strings.Repeat("word ", 18) + "=== " + strings.Repeat("word ", 18) + "1. " + strings.Repeat("word ", 19) + "+ x"
	out := mdWrap(s, 100, "- ", "  ")
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len([]rune(l)) > 100 {
			t.Errorf("line %d too wide: %q", i, l)
		}
		if i == 0 {
			continue
		}
		if w := strings.Fields(l); len(w) > 0 && mdBlockStart(w[0]) {
			t.Errorf("line %d starts a block: %q", i, l)
		}
	}
	if got := strings.Join(strings.Fields(out), " "); got != "- "+strings.Join(strings.Fields(s), " ") {
		t.Errorf("words changed:\n%s", out)
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 idle periods"}, {1, "1 idle period"}, {2, "2 idle periods"}} {
		if got := Count(tc.n, "idle period"); got != tc.want {
			t.Errorf("Count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestFormatUsF: microseconds at a precision by size, and what rounds to
// zero is "0" whatever its sign (a comparison's change printed "-0.00").
func TestFormatUsF(t *testing.T) {
	for _, c := range []struct {
		ns   float64
		want string
	}{
		{0, "0"}, {-0.3, "0"}, {4.9, "0"}, {-4.9, "0"}, {5, "0.01"}, {-5, "-0.01"},
		{1500, "1.50"}, {-1500, "-1.50"}, {15_500, "15.5"}, {155_600, "156"}, {-155_600, "-156"},
	} {
		if got := FormatUsF(c.ns); got != c.want {
			t.Errorf("FormatUsF(%g) = %q, want %q", c.ns, got, c.want)
		}
	}
}

// A share short of all is never shown as 100 %, nor one above none as 0.
func TestFormatPct(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0 %", 0.0000001: "<0.001 %", 0.0001: "0.010 %", 0.25: "25.0 %", 0.9994: "99.9 %",
		0.99970: "99.970 %", 0.999999: "99.999 %", 1: "100.0 %",
	} {
		if got := FormatPct(f); got != want {
			t.Errorf("FormatPct(%g) = %s, want %s", f, got, want)
		}
	}
}
