package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Bad policies: a one-line *PolicyError naming the modifier and its value.
func TestPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"haltpoll+halt_poll_ns=10us", `policy "haltpoll+halt_poll_ns=10us": unknown modifier "halt_poll_ns"`},
		{"menu+frob=1", `policy "menu+frob=1": unknown modifier "frob" (known: poll, margin, qos, blkqos, maxcstate, disable, kernel)`},
		{"menu+qos", `policy "menu+qos": qos: needs a value (qos=DURATION)`},
		{"haltpoll+poll=10us", `policy "haltpoll+poll=10us": poll: haltpoll sets its own poll window`},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := ParsePolicy(tc.spec)
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *PolicyError", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line starting %q", err, tc.want)
			}
		})
	}
}

// Every modifier in the table whatif --help is made from parses with its
// example, changes the policy from the bare governor's, and the spec
// round-trips; every governor the help says it applies to takes it, and
// the others refuse it.
func TestModifierTable(t *testing.T) {
	if len(Modifiers()) < 7 {
		t.Fatalf("%d modifiers", len(Modifiers()))
	}
	seen := map[string]bool{}
	for _, m := range Modifiers() {
		if seen[m.Name] || m.Name != strings.ToLower(m.Name) || m.Meaning == "" || m.Value == "" || strings.Contains(m.Meaning, "\n") {
			t.Errorf("modifier %q: duplicate, not lower case, or without a one-line meaning and a value", m.Name)
		}
		seen[m.Name] = true
		p := mustPolicy(t, m.Example)
		gov, rest, _ := strings.Cut(m.Example, "+")
		if !strings.HasPrefix(rest, m.Name+"=") {
			t.Errorf("modifier %s: example %q does not use it", m.Name, m.Example)
		}
		bare := mustPolicy(t, gov)
		bare.Spec = p.Spec
		if reflect.DeepEqual(p, bare) {
			t.Errorf("modifier %s: example %q changes nothing", m.Name, m.Example)
		}
		if q := mustPolicy(t, p.String()); !reflect.DeepEqual(p, q) || q.Spec != m.Example {
			t.Errorf("modifier %s: %q does not round-trip", m.Name, m.Example)
		}
		val := strings.TrimPrefix(rest, m.Name+"=")
		applies := map[Governor]bool{}
		for _, g := range m.AppliesTo() {
			applies[g] = true
		}
		if len(applies) == 0 {
			t.Errorf("modifier %s applies to no governor", m.Name)
		}
		for _, g := range Governors() {
			spec := string(g) + "+" + m.Name + "=" + val
			_, err := ParsePolicy(spec)
			if applies[g] != (err == nil) {
				t.Errorf("%s: applies %v, error %v", spec, applies[g], err)
			}
		}
	}
	help := PolicyHelp()
	for _, m := range Modifiers() {
		if !strings.Contains(help, m.Name+"="+m.Value) || !strings.Contains(help, m.Example) || !strings.Contains(help, m.Meaning) {
			t.Errorf("PolicyHelp lacks modifier %s", m.Name)
		}
	}
	for _, g := range GovernorTable() {
		if !strings.Contains(help, string(g.Name)) || !strings.Contains(help, g.Meaning) {
			t.Errorf("PolicyHelp lacks governor %s", g.Name)
		}
	}
}

// Specs round-trip through String.
func TestPolicySpecRoundTrip(t *testing.T) {
	for _, spec := range []string{
		"haltpoll+qos=5us",
		"menu+margin=12.5%+kernel=6.12+disable=C6,C1E", "teo+blkqos=10us/3ms+maxcstate=2", "ladder+poll=50us",
	} {
		p := mustPolicy(t, spec)
		q := mustPolicy(t, p.String())
		if p.String() != spec || !reflect.DeepEqual(p, q) {
			t.Errorf("%q: String %q, reparsed %+v, want %+v", spec, p.String(), q, p)
		}
	}
}
