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
