package model

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

func u64(v uint64) *uint64 { return &v }
func boolp(v bool) *bool   { return &v }

// haltpoll's module parameters as modifiers (issue 10 item 3): the kernel's
// names and types (drivers/cpuidle/governors/haltpoll.c: unsigned int ns,
// unsigned int factors, bool).
func TestParseHaltpollModifiers(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want HaltPollOverrides
	}{
		{"haltpoll", HaltPollOverrides{}},
		{"haltpoll+guest_halt_poll_ns=200us", HaltPollOverrides{GuestHaltPollNs: u64(200_000)}},
		{"haltpoll+guest_halt_poll_ns=0", HaltPollOverrides{GuestHaltPollNs: u64(0)}},
		{"haltpoll+guest_halt_poll_ns=200000ns", HaltPollOverrides{GuestHaltPollNs: u64(200_000)}},
		{"haltpoll+guest_halt_poll_ns=4294967295ns", HaltPollOverrides{GuestHaltPollNs: u64(4294967295)}},
		{"haltpoll+GUEST_HALT_POLL_NS=1.5ms", HaltPollOverrides{GuestHaltPollNs: u64(1_500_000)}},
		{"haltpoll+guest_halt_poll_grow=4", HaltPollOverrides{Grow: u64(4)}},
		{"haltpoll+guest_halt_poll_grow=0", HaltPollOverrides{Grow: u64(0)}},
		{"haltpoll+guest_halt_poll_shrink=4294967295", HaltPollOverrides{Shrink: u64(4294967295)}},
		{"haltpoll+guest_halt_poll_grow_start=20us", HaltPollOverrides{GrowStart: u64(20_000)}},
		{"haltpoll+guest_halt_poll_allow_shrink=N", HaltPollOverrides{AllowShrink: boolp(false)}},
		{"haltpoll+guest_halt_poll_allow_shrink=y", HaltPollOverrides{AllowShrink: boolp(true)}},
		{"haltpoll+guest_halt_poll_allow_shrink=1", HaltPollOverrides{AllowShrink: boolp(true)}},
		{"haltpoll+guest_halt_poll_allow_shrink=0", HaltPollOverrides{AllowShrink: boolp(false)}},
		{"haltpoll+guest_halt_poll_allow_shrink=true", HaltPollOverrides{AllowShrink: boolp(true)}},
		{"haltpoll+guest_halt_poll_allow_shrink=False", HaltPollOverrides{AllowShrink: boolp(false)}},
		{"haltpoll+guest_halt_poll_ns=400us+guest_halt_poll_grow=3+guest_halt_poll_shrink=0+guest_halt_poll_grow_start=10us+guest_halt_poll_allow_shrink=N+qos=20us",
			HaltPollOverrides{GuestHaltPollNs: u64(400_000), Grow: u64(3), Shrink: u64(0), GrowStart: u64(10_000), AllowShrink: boolp(false)}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p := mustPolicy(t, tc.spec)
			if !reflect.DeepEqual(p.HaltPoll, tc.want) {
				t.Fatalf("overrides %s, want %s", fmtOverrides(p.HaltPoll), fmtOverrides(tc.want))
			}
		})
	}
}

func fmtOverrides(o HaltPollOverrides) string {
	var s []string
	for _, f := range []struct {
		n string
		v *uint64
	}{{"ns", o.GuestHaltPollNs}, {"grow", o.Grow}, {"shrink", o.Shrink}, {"grow_start", o.GrowStart}} {
		if f.v != nil {
			s = append(s, fmt.Sprintf("%s=%d", f.n, *f.v))
		}
	}
	if o.AllowShrink != nil {
		s = append(s, fmt.Sprintf("allow_shrink=%v", *o.AllowShrink))
	}
	return "{" + strings.Join(s, " ") + "}"
}

