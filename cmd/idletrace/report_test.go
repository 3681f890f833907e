package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// mdWidth is the widest line a Markdown report may have outside its tables:
// what a GitHub comment or a mailing-list reader shows without wrapping.
const mdWidth = 100

// checkTicketMarkdown holds a Markdown report to issue 11 item 13: no line
// wider than mdWidth outside tables (and their fenced command block), the
// model assumptions folded in a <details> block, and the command line that
// produced it in a fenced block at its start.
func checkTicketMarkdown(t *testing.T, name, out, wantCommand string, wantAssumptions bool) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "|") {
			continue // a table row: tables may be wider
		}
		if n := utf8.RuneCountInString(l); n > mdWidth {
			t.Errorf("%s: line %d is %d columns wide (at most %d outside tables):\n%s", name, i+1, n, mdWidth, l)
		}
	}
	// The command line first: a fenced block whose lines, joined at
	// their continuation backslashes, are the shell-quoted argv.
	if len(lines) < 3 || lines[0] != "```sh" {
		t.Fatalf("%s: does not start with the command line in a ```sh block:\n%s", name, strings.Join(lines[:min(len(lines), 5)], "\n"))
	}
	var cmd []string
	closed := false
	for _, l := range lines[1:] {
		if l == "```" {
			closed = true
			break
		}
		cmd = append(cmd, strings.TrimSuffix(strings.TrimSpace(l), " \\"))
	}
	if !closed {
		t.Fatalf("%s: the command block is not closed", name)
	}
	if got := strings.Join(cmd, " "); got != wantCommand {
		t.Errorf("%s: command line\n%s\nwant\n%s", name, got, wantCommand)
	}
	if wantAssumptions {
		open := strings.Index(out, "<details>\n<summary>Model assumptions</summary>\n\n")
		end := strings.LastIndex(out, "\n</details>\n")
		if open < 0 || end < open || !strings.Contains(out[open:end], "First-order model") {
			t.Errorf("%s: the model assumptions are not folded in a <details> block:\n%s", name, out)
		}
		if strings.Count(out, "First-order model") != 1 {
			t.Errorf("%s: the assumptions appear %d times", name, strings.Count(out, "First-order model"))
		}
	}
}

// TestMarkdownForTickets (issue 11 item 13): whatif's and stats' Markdown
// on the bundled trace fit a ticket, and carry the command that made them.
func TestMarkdownForTickets(t *testing.T) {
	r := runBin(t, "stats", bundledTrace, "--format", "markdown")
	if r.code != 0 {
		t.Fatalf("stats: exit %d: %s", r.code, r.stderr)
	}
	checkTicketMarkdown(t, "stats", r.stdout, "idletrace stats "+bundledTrace+" --format markdown", false)

	// Many policies and an output path that needs quoting: the command
	// line is long enough to be continued, and still pastes back.
	out := filepath.Join(t.TempDir(), "my report's.md")
	args := []string{"whatif", bundledTrace, "--format", "markdown", "--policy", "menu", "--policy", "teo",
		"--policy", "menu+margin=25", "--policy", "menu+blkqos=10us/3ms", "--policy", "haltpoll", "--policy", "oracle",
		"--io", "op=read", "-o", out}
	if r := runBin(t, args...); r.code != 0 {
		t.Fatalf("whatif: exit %d: %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "idletrace " + strings.Join(args[:len(args)-1], " ") + ` '` + strings.ReplaceAll(out, `'`, `'\''`) + `'`
	checkTicketMarkdown(t, "whatif", string(data), want, true)

	// The comparison (whatif --measured) too.
	r = runBin(t, "whatif", bundledTrace, "--policy", "menu", "--measured", bundledTrace, "--format", "markdown")
	if r.code != 0 {
		t.Fatalf("whatif --measured: exit %d: %s", r.code, r.stderr)
	}
	checkTicketMarkdown(t, "whatif --measured", r.stdout,
		"idletrace whatif "+bundledTrace+" --policy menu --measured "+bundledTrace+" --format markdown", true)
}

// TestWhatifIOFilterNote: a whatif report under --io says which requests
// its IO figures cover, and that none did where the filter selected none
// (a mistyped filter reads as a machine without IO otherwise).
func TestWhatifIOFilterNote(t *testing.T) {
	for _, tc := range []struct{ filter, want string }{
		{"op=read", `IO figures cover the block IO completions the IO filter "op=read" selects: `},
		{"op=write_zeroes", `block IO completions in the window matched the IO filter "op=write_zeroes": no IO`},
	} {
		r := runBin(t, "whatif", bundledTrace, "--io", tc.filter)
		if r.code != 0 {
			t.Fatalf("whatif --io %s: exit %d: %s", tc.filter, r.code, r.stderr)
		}
		if got := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(got, tc.want) {
			t.Errorf("whatif --io %s: the report lacks %q:\n%s", tc.filter, tc.want, r.stdout)
		}
	}
}
