package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

// TestWhatifHelpListsPolicies: whatif --help lists every governor and every
// modifier with its meaning and example, from pkg/model's table (issue 11
// item 7: it listed none).
func TestWhatifHelpListsPolicies(t *testing.T) {
	r := runBin(t, "whatif", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	help := r.stdout + r.stderr
	for _, g := range model.GovernorTable() {
		if !strings.Contains(help, "  "+string(g.Name)+" ") || !strings.Contains(help, g.Meaning) {
			t.Errorf("help lacks governor %s", g.Name)
		}
	}
	for _, m := range model.Modifiers() {
		for _, want := range []string{m.Name + "=" + m.Value, m.Meaning, "--policy " + m.Example} {
			if !strings.Contains(help, want) {
				t.Errorf("help lacks %q", want)
			}
		}
	}
}

// TestPolicyErrorsPointToHelp: every policy error, from parsing or from a
// policy that does not fit the profile, is one line ending with where the
// policies are listed, and exits 2.
func TestPolicyErrorsPointToHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "menu+guest_halt_poll_ns=0"}, `guest_halt_poll_ns: is one of haltpoll's module parameters`},
		{[]string{"--policy", "haltpoll+guest_halt_poll_grow=x"}, `guest_halt_poll_grow: "x" is not an unsigned int`},
		{[]string{"--policy", "haltpoll+guest_halt_poll_ns=200000"}, `"200000" needs a unit`},
		{[]string{"--policy", "haltpoll+guest_halt_poll_allow_shrink=maybe"}, `"maybe" is not Y, N`},
		{[]string{"--policy", "haltpoll+poll=10us"}, `haltpoll sets its own poll window`},
		{[]string{"--policy", "menu+frob=1"}, `unknown modifier "frob"`},
		{[]string{"--policy", "schedutil"}, `unknown governor`},
		{[]string{"--policy", "menu+qos"}, `needs a value (qos=DURATION)`},
		{[]string{"--profile", "icx", "--policy", "menu+disable=C9"}, `no state "C9"`},
		{[]string{"--profile", "icx", "--policy", "recorded"}, `recorded needs the recorded profile`},
	} {
		r := runBin(t, append([]string{"whatif", bundledTrace}, tc.args...)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) ||
			!strings.HasSuffix(r.stderr, " (see idletrace whatif --help)\n") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %q, ending (see idletrace whatif --help)", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestWhatifHaltpollModifiers: the guest_halt_poll_* modifiers reach the
// replay: guest_halt_poll_ns=0 never polls, a larger window polls more than
// the trace's 200 µs.
func TestWhatifHaltpollModifiers(t *testing.T) {
	specs := []string{"haltpoll+guest_halt_poll_ns=0", "haltpoll", "haltpoll+guest_halt_poll_ns=2ms+guest_halt_poll_grow_start=200us"}
	args := []string{"whatif", bundledTrace, "--profile", "haltpoll", "--format", "json"}
	for _, s := range specs {
		args = append(args, "--policy", s)
	}
	r := runBin(t, args...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Results []struct {
			Policy     string             `json:"policy"`
			StateShare map[string]float64 `json:"state_share"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(specs) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(specs))
	}
	prev := -1.0
	for i, res := range rep.Results {
		poll := res.StateShare["POLL"]
		t.Logf("%s: POLL %.4f", res.Policy, poll)
		if res.Policy != specs[i] || (i == 0 && poll != 0) || poll <= prev {
			t.Errorf("%s (want %s): POLL share %.4f after %.4f", res.Policy, specs[i], poll, prev)
		}
		prev = poll
	}
}