// Bad policies: a one-line *PolicyError naming the modifier and its value.
func TestPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"menu+guest_halt_poll_ns=0", `policy "menu+guest_halt_poll_ns=0": guest_halt_poll_ns: is one of haltpoll's module parameters`},
		{"teo+guest_halt_poll_allow_shrink=N", `policy "teo+guest_halt_poll_allow_shrink=N": guest_halt_poll_allow_shrink: is one of haltpoll's`},
		{"oracle+guest_halt_poll_grow=2", `policy "oracle+guest_halt_poll_grow=2": guest_halt_poll_grow: is one of haltpoll's`},
		{"recorded+guest_halt_poll_ns=0", `policy "recorded+guest_halt_poll_ns=0": guest_halt_poll_ns: the recorded policy`},
		{"haltpoll+guest_halt_poll_ns=200000", `policy "haltpoll+guest_halt_poll_ns=200000": guest_halt_poll_ns: "200000" needs a unit: the module parameter is in ns, so 200000ns`},
		{"haltpoll+guest_halt_poll_ns=5s", `policy "haltpoll+guest_halt_poll_ns=5s": guest_halt_poll_ns: "5s" is above 4294967295ns`},
		{"haltpoll+guest_halt_poll_ns=-1us", `policy "haltpoll+guest_halt_poll_ns=-1us": guest_halt_poll_ns: "-1us" is not a duration (must not be negative)`},
		{"haltpoll+guest_halt_poll_ns=soon", `policy "haltpoll+guest_halt_poll_ns=soon": guest_halt_poll_ns: "soon" is not a duration`},
		{"haltpoll+guest_halt_poll_ns", `policy "haltpoll+guest_halt_poll_ns": guest_halt_poll_ns: needs a value (guest_halt_poll_ns=DURATION)`},
		{"haltpoll+guest_halt_poll_grow_start=50000", `policy "haltpoll+guest_halt_poll_grow_start=50000": guest_halt_poll_grow_start: "50000" needs a unit`},
		{"haltpoll+guest_halt_poll_grow=-1", `policy "haltpoll+guest_halt_poll_grow=-1": guest_halt_poll_grow: "-1" is not an unsigned int (0 to 4294967295)`},
		{"haltpoll+guest_halt_poll_grow=4294967296", `policy "haltpoll+guest_halt_poll_grow=4294967296": guest_halt_poll_grow: "4294967296" is not an unsigned int`},
		{"haltpoll+guest_halt_poll_shrink=1.5", `policy "haltpoll+guest_halt_poll_shrink=1.5": guest_halt_poll_shrink: "1.5" is not an unsigned int`},
		{"haltpoll+guest_halt_poll_allow_shrink=maybe", `policy "haltpoll+guest_halt_poll_allow_shrink=maybe": guest_halt_poll_allow_shrink: "maybe" is not Y, N, 1, 0, true or false`},
		{"haltpoll+guest_halt_poll_ns=0+guest_halt_poll_ns=1us", `policy "haltpoll+guest_halt_poll_ns=0+guest_halt_poll_ns=1us": guest_halt_poll_ns: given twice`},
		{"haltpoll+poll=10us", `policy "haltpoll+poll=10us": poll: haltpoll sets its own poll window (use guest_halt_poll_ns=`},
		// Below what poll_idle() can time out: a replay re-selecting every ns took 15 s for 600 periods.
		{"teo+poll=999ns", `policy "teo+poll=999ns": poll: 999ns is below 1us: poll_idle() reads the clock only once per 200 cpu_relax() loops`},
		{"haltpoll+poll_ns=10us", `policy "haltpoll+poll_ns=10us": unknown modifier "poll_ns" (known: poll, margin, qos, blkqos, maxcstate, disable, enable, kernel, guest_halt_poll_ns,`},
		{"haltpoll+halt_poll_ns=10us", `policy "haltpoll+halt_poll_ns=10us": unknown modifier "halt_poll_ns"`},
		// PM QoS holds an s32 of microseconds, on any kernel.
		{"menu+qos=0.5us", `policy "menu+qos=0.5us": qos: "0.5us": /dev/cpu_dma_latency takes whole microseconds`},
		{"menu+qos=1h", `policy "menu+qos=1h": qos: "1h": above the 2147483647 µs /dev/cpu_dma_latency holds`},
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
	if len(Modifiers()) < 12 {
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
		"haltpoll+guest_halt_poll_ns=0", "haltpoll+guest_halt_poll_ns=200000ns+guest_halt_poll_allow_shrink=N",
		"haltpoll+guest_halt_poll_grow=0+guest_halt_poll_shrink=0+guest_halt_poll_grow_start=1us+qos=5us",
		"menu+margin=12.5%+kernel=6.12+disable=C6,C1E", "teo+blkqos=10us/3ms+maxcstate=2", "ladder+poll=50us",
	} {
		p := mustPolicy(t, spec)
		q := mustPolicy(t, p.String())
		if p.String() != spec || !reflect.DeepEqual(p, q) {
			t.Errorf("%q: String %q, reparsed %+v, want %+v", spec, p.String(), q, p)
		}
	}
}

// The modifiers override what the trace recorded: guest_halt_poll_ns=0
// never polls (no latency limit of 0 here to force POLL), a larger window
// polls more, and the modifier wins over the trace's own parameter.
func TestHaltpollModifiersReplay(t *testing.T) {
	s := genTrace(3, 2, 4000, 20_000)
	prof := mustBuiltin(t, "haltpoll", 250)
	recordedParams := func(ns uint64) *trace.Metadata {
		return &trace.Metadata{KernelRelease: "6.18.44", HZ: 250,
			HaltPoll: &trace.HaltPollParams{GuestHaltPollNs: ns, Grow: 2, Shrink: 2, GrowStart: 50_000, AllowShrink: true}}
	}
	pollShare := func(meta *trace.Metadata, spec string) float64 {
		res, _ := runReplay(t, prof, meta, []string{spec}, s)
		return res[0].StateShare["POLL"]
	}
	for _, tc := range []struct {
		name  string
		meta  *trace.Metadata
		specs []string // by increasing POLL share
		zero  bool     // the first never polls
	}{
		{"overrides the trace's 200us", recordedParams(200_000), []string{
			"haltpoll+guest_halt_poll_ns=0", "haltpoll+guest_halt_poll_ns=50us", "haltpoll", "haltpoll+guest_halt_poll_ns=2ms"}, true},
		{"overrides the trace's 0", recordedParams(0), []string{
			"haltpoll", "haltpoll+guest_halt_poll_ns=200us", "haltpoll+guest_halt_poll_ns=2ms"}, true},
		{"overrides the compiled defaults", &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}, []string{
			"haltpoll+guest_halt_poll_ns=0", "haltpoll", "haltpoll+guest_halt_poll_ns=2ms+guest_halt_poll_grow_start=200us"}, true},
		{"a window that never shrinks polls more", recordedParams(200_000), []string{
			"haltpoll", "haltpoll+guest_halt_poll_allow_shrink=N"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := -1.0
			for i, spec := range tc.specs {
				got := pollShare(tc.meta, spec)
				t.Logf("%s: POLL %.4f of idle time", spec, got)
				if i == 0 && tc.zero && got != 0 {
					t.Errorf("%s: POLL share %.4f, want 0", spec, got)
				}
				if got <= prev {
					t.Errorf("%s: POLL share %.4f, not above the previous policy's %.4f", spec, got, prev)
				}
				prev = got
			}
		})
	}
}

