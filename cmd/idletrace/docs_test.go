package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

// TestDocsProfileShape: the profile file shape README and DESIGN.md give
// is the one `profiles --format json` writes and --profile FILE reads, and
// the README's modifier list names every modifier (trial 11 item 11).
func TestDocsProfileShape(t *testing.T) {
	r := runBin(t, "profiles", "icx", "--format", "json")
	if r.code != 0 {
		t.Fatalf("profiles --format json: %s", r.stderr)
	}
	var p struct {
		States []map[string]any `json:"states"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || len(p.States) == 0 {
		t.Fatalf("profiles --format json: %v", err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	design, err := os.ReadFile("../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	// The file shape as each document writes it: "{name, hz, source, states: [{...}]}"
	// (DESIGN.md also gives whatif JSON's profile, a shorter one).
	shape := regexp.MustCompile(`\{name, hz, source, states:\s*\[\{([^}]*)\}\]\}`)
	for doc, text := range map[string]string{"README.md": string(readme), "docs/DESIGN.md": string(design)} {
		m := shape.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s gives no profile file shape {name, hz, source, states: [{...}]}", doc)
			continue
		}
		fields := map[string]bool{}
		for _, f := range strings.Split(m[1], ",") {
			fields[strings.Join(strings.Fields(f), "")] = true
		}
		for k := range p.States[0] {
			if !fields[k] {
				t.Errorf("%s's profile shape lacks %q, which profiles --format json writes (shape: %s)", doc, k, m[1])
			}
		}
		for f := range fields {
			if _, ok := p.States[0][f]; !ok {
				t.Errorf("%s's profile shape has %q, which profiles --format json does not write", doc, f)
			}
		}
	}
	for _, mod := range model.Modifiers() {
		if !strings.Contains(string(readme), "`"+mod.Name+"=") {
			t.Errorf("README's modifier list lacks %s=", mod.Name)
		}
	}
}

// TestDocsChangesLine: the README's example of whatif's "what each policy
// changed" line, on the bundled trace, is what whatif prints (a new user
// found it had drifted: 78,010 wake-ups in the README, 77,990 printed).
func TestDocsChangesLine(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(menu\\+blkqos=10us/3ms: changed [^`]*)`").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `menu+blkqos=10us/3ms: changed ...` example")
	}
	want := strings.Join(strings.Fields(string(m[1])), " ")
	r := runBin(t, "whatif", bundledTrace, "--profile", "spr", "--policy", "menu", "--policy", "menu+blkqos=10us/3ms")
	if r.code != 0 {
		t.Fatalf("whatif: exit %d: %s", r.code, r.stderr)
	}
	if got := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(got, want) {
		t.Errorf("whatif does not print the README's line %q:\n%s", want, r.stdout)
	}
}