// enable= turns on a state the recorded table had disabled (the reverse
// experiment: from C6 off, predict C6 on); naming a state both ways, or one
// the profile lacks, is a policy error.
func TestEnableUndoesARecordedDisable(t *testing.T) {
	prof := mustBuiltin(t, "icx", 250)
	prof.States[prof.StateIndex("C6")].Disabled = true
	meta := &trace.Metadata{HZ: 250}
	s := genTrace(7, 2, 4000, 0)
	off, _ := runReplay(t, prof, meta, []string{"menu"}, s)
	on, _ := runReplay(t, prof, meta, []string{"menu+enable=C6"}, s)
	if off[0].StateShare["C6"] != 0 || on[0].StateShare["C6"] == 0 {
		t.Errorf("C6 share: %v with C6 disabled, %v with it enabled", off[0].StateShare["C6"], on[0].StateShare["C6"])
	}
	for spec, want := range map[string]string{
		"menu+enable=C6+disable=C6": "C6 is both disabled and enabled",
		"menu+enable=C9":            `enable: no state "C9"`,
	} {
		pol := mustPolicy(t, spec)
		if _, err := NewReplay(prof, meta, []Policy{pol}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
}

// With no --policy, another machine's profile replays the governor that
// machine would run: the recorded one, but haltpoll only on a guest's
// table, and menu for a governor not modelled.
func TestDefaultPolicySpecs(t *testing.T) {
	guest, err := Builtin("haltpoll", 250)
	if err != nil {
		t.Fatal(err)
	}
	spr, err := Builtin("spr", 250)
	if err != nil {
		t.Fatal(err)
	}
	recorded := &Profile{Name: "recorded"}
	// A file that calls itself recorded (cut from a report) is another
	// machine's table all the same.
	file, err := ParseProfile("a.json", []byte(`{"name": "recorded", "states": [{"name": "POLL", "polling": true, "exit_latency_us": 0, "target_residency_us": 0}]}`), 250)
	if err != nil {
		t.Fatal(err)
	}
	if file.Name != "recorded (file)" {
		t.Errorf("a file's profile named recorded is called %q", file.Name)
	}
	for _, tc := range []struct {
		arg      string
		prof     *Profile
		governor string
		want     string
	}{
		{"recorded", recorded, "haltpoll", "recorded oracle"},
		{"", recorded, "menu", "recorded oracle"},
		{"measured", &Profile{Name: "measured"}, "menu", "recorded oracle"},
		{"a.json", file, "teo", "teo oracle"},
		{"spr", spr, "haltpoll", "menu oracle"},
		{"haltpoll", guest, "haltpoll", "haltpoll oracle"},
		{"spr", spr, "teo", "teo oracle"},
		{"spr", spr, "ladder", "ladder oracle"},
		{"spr", spr, "", "menu oracle"},
		{"spr", spr, "cpuidle_foo", "menu oracle"},
	} {
		if got := strings.Join(DefaultPolicySpecs(tc.arg, tc.prof, tc.governor), " "); got != tc.want {
			t.Errorf("--profile %s, recorded governor %q: %s, want %s", tc.arg, tc.governor, got, tc.want)
		}
	}
}

func TestStateWanted(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		name    string
		idx     int
		off, on bool
	}{
		{"menu", "C6", 3, false, false},
		{"menu+disable=c6", "C6", 3, true, false},
		{"menu+disable=C6", "c6", 3, true, false},
		{"menu+disable=C6", "C1E", 2, false, false},
		{"menu+maxcstate=2", "C6", 3, true, false},
		{"menu+maxcstate=2", "C1E", 2, false, false},
		{"menu+enable=c1e", "C1E", 2, false, true},
	} {
		pol, err := ParsePolicy(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if off, on := pol.StateWanted(tc.name, tc.idx); off != tc.off || on != tc.on {
			t.Errorf("%s: StateWanted(%s, %d) = %v, %v; want %v, %v", tc.spec, tc.name, tc.idx, off, on, tc.off, tc.on)
		}
	}
}
