package model

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// seedIntel is the Intel table of seed 000 (7a25759eaa04's changelog):
// C1 2/2, C1E 10/20, C3 33/100, C6 133/400 (exit/residency µs).
func seedIntel(hz int) *Profile {
	return mkProfile("seed-intel", hz, []State{
		{Name: "POLL", Polling: true},
		{Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000},
		{Name: "C1E", ExitLatencyNs: 10000, TargetResidencyNs: 20000},
		{Name: "C3", ExitLatencyNs: 33000, TargetResidencyNs: 100000},
		{Name: "C6", ExitLatencyNs: 133000, TargetResidencyNs: 400000},
	})
}

// seedAMD is seed 000's AMD EPYC table: C1 1/2, C2 400/800.
func seedAMD(hz int) *Profile {
	return mkProfile("seed-amd", hz, []State{
		{Name: "POLL", Polling: true},
		{Name: "C1", ExitLatencyNs: 1000, TargetResidencyNs: 2000},
		{Name: "C2", ExitLatencyNs: 400000, TargetResidencyNs: 800000},
	})
}

func mkProfile(name string, hz int, st []State) *Profile {
	p := &Profile{Name: name, HZ: hz, States: st}
	for i := range p.States {
		p.States[i].Power, p.States[i].PowerEstimated = EstimatePower(p.States[i]), true
	}
	return p
}

func mustPolicy(t testing.TB, spec string) Policy {
	t.Helper()
	p, err := ParsePolicy(spec)
	if err != nil {
		t.Fatalf("ParsePolicy(%q): %v", spec, err)
	}
	return p
}

func TestSeed000PollLimits(t *testing.T) {
	c1only := seedIntel(250)
	for i := 2; i < len(c1only.States); i++ {
		c1only.States[i].Disabled = true
	}
	tests := []struct {
		name string
		prof *Profile
		rule PollRule
		want int64
	}{
		{"intel min10us picks C1E residency", seedIntel(1000), PollMin10us, 20_000},
		{"intel max_cstate=1 at HZ=250 is TICK/16", c1only, PollMin10us, 250_000},
		{"amd clamps C2 800us to TICK/16 at HZ=250", seedAMD(250), PollMin10us, 250_000},
		{"amd at HZ=1000 is 62.5us", seedAMD(1000), PollMin10us, 62_500},
		{"first-residency gives C1's 2us", seedIntel(250), PollFirstResidency, 2_000},
		{"first-residency on amd gives C1's 2us", seedAMD(250), PollFirstResidency, 2_000},
		{"tick16 at HZ=250", seedIntel(250), PollTick16, 250_000},
		{"fixed", seedIntel(250), PollFixed, 123_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := genericPollLimit(newTable(tc.prof, nil, nil, -1), tc.rule, 123_000)
			if got != tc.want {
				t.Fatalf("poll limit = %d ns, want %d", got, tc.want)
			}
		})
	}
	// The same through the replay's reported poll_limit_ns, with modifiers.
	for _, tc := range []struct {
		spec string
		prof *Profile
		want uint64
	}{
		{"menu", seedIntel(250), 20_000},
		{"menu+maxcstate=1", seedIntel(250), 250_000},
		{"menu+kernel=5.6", seedIntel(250), 2_000},
		{"menu+kernel=4.19", seedIntel(250), 250_000},
		{"menu+poll=first-residency", seedAMD(250), 2_000},
		{"ladder", seedAMD(250), 250_000},
		{"menu+disable=C1E", seedIntel(250), 100_000},
	} {
		rp, err := NewReplay(tc.prof, &trace.Metadata{KernelRelease: "6.18.44"}, []Policy{mustPolicy(t, tc.spec)})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := rp.Finish()
		if res[0].PollLimitNs == nil || *res[0].PollLimitNs != tc.want {
			t.Errorf("%s on %s: poll_limit_ns = %v, want %d", tc.spec, tc.prof.Name, res[0].PollLimitNs, tc.want)
		}
	}
	// A policy without an enabled polling state has no limit (null, "—").
	for _, spec := range []string{"menu+disable=POLL", "teo+disable=POLL+poll=50us"} {
		rp, err := NewReplay(seedIntel(250), &trace.Metadata{KernelRelease: "6.18.44"}, []Policy{mustPolicy(t, spec)})
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := rp.Finish(); res[0].PollLimitNs != nil {
			t.Errorf("%s: poll_limit_ns = %d, want null", spec, *res[0].PollLimitNs)
		}
	}
	// Recorded without a cpuidle driver, the kernel never polled: none for
	// recorded; a governor's what-if on the table still has the limit.
	noDriver := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250, CPUIdleDriver: trace.CPUIdleDriverNone, States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{
		{Index: 0, Name: "POLL", Polling: true}, {Index: 1, Name: "HLT", ExitLatencyNs: 1000, TargetResidencyNs: 1000}}}}}
	recorded, err := LoadProfile("recorded", noDriver)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := NewReplay(recorded, noDriver, []Policy{mustPolicy(t, "recorded"), mustPolicy(t, "menu")})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := rp.Finish(); res[0].PollLimitNs != nil || res[1].PollLimitNs == nil {
		t.Errorf("no cpuidle driver: poll_limit_ns recorded %v (want null), menu %v (want 20000)", res[0].PollLimitNs, res[1].PollLimitNs)
	}
}

func TestParsePolicy(t *testing.T) {
	good := []struct {
		spec  string
		check func(Policy) bool
	}{
		{"menu", func(p Policy) bool { return p.Governor == GovMenu && p.QoSNs < 0 && p.MaxCState < 0 }},
		{"menu+margin=25", func(p Policy) bool { return p.HasMargin && p.MarginPct == 25 }},
		{"menu+margin=12.5%", func(p Policy) bool { return p.MarginPct == 12.5 }},
		{"menu+blkqos=10us/3ms", func(p Policy) bool { return p.BlkQoSLimitNs == 10_000 && p.BlkQoSTimeoutNs == 3_000_000 }},
		{"teo+qos=20us+maxcstate=2", func(p Policy) bool { return p.QoSNs == 20_000 && p.MaxCState == 2 }},
		{"menu+poll=min10us", func(p Policy) bool { return p.Poll == PollMin10us }},
		{"menu+poll=tick16", func(p Policy) bool { return p.Poll == PollTick16 }},
		{"menu+poll=first-residency", func(p Policy) bool { return p.Poll == PollFirstResidency }},
		{"ladder+poll=50us", func(p Policy) bool { return p.Poll == PollFixed && p.PollNs == 50_000 }},
		{"menu+disable=C6,C1E", func(p Policy) bool { return len(p.Disable) == 2 && p.Disable[1] == "C1E" }},
		{"menu+kernel=6.12", func(p Policy) bool { return p.Kernel != nil && *p.Kernel == Version{6, 12, -1} }},
		{"teo+kernel=5.1", func(p Policy) bool { return p.Kernel != nil && *p.Kernel == Version{5, 1, -1} }},
		{"haltpoll+kernel=5.4.0", func(p Policy) bool { return p.Kernel != nil && *p.Kernel == Version{5, 4, 0} }},
		{"ladder+kernel=4.17", func(p Policy) bool { return p.Kernel != nil && *p.Kernel == Version{4, 17, -1} }},
		{"oracle+qos=0", func(p Policy) bool { return p.Governor == GovOracle && p.QoSNs == 0 }},
		{"haltpoll", func(p Policy) bool { return p.Governor == GovHaltpoll }},
		{"recorded", func(p Policy) bool { return p.Governor == GovRecorded }},
	}
	for _, tc := range good {
		p, err := ParsePolicy(tc.spec)
		if err != nil {
			t.Errorf("ParsePolicy(%q): %v", tc.spec, err)
			continue
		}
		if !tc.check(p) {
			t.Errorf("ParsePolicy(%q) = %+v", tc.spec, p)
		}
	}
	bad := []struct{ spec, want string }{
		{"menu+margin=x", `policy "menu+margin=x": margin: "x" is not a percentage`},
		{"", `policy "": empty`},
		{"foo", `policy "foo": unknown governor "foo"`},
		{"menu+blkqos=3ms/10us", `policy "menu+blkqos=3ms/10us": blkqos: the limit 3ms is longer than its timeout 10us: LIMIT/TIMEOUT is the latency limit, then how long it holds after an issue (e.g. 10us/3ms)`},
		{"menu+qos=10", `policy "menu+qos=10": qos: "10" is not a duration (needs a unit, e.g. 10us)`},
		{"menu+qos", `policy "menu+qos": qos: needs a value`},
		{"menu+blkqos=10us", `policy "menu+blkqos=10us": blkqos: "10us" is not LIMIT/TIMEOUT`},
		{"menu+blkqos=10us/x", `policy "menu+blkqos=10us/x": blkqos: timeout "x" is not a duration`},
		{"teo+margin=25", `policy "teo+margin=25": margin: only applies to menu`},
		{"menu+maxcstate=-1", `policy "menu+maxcstate=-1": maxcstate: "-1" is not a state index`},
		{"menu+kernel=banana", `policy "menu+kernel=banana": kernel: "banana" is not a kernel release`},
		// Releases no model knows are refused, not silently given the
		// nearest model (trial 11 item 7).
		{"menu+kernel=2.6", `policy "menu+kernel=2.6": kernel: "2.6" is outside the releases modelled, 4.17 to 7.3`},
		{"menu+kernel=4.16.9", `policy "menu+kernel=4.16.9": kernel: "4.16.9" is outside the releases modelled`},
		{"menu+kernel=7.4", `policy "menu+kernel=7.4": kernel: "7.4" is outside the releases modelled`},
		{"menu+kernel=99.1", `policy "menu+kernel=99.1": kernel: "99.1" is outside the releases modelled`},
		{"teo+kernel=6.20", `policy "teo+kernel=6.20": kernel: "6.20" is no Linux release: 6.19 was the last of the 6 series`},
		{"menu+kernel=5.20.1", `policy "menu+kernel=5.20.1": kernel: "5.20.1" is no Linux release: 5.19 was the last of the 5 series`},
		// Nor releases before the governor existed: teo came in 5.1,
		// haltpoll in 5.4.
		{"teo+kernel=4.17", `policy "teo+kernel=4.17": kernel: teo first appeared in Linux 5.1`},
		{"teo+kernel=5.0.21", `policy "teo+kernel=5.0.21": kernel: teo first appeared in Linux 5.1`},
		{"haltpoll+kernel=5.3", `policy "haltpoll+kernel=5.3": kernel: haltpoll first appeared in Linux 5.4`},
		{"haltpoll+qos=10us+kernel=4.19", `policy "haltpoll+qos=10us+kernel=4.19": kernel: haltpoll first appeared in Linux 5.4`},
		{"menu+frob=1", `policy "menu+frob=1": unknown modifier "frob"`},
		{"menu++qos=1us", `policy "menu++qos=1us": empty modifier`},
		{"menu+qos=1us+qos=2us", `policy "menu+qos=1us+qos=2us": qos: given twice`},
		{"recorded+qos=1us", `policy "recorded+qos=1us": qos: the recorded policy`},
		{"oracle+poll=10us", `policy "oracle+poll=10us": poll: oracle does not poll`},
		{"oracle+kernel=5.10", `policy "oracle+kernel=5.10": kernel: oracle is no release's governor`},
		{"menu+poll=sometimes", `policy "menu+poll=sometimes": poll: "sometimes" is not first-residency`},
		{"menu+qos=-5us", `policy "menu+qos=-5us": qos: "-5us" is not a duration (must not be negative)`},
	}
	for _, tc := range bad {
		_, err := ParsePolicy(tc.spec)
		if err == nil {
			t.Errorf("ParsePolicy(%q): no error", tc.spec)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParsePolicy(%q) error = %q, want prefix %q", tc.spec, err, tc.want)
		}
	}
}

// TestOldRecordedRelease: the governors' first releases hold kernel= only;
// a trace recorded before teo or haltpoll existed still replays them (and
// releases before OldestModelled too) by default.
func TestOldRecordedRelease(t *testing.T) {
	prof, err := Builtin("icx", 250)
	if err != nil {
		t.Fatal(err)
	}
	for _, release := range []string{"4.14.0", "4.19.0-27-amd64", "5.0.21", "5.3.18"} {
		pols := []Policy{mustPolicy(t, "menu"), mustPolicy(t, "teo"), mustPolicy(t, "ladder"), mustPolicy(t, "haltpoll"), mustPolicy(t, "oracle")}
		if _, err := NewReplay(prof, &trace.Metadata{HZ: 250, KernelRelease: release}, pols); err != nil {
			t.Errorf("recorded on %s: %v", release, err)
		}
	}
}

func TestProfileFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	okPath := write("x.json", `{"name": "example", "hz": 1000,
	 "states": [{"name": "POLL", "exit_latency_us": 0, "target_residency_us": 0, "polling": true},
	            {"name": "C1", "exit_latency_us": 2, "target_residency_us": 2, "power": 0.35},
	            {"name": "C6", "exit_latency_us": 133, "target_residency_us": 400, "power": 0.05, "disabled": false}]}`)
	p, err := LoadProfile(okPath, &trace.Metadata{HZ: 250})
	if err != nil {
		t.Fatal(err)
	}
	// The trace's HZ, not the file's: its ticks were recorded at it.
	if p.Name != "example" || p.HZ != 250 || !strings.Contains(p.Source, "the file's hz 1000 not used") || len(p.States) != 3 || p.States[2].ExitLatencyNs != 133000 ||
		p.States[1].Power != 0.35 || p.States[1].PowerEstimated || !p.States[0].PowerEstimated {
		t.Fatalf("parsed profile = %+v", p)
	}
	if p, err := LoadProfile(okPath, &trace.Metadata{}); err != nil || p.HZ != 1000 || strings.Contains(p.Source, "not used") {
		t.Fatalf("hz from the file where the trace has none: %+v %v", p, err)
	}
	noHZ := write("nohz.json", `{"states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`)
	if p, err := LoadProfile(noHZ, &trace.Metadata{HZ: 300}); err != nil || p.HZ != 300 || p.Name != "nohz" {
		t.Fatalf("hz from trace: %+v %v", p, err)
	}
	// Windows editors may start a file with a UTF-8 byte-order mark.
	bom := write("bom.json", "\xef\xbb\xbf"+`{"states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`)
	if p, err := LoadProfile(bom, nil); err != nil || len(p.States) != 1 {
		t.Fatalf("profile with a byte-order mark: %+v %v", p, err)
	}
	// A built-in's name in another case says how it is spelt (--profile
	// HSW), as the profiles command does.
	if _, err := LoadProfile("HSW", &trace.Metadata{HZ: 250}); err == nil || err.Error() != `profile "HSW": the built-in names are lower case (hsw)` {
		t.Errorf("LoadProfile(HSW): %v", err)
	}
	bad := []struct{ body, want string }{
		{`{"states": [{"name": "POLL", "exit_latency_us": 0, "target_residency_us": 0, "polling": true}, {"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}, {"name": "C6", "exit_latency_us": -1, "target_residency_us": 4}]}`,
			"states[2].exit_latency_us: must be >= 0"},
		{`{"states": [{"name": "C1", "target_residency_us": 1}]}`, "states[0].exit_latency_us: missing"},
		{`{"states": [{"name": "C1", "exit_latency_us": 2, "target_residency_us": 2}, {"name": "C6", "exit_latency_us": 133, "target_residency_us": 400}, {"name": "C3", "exit_latency_us": 33, "target_residency_us": 100}]}`,
			"states[2].exit_latency_us: 33 µs is below states[1] (C6)'s 133 µs: states go from the shallowest to the deepest"},
		{`{"states": [{"name": "C1", "exit_latency_us": 2, "target_residency_us": 20}, {"name": "C1E", "exit_latency_us": 10, "target_residency_us": 10}]}`,
			"states[1].target_residency_us: 10 µs is below states[0] (C1)'s 20 µs"},
		{`{"states": [{"name": "C1", "exit_latency": 1, "target_residency_us": 1}]}`, `states[0]: unknown field "exit_latency"`},
		// Type errors in JSON's words, not Go's.
		{`{"states": [{"name": "C1", "exit_latency_us": "1", "target_residency_us": 1}]}`, "states[0].exit_latency_us: must be a number, not a string"},
		{`{"states": [{"name": "C1", "exit_latency_ns": "1", "target_residency_ns": 1}]}`, "states[0].exit_latency_ns: must be a number, not a string"},
		{`[]`, ": must be an object, not an array"},
		{`{"hz": "250", "states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`, "hz: must be an integer, not a string"},
		{`{"hz": 2.5, "states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`, "hz: must be an integer, not 2.5"},
		{`{"hz": 1e3, "states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`, "hz: must be an integer written without an exponent, not 1e3"},
		{`{"hz": 99999999999999999999, "states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`, "hz: 99999999999999999999 is out of range"},
		{`{"states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1, "polling": "yes"}]}`, "states[0].polling: must be a boolean, not a string"},
		{`{"states": [{"name": ["C1"], "exit_latency_us": 1, "target_residency_us": 1}]}`, "states[0].name: must be a string, not an array"},
		{`{"states": {}}`, "states: must be an array, not an object"},
		{`{"states": [5]}`, "states[0]: must be an object, not a number"},
		// A leading UTF-8 byte-order mark is skipped; a syntax error's byte still counts it.
		{"\xef\xbb\xbf{x}", "invalid JSON at byte 5: invalid character 'x'"},
		{`{"states": []}`, "states: must list at least one state"},
		{`{"hz": 0, "states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}]}`, "hz: must be between"},
		{`{"states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}, {"name": "c1", "exit_latency_us": 1, "target_residency_us": 1}]}`, `states[1].name: "c1" repeats states[0]`},
		{`{"states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1}, {"name": "P", "exit_latency_us": 0, "target_residency_us": 0, "polling": true}]}`, "states[1].polling: only state 0"},
		{`{"states": [{"name": "C1", "exit_latency_us": 1, "target_residency_us": 1, "power": 7}]}`, "states[0].power: must be between"},
		// In the unit the file spells (what profiles --format json writes: ns), trial 11 item 9.
		{`{"states": [{"name": "C1", "exit_latency_ns": 2000, "target_residency_ns": 2000}, {"name": "C6", "exit_latency_ns": 170000, "target_residency_ns": 600000}, {"name": "C1E", "exit_latency_ns": 4000, "target_residency_ns": 700000}]}`,
			"states[2].exit_latency_ns: 4000 ns is below states[1] (C6)'s 170000 ns: states go from the shallowest to the deepest"},
		{`{"states": [{"name": "C1", "exit_latency_ns": 2000, "target_residency_ns": 20000}, {"name": "C1E", "exit_latency_us": 10, "target_residency_ns": 10000}]}`,
			"states[1].target_residency_ns: 10000 ns is below states[0] (C1)'s 20000 ns"},
		{`{"states": [{"name": "C1", "exit_latency_ns": -1, "target_residency_ns": 1}]}`, "states[0].exit_latency_ns: must be >= 0"},
		{`{"states": [`, "invalid JSON"},
		{`{"nme": "x"}`, `unknown field "nme"`},
	}
	for i, tc := range bad {
		path := write("b.json", tc.body)
		_, err := LoadProfile(path, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "profile "+path+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("case %d: error %v, want it to name %q", i, err, tc.want)
		}
	}
	if _, err := LoadProfile("nosuch", nil); err == nil || !strings.Contains(err.Error(), "built-in") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := LoadProfile("measured", nil); err != ErrNeedsMeasurement {
		t.Errorf("measured: %v", err)
	}
}

func TestBuiltins(t *testing.T) {
	want := []string{"hsw", "skx", "icx", "spr", "gnr", "srf", "skl", "adl", "epyc", "haltpoll"}
	for _, n := range want {
		p, err := LoadProfile(n, &trace.Metadata{HZ: 1000})
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if p.HZ != 1000 || !p.States[0].Polling || !strings.Contains(p.Source, "Linux 6.") {
			t.Errorf("%s: %+v", n, p)
		}
		for i, s := range p.States {
			if !s.PowerEstimated || s.Power <= 0 || s.Power > 1 {
				t.Errorf("%s state %d power %v", n, i, s.Power)
			}
			if i > 1 && s.Power > p.States[i-1].Power {
				t.Errorf("%s: %s draws more than the shallower %s", n, s.Name, p.States[i-1].Name)
			}
		}
	}
	spr, _ := Builtin("spr", 250)
	if spr.States[3].Name != "C6" || spr.States[3].ExitLatencyNs != 290_000 || spr.States[3].TargetResidencyNs != 800_000 {
		t.Errorf("spr C6 = %+v", spr.States[3])
	}
}

func TestRecordedProfile(t *testing.T) {
	nodrv := &trace.Metadata{CPUIdleDriver: "none", HZ: 250, KernelRelease: "6.18.44"}
	p, err := Recorded(nodrv)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.States) != 2 || p.States[0].Name != "POLL" || !p.States[0].Polling || p.States[1].Name != "HLT" ||
		p.States[1].ExitLatencyNs != 1000 || p.States[1].TargetResidencyNs != 1000 ||
		!strings.Contains(p.Source, "no cpuidle driver") || !strings.Contains(p.Source, "no governor ran") {
		t.Fatalf("no-driver profile = %+v", p)
	}
	withDrv := &trace.Metadata{CPUIdleDriver: "haltpoll", HZ: 1000, States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{
		{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		{Index: 0, Name: "POLL", Polling: true},
	}}}}
	p, err = Recorded(withDrv)
	if err != nil || p.HZ != 1000 || p.States[0].Name != "POLL" || p.States[1].Name != "haltpoll idle" {
		t.Fatalf("recorded = %+v, %v", p, err)
	}
	m, err := Measured(withDrv, map[string]uint64{"haltpoll idle": 16000, "POLL": 5})
	if err != nil || m.States[1].ExitLatencyNs != 16000 || m.States[0].ExitLatencyNs != 0 || !strings.Contains(m.Source, "p50") {
		t.Fatalf("measured = %+v, %v", m, err)
	}
	// The target stays the driver's, and the source says it is below.
	if m.States[1].TargetResidencyNs != 1000 || !strings.Contains(m.Source, "target residency of haltpoll idle kept as the driver gives it") {
		t.Errorf("measured: target %d ns, source %q", m.States[1].TargetResidencyNs, m.Source)
	}
	if m, _ := Measured(withDrv, map[string]uint64{"haltpoll idle": 800}); strings.Contains(m.Source, "target residency") {
		t.Errorf("a measured exit latency under the target: source %q", m.Source)
	}
}

func TestClassifyMiss(t *testing.T) {
	st := seedIntel(250).States
	tests := []struct {
		entered      int
		resid        uint64
		above, below bool
	}{
		{2, 5_000, true, false},      // C1E for 5us < 20us, shallower enabled
		{0, 100_000, false, true},    // POLL 100us ≥ C1's 2us
		{1, 3_000, false, false},     // C1 for 3us: 3-2=1 < C1E's 20
		{1, 25_000, false, true},     // C1 for 25us: 23 ≥ 20
		{1, 2_000, false, false},     // not above (== residency), not > exit latency
		{4, 1_000_000, false, false}, // deepest
	}
	for _, tc := range tests {
		a, b := ClassifyMiss(st, tc.entered, tc.resid)
		if a != tc.above || b != tc.below {
			t.Errorf("ClassifyMiss(%d, %d) = %v,%v want %v,%v", tc.entered, tc.resid, a, b, tc.above, tc.below)
		}
	}
	// Only the nearest enabled deeper state is examined.
	st2 := seedIntel(250).States
	st2[2].Disabled = true
	if _, b := ClassifyMiss(st2, 1, 60_000); b {
		t.Error("C1 60us with C1E disabled: C3 (100us) is the nearest enabled deeper state, not below")
	}
	if _, b := ClassifyMiss(st2, 1, 150_000); !b {
		t.Error("C1 150us: below (C3)")
	}
}

// Menu's typical-interval detector (get_typical_interval, 6.15+ two-sided).
func TestMenuTypicalInterval(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	f := menuFlagsFor(Version{6, 18, 44})
	tests := []struct {
		name string
		iv   [8]uint32
		want uint32
	}{
		{"all zero: none", [8]uint32{}, math.MaxUint32},
		{"steady 100us", [8]uint32{100, 100, 100, 100, 100, 100, 100, 100}, 100},
		{"small spread within 20us stddev", [8]uint32{90, 110, 95, 105, 100, 100, 98, 102}, 100},
		{"one high outlier dropped", [8]uint32{100, 100, 100, 100, 100, 100, 100, 5000}, 100},
		{"one low outlier dropped (two-sided)", [8]uint32{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1}, 1000},
		{"bimodal: the high half is trimmed, the low half is tight", [8]uint32{10, 10, 10, 10, 5000, 5000, 5000, 5000}, 10},
		{"spread: none", [8]uint32{100, 200, 400, 800, 1600, 3200, 6400, 12800}, math.MaxUint32},
		{"UINT_MAX markers ignored", [8]uint32{math.MaxUint32, 50, 50, 50, 50, 50, 50, 50}, 50},
	}
	for _, tc := range tests {
		m := newMenu(tab, &f)
		m.setIntervals(tc.iv)
		if got := m.typical(); got != tc.want {
			t.Errorf("%s: typical = %d, want %d", tc.name, got, tc.want)
		}
	}
	// 6.15–6.17 returned the max once 4–6 samples remained.
	f615 := menuFlagsFor(Version{6, 16, -1})
	m := newMenu(tab, &f615)
	m.setIntervals([8]uint32{100, 200, 400, 800, 1600, 3200, 6400, 12800})
	if got := m.typical(); got == math.MaxUint32 || got > 12800 {
		t.Errorf("6.16 spread: typical = %d, want the max of the remaining samples", got)
	}
	// Pre-6.15 trims only the top: a low outlier leaves the lone low
	// sample as the "typical" interval.
	f612 := menuFlagsFor(Version{6, 12, -1})
	m = newMenu(tab, &f612)
	m.setIntervals([8]uint32{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1})
	if got := m.typical(); got != 1 {
		t.Errorf("6.12 low outlier: typical = %d, want 1", got)
	}
}

// Known menu decisions on the seed Intel table at HZ=250.
func TestMenuDecisions(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	f := menuFlagsFor(Version{6, 18, 44})
	// Steady 100us idles with a far timer: the detector predicts 100us → C1E
	// (tr 20 ≤ 100 < C3's 100? C3 tr 100 ≤ 100 → C3), tick kept (prediction < tick).
	m := newMenu(tab, &f)
	for i := 0; i < 8; i++ {
		m.push(100)
	}
	idx, stop := m.selectState(&selInput{latReq: noLimit, sleepLen: 3_000_000, deltaTick: 3_000_000})
	if idx != 3 || stop {
		t.Errorf("steady 100us: idx=%d stop=%v, want C3 with the tick kept", idx, stop)
	}
	// Same with a 40us latency limit: C1E (10us) is the deepest allowed.
	idx, _ = m.selectState(&selInput{latReq: 40_000 - 8_000, sleepLen: 3_000_000, deltaTick: 3_000_000})
	if idx != 2 {
		t.Errorf("latency-limited: idx=%d, want C1E", idx)
	}
	// Fresh CPU, timer in 10ms, no history: deepest state, tick may stop.
	m = newMenu(tab, &f)
	idx, stop = m.selectState(&selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 2_000_000})
	if idx != 4 || !stop {
		t.Errorf("fresh, far timer: idx=%d stop=%v, want C6 and stop", idx, stop)
	}
	// Timer in 1us: POLL right away (next timer < C1 residency), tick kept.
	m = newMenu(tab, &f)
	idx, stop = m.selectState(&selInput{latReq: noLimit, sleepLen: 1_000, deltaTick: 1_000})
	if idx != 0 || stop {
		t.Errorf("imminent timer: idx=%d stop=%v, want POLL, tick kept", idx, stop)
	}
	// latency_req 0: state 0.
	idx, _ = m.selectState(&selInput{latReq: 0, sleepLen: 10_000_000, deltaTick: 10_000_000})
	if idx != 0 {
		t.Errorf("latency 0: idx=%d", idx)
	}
}

// margin=PCT never picks a deeper state than plain menu for the same
// decision (seed 002).
func TestMenuMarginNeverDeeper(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, prof := range []*Profile{seedIntel(250), seedIntel(1000), mustBuiltin(t, "spr", 250), mustBuiltin(t, "gnr", 1000)} {
		tab := newTable(prof, nil, nil, -1)
		plainF := menuFlagsFor(Version{6, 18, 44})
		marginF := plainF
		marginF.margin, marginF.marginPct = true, 25
		for trial := 0; trial < 20000; trial++ {
			a, b := newMenu(tab, &plainF), newMenu(tab, &marginF)
			var iv [8]uint32
			base := uint32(rng.IntN(3000) + 1)
			for i := range iv {
				iv[i] = base + uint32(rng.IntN(int(base/4)+1))
			}
			a.setIntervals(iv)
			b.setIntervals(iv)
			in := selInput{latReq: noLimit, sleepLen: int64(rng.IntN(20_000_000)), tickStopped: rng.IntN(2) == 0}
			in.deltaTick = in.sleepLen
			if !in.tickStopped {
				in.deltaTick = min(in.sleepLen, int64(rng.IntN(int(tab.tick))))
			}
			i1, _ := a.selectState(&in)
			i2, _ := b.selectState(&in)
			if i2 > i1 {
				t.Fatalf("%s: margin picked %d, plain menu %d for %+v iv=%v", prof.Name, i2, i1, in, iv)
			}
		}
	}
}

func mustBuiltin(t testing.TB, name string, hz int) *Profile {
	p, err := Builtin(name, hz)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exitMs is the named state's exit latency in ms: a stay that an interrupt
// ends counts it in its time (endSegment), so the synthetic traces' shares
// below add it to each period a policy puts in the state (their periods are
// recorded in POLL, which pays none).
func exitMs(t testing.TB, p *Profile, name string) float64 {
	t.Helper()
	for _, s := range p.States {
		if s.Name == name {
			return float64(s.ExitLatencyNs) / 1e6
		}
	}
	t.Fatalf("%s has no state %s", p.Name, name)
	return 0
}

func TestLadderPromotionAfterFour(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	g := newLadder(tab)
	in := &selInput{latReq: noLimit}
	// Starts at C1 (state 0 is POLL). Long stays promote after 4.
	want := []int{1, 1, 1, 2, 2, 2, 2, 3}
	g.reflect(1, 1_000_000, false, false)
	for i, w := range want {
		idx, stop := g.selectState(in)
		if idx != w || !stop {
			t.Fatalf("step %d: idx=%d stop=%v, want %d", i, idx, stop, w)
		}
		g.reflect(idx, 1_000_000, false, false)
	}
	// One short stay demotes at once (DEMOTION_COUNT 1): 40us in C3
	// (el 33us) leaves 7us, under the demotion time. (A stay shorter than
	// the exit latency does not: ladder_test.go.)
	g.reflect(3, 40_000, false, false)
	if idx, _ := g.selectState(in); idx != 2 {
		t.Fatalf("after a short stay: idx=%d, want 2", idx)
	}
	// A latency limit below the current state's exit latency forces demotion.
	g.reflect(2, 1_000_000, false, false)
	if idx, _ := g.selectState(&selInput{latReq: 5_000}); idx != 1 {
		t.Fatalf("forced demotion: idx=%d, want 1", idx)
	}
}

func TestHaltpollGrowShrink(t *testing.T) {
	tab := newTable(mustBuiltin(t, "haltpoll", 250), nil, nil, -1)
	g := newHaltpoll(tab, haltpollParams{guestNs: 200000, grow: 2, shrink: 2, growStart: 50000, allowShrink: true, shrinkToZero: true})
	in := &selInput{latReq: noLimit}
	if idx, _ := g.selectState(in); idx != 1 {
		t.Fatalf("window 0: idx=%d, want halt", idx)
	}
	steps := []struct {
		block int64
		want  uint64
	}{
		{30_000, 50_000},  // 0 < 30us ≤ 200us: grow from grow_start
		{80_000, 100_000}, // > 50us: ×2
		{90_000, 100_000}, // below the window: unchanged
		{150_000, 200_000},
		{190_000, 200_000}, // ≤ window: unchanged
		{500_000, 100_000}, // > guest_halt_poll_ns: ÷2
		{500_000, 50_000},
		{500_000, 0}, // 25us < grow_start: 0 (6.9)
	}
	for i, s := range steps {
		g.reflect(1, s.block, false, false)
		if g.limit != s.want {
			t.Fatalf("step %d (block %d): window %d, want %d", i, s.block, g.limit, s.want)
		}
	}
	// Poll while polls end on wake-ups; halt after a timed-out poll.
	g.limit = 100_000
	g.reflect(1, 1_000, false, false)
	if idx, stop := g.selectState(in); idx != 0 || stop {
		t.Fatalf("after halt: idx=%d stop=%v, want poll with tick", idx, stop)
	}
	g.reflect(0, 5_000, false, false)
	if idx, _ := g.selectState(in); idx != 0 {
		t.Fatalf("after woken poll: idx=%d, want poll", idx)
	}
	g.reflect(0, 100_000, false, true)
	if idx, _ := g.selectState(in); idx != 1 {
		t.Fatalf("after timed-out poll: idx=%d, want halt", idx)
	}
}

func TestTEOBasics(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	g := newTEO(tab)
	// Timer-driven 2ms sleeps: hits in C6's bin; teo picks C6.
	var idx int
	for i := 0; i < 50; i++ {
		idx, _ = g.selectState(&selInput{latReq: noLimit, sleepLen: 2_000_000, deltaTick: 2_000_000})
		g.reflect(idx, 2_000_000, false, false)
	}
	if idx != 4 {
		t.Fatalf("timer-driven: idx=%d, want C6", idx)
	}
	// Then 30us interrupts with the same timer: intercepts pull it shallower.
	for i := 0; i < 50; i++ {
		idx, _ = g.selectState(&selInput{latReq: noLimit, sleepLen: 2_000_000, deltaTick: 2_000_000})
		g.reflect(idx, 30_000, false, false)
	}
	if idx != 2 {
		t.Fatalf("intercepted at 30us: idx=%d, want C1E", idx)
	}
}

// ---- synthetic traces ----

type synth struct {
	rng     *rand.Rand
	periods []trace.IdlePeriod
	ios     []trace.BlockIO
}

// genTrace makes a mixed workload on ncpu CPUs: short IPI-woken idles,
// IO-completion wake-ups, timer sleeps, tick wake-ups, poll time-outs.
func genTrace(seed uint64, ncpu, perCPU int, pollLimit int64) *synth {
	s := &synth{rng: rand.New(rand.NewPCG(seed, seed))}
	for c := 0; c < ncpu; c++ {
		now := int64(1_000_000 + c*777)
		for i := 0; i < perCPU; i++ {
			var d int64
			p := trace.IdlePeriod{CPU: uint32(c), NextTimerKnown: true, TickStopped: trace.No, PollTimedOut: trace.Unknown}
			switch k := s.rng.IntN(10); {
			case k < 4:
				d = int64(2_000 + s.rng.IntN(60_000))
				p.WakeCause = trace.WakeIPIResched
				p.WakeRequestNs = uint64(now + d - 500)
			case k < 6:
				d = int64(20_000 + s.rng.IntN(200_000))
				p.WakeCause = trace.WakeIRQ
				io := trace.BlockIO{IssueCPU: uint32(c), CompleteCPU: uint32(c), IssueNs: uint64(now - 5_000), CompleteNs: uint64(now + d + 3_000)}
				s.ios = append(s.ios, io)
			case k < 8:
				d = int64(500_000 + s.rng.IntN(5_000_000))
				p.WakeCause = trace.WakeTimer
				p.TickStopped = trace.Yes
			case k < 9:
				d = int64(100_000 + s.rng.IntN(3_000_000))
				p.WakeCause = trace.WakeTick
			default:
				d = pollLimit
				p.WakeCause = trace.WakePollTimeout
				p.PollTimedOut = trace.Yes
			}
			p.EntryNs = uint64(now)
			p.ExitNs = uint64(now + d)
			p.NextTimerNs = d + int64(s.rng.IntN(4_000_000))
			if p.WakeCause == trace.WakeTimer {
				p.NextTimerNs = d
			}
			s.periods = append(s.periods, p)
			gap := int64(3_000 + s.rng.IntN(40_000))
			if p.WakeCause == trace.WakePollTimeout || p.WakeCause == trace.WakeTick {
				gap = 1_000
			}
			now += d + gap
		}
	}
	return s
}

func runReplay(t testing.TB, prof *Profile, meta *trace.Metadata, specs []string, s *synth) ([]Result, *Replay) {
	t.Helper()
	return runReplayWith(t, prof, meta, specs, s, nil)
}

// runReplayWith is runReplay with setup called on the replay before its
// first record (nil: none).
func runReplayWith(t testing.TB, prof *Profile, meta *trace.Metadata, specs []string, s *synth, setup func(*Replay)) ([]Result, *Replay) {
	t.Helper()
	var pols []Policy
	for _, sp := range specs {
		pols = append(pols, mustPolicy(t, sp))
	}
	rp, err := NewReplay(prof, meta, pols)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(rp)
	}
	res, err := replaySynth(rp, s)
	if err != nil {
		t.Fatal(err)
	}
	return res, rp
}

// replaySynth replays s on rp (its prepass, the periods, the requests) and
// finishes it.
func replaySynth(rp *Replay, s *synth) ([]Result, error) {
	prepassSynth(rp, s)
	for i := range s.periods {
		if err := rp.Idle(&s.periods[i]); err != nil {
			return nil, err
		}
	}
	for i := range s.ios {
		if err := rp.BlockIO(&s.ios[i]); err != nil {
			return nil, err
		}
	}
	return rp.Finish()
}

func TestOracleEnergyLowest(t *testing.T) {
	s := genTrace(7, 2, 4000, 20_000)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	for _, name := range []string{"spr", "hsw", "epyc", "haltpoll"} {
		specs := []string{"oracle", "menu", "teo", "ladder", "menu+margin=25", "menu+blkqos=10us/3ms", "menu+qos=5us",
			"menu+poll=tick16", "menu+kernel=6.12", "menu+kernel=7.1", "teo+maxcstate=1"}
		if name == "haltpoll" {
			specs = append(specs, "haltpoll")
		}
		res, _ := runReplay(t, mustBuiltin(t, name, 250), meta, specs, s)
		for _, r := range res[1:] {
			if r.EnergyBusyCoreSeconds < res[0].EnergyBusyCoreSeconds*(1-1e-9) {
				t.Errorf("%s: %s energy %.6g < oracle %.6g", name, r.Policy, r.EnergyBusyCoreSeconds, res[0].EnergyBusyCoreSeconds)
			}
			if r.EnergyRel < 1-1e-9 {
				t.Errorf("%s: %s energy_rel %v < 1", name, r.Policy, r.EnergyRel)
			}
		}
	}
}

// Every result accounts all idle time, and qos=X never picks a state whose
// exit latency exceeds X.
func TestQoSNeverAbove(t *testing.T) {
	s := genTrace(11, 2, 3000, 20_000)
	prof := mustBuiltin(t, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	for _, spec := range []string{"menu+qos=3us", "teo+qos=3us", "ladder+qos=3us", "oracle+qos=3us", "menu+qos=0"} {
		res, _ := runReplay(t, prof, meta, []string{spec}, s)
		r := res[0]
		limit := mustPolicy(t, spec).QoSNs
		for i, st := range prof.States {
			if int64(st.ExitLatencyNs) > limit && r.StateShare[st.Name] > 0 {
				t.Errorf("%s: %.3f of idle time in %s (exit latency %d ns)", spec, r.StateShare[st.Name], st.Name, st.ExitLatencyNs)
			}
			_ = i
		}
		if r.WakeLatencyNs.Max > uint64(limit) {
			t.Errorf("%s: wake latency max %d > %d", spec, r.WakeLatencyNs.Max, limit)
		}
		sum := 0.0
		for _, v := range r.StateShare {
			sum += v
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: state shares sum to %v", spec, sum)
		}
	}
}

// blkqos=10us/3ms keeps a CPU that issued IO out of states with exit
// latency above 10 µs for 3 ms (seed 003), and only then.
func TestBlkQoS(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	// CPU 0 issues IO at t=1ms; long timer sleeps follow on CPU 0 inside and
	// outside the 3 ms window; CPU 1 never issues.
	var s synth
	s.ios = []trace.BlockIO{{IssueCPU: 0, CompleteCPU: 0, IssueNs: 1_000_000, CompleteNs: 1_050_000}}
	mk := func(cpu uint32, e, d int64) trace.IdlePeriod {
		return trace.IdlePeriod{CPU: cpu, EntryNs: uint64(e), ExitNs: uint64(e + d), WakeCause: trace.WakeTimer,
			NextTimerKnown: true, NextTimerNs: d, TickStopped: trace.Yes}
	}
	s.periods = []trace.IdlePeriod{
		mk(0, 1_100_000, 1_500_000), // inside the window
		mk(1, 1_100_000, 1_500_000),
		mk(0, 2_700_000, 1_000_000), // entered at 2.7ms, inside
		mk(0, 4_500_000, 2_000_000), // entered at 4.5ms > 1+3: free
	}
	for _, spec := range []string{"menu+blkqos=10us/3ms", "teo+blkqos=10us/3ms", "oracle+blkqos=10us/3ms"} {
		var pols = []Policy{mustPolicy(t, spec)}
		rp, err := NewReplay(prof, meta, pols)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.ios {
			rp.PrepareBlockIO(&s.ios[i])
		}
		ps := rp.pols[0]
		var states []int
		for i := range s.periods {
			if err := rp.Idle(&s.periods[i]); err != nil {
				t.Fatal(err)
			}
			_ = ps
		}
		res, _ := rp.Finish()
		_ = states
		// CPU 0 spent 2.5 ms limited (C1E) and 2 ms free (C6); CPU 1 1.5 ms
		// free: each stay with its state's exit latency.
		c6 := res[0].StateShare["C6"]
		c6x, c1ex := exitMs(t, prof, "C6"), exitMs(t, prof, "C1E")
		wantC6 := (2.0 + c6x + 1.5 + c6x) / (1.5 + c1ex + 1.5 + c6x + 1.0 + c1ex + 2.0 + c6x)
		if math.Abs(c6-wantC6) > 1e-9 {
			t.Errorf("%s: C6 share %.4f, want %.4f (limited periods must stay in C1E or shallower)", spec, c6, wantC6)
		}
	}
}

// noDriverTrace is genTrace's workload on two CPUs as a kernel without a
// cpuidle driver runs it (HLT, state 1, every time; no poll time-outs),
// with its metadata and recorded profile.
func noDriverTrace(t *testing.T, seed uint64, perCPU int) (*trace.Metadata, *Profile, *synth) {
	t.Helper()
	meta := &trace.Metadata{CPUIdleDriver: "none", HZ: 250, KernelRelease: "6.18.44"}
	prof, err := Recorded(meta)
	if err != nil {
		t.Fatal(err)
	}
	s := genTrace(seed, 2, perCPU, 20_000)
	for i := range s.periods {
		s.periods[i].State = 1
		if s.periods[i].WakeCause == trace.WakePollTimeout {
			s.periods[i].WakeCause = trace.WakeIPIResched
			s.periods[i].PollTimedOut = trace.No
		}
	}
	return meta, prof, s
}

func TestRecordedAndAgreement(t *testing.T) {
	meta, prof, s := noDriverTrace(t, 3, 2000)
	res, rp := runReplay(t, prof, meta, []string{"recorded", "oracle", "ladder", "haltpoll", "menu"}, s)
	rec := res[0]
	if rec.StateShare["HLT"] != 1 || rec.IdlePeriods != 4000 {
		t.Fatalf("recorded = %+v", rec)
	}
	// No governor chose (no cpuidle driver): no policy has an agreement.
	for _, r := range res {
		if r.Agreement != nil {
			t.Errorf("%s: agreement %v on a trace without a cpuidle driver, want none", r.Policy, *r.Agreement)
		}
	}
	if rec.WakeLatencyNs.P50 != 1000 {
		t.Errorf("recorded wake p50 = %d, want 1000", rec.WakeLatencyNs.P50)
	}
	for _, r := range res {
		if r.IOLatencyNs == nil || r.IOLatencyNs.Count != uint64(len(s.ios)) {
			t.Errorf("%s: io = %+v, want %d completions", r.Policy, r.IOLatencyNs, len(s.ios))
		}
	}
	if st := rp.Stats(); st.IOWokeIdle == 0 || st.IOWokeIdle > st.IOCompletions {
		t.Errorf("stats = %+v", st)
	}
	// The recorded policy is refused on another profile.
	if _, err := NewReplay(mustBuiltin(t, "spr", 250), meta, []Policy{mustPolicy(t, "recorded")}); err == nil {
		t.Error("recorded on spr accepted")
	}
	if _, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "menu+disable=C6")}); err == nil ||
		!strings.Contains(err.Error(), `disable: no state "C6" in profile recorded (states: POLL, HLT)`) {
		t.Errorf("disable unknown state: %v", err)
	}
	// maxcstate beyond the table would disable nothing: refused as a
	// mistake (trial 11 item 7); the deepest index itself is accepted.
	if _, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "menu+maxcstate=9")}); err == nil ||
		!strings.Contains(err.Error(), `maxcstate: 9 is beyond profile recorded's deepest state, index 1 (HLT)`) {
		t.Errorf("maxcstate beyond the table: %v", err)
	} else if _, ok := err.(*PolicyError); !ok {
		t.Errorf("maxcstate beyond the table: %T, want a *PolicyError (a usage error)", err)
	}
	if _, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "menu+maxcstate=1")}); err != nil {
		t.Errorf("maxcstate=1 on a 2-state table: %v", err)
	}
}

// The recorded policy reproduces the kernel's above/below rule per period.
func TestRecordedAboveBelow(t *testing.T) {
	meta := &trace.Metadata{CPUIdleDriver: "intel_idle", HZ: 250, States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000},
		{Index: 2, Name: "C1E", ExitLatencyNs: 10000, TargetResidencyNs: 20000},
	}}}}
	prof, _ := Recorded(meta)
	ps := []trace.IdlePeriod{
		{State: 2, EntryNs: 0, ExitNs: 5_000, WakeCause: trace.WakeIRQ},        // above
		{State: 1, EntryNs: 10_000, ExitNs: 40_000, WakeCause: trace.WakeIRQ},  // below
		{State: 0, EntryNs: 50_000, ExitNs: 60_000, WakeCause: trace.WakeIRQ},  // below (C1 2us)
		{State: 2, EntryNs: 70_000, ExitNs: 170_000, WakeCause: trace.WakeIRQ}, // neither
	}
	res, _ := runReplay(t, prof, meta, []string{"recorded"}, &synth{periods: ps})
	if res[0].Above != 1 || res[0].Below != 2 {
		t.Fatalf("above/below = %d/%d, want 1/2", res[0].Above, res[0].Below)
	}
}

// A policy polling longer than the recorded kernel turns a recorded poll
// time-out plus deeper stay into one poll that catches the wake-up.
func TestPollChaining(t *testing.T) {
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	prof := seedIntel(250)
	ps := []trace.IdlePeriod{
		{State: 0, EntryNs: 1_000_000, ExitNs: 1_020_000, WakeCause: trace.WakePollTimeout, PollTimedOut: trace.Yes, NextTimerKnown: true, NextTimerNs: 50_000_000},
		{State: 2, EntryNs: 1_020_500, ExitNs: 1_090_000, WakeCause: trace.WakeIPIResched, NextTimerKnown: true, NextTimerNs: 50_000_000},
	}
	for _, tc := range []struct {
		spec string
		want uint64
	}{
		{"oracle", 10_000}, // one 90us episode: C1E is cheapest, wake pays 10us
	} {
		res, rp := runReplay(t, prof, meta, []string{tc.spec}, &synth{periods: ps})
		if rp.Stats().Episodes != 1 || rp.Stats().ChainedPollEnds != 1 {
			t.Fatalf("stats = %+v", rp.Stats())
		}
		if res[0].WakeLatencyNs.Count != 1 || res[0].WakeLatencyNs.Max != tc.want {
			t.Errorf("%s: wake latency %+v, want one wake paying %d", tc.spec, res[0].WakeLatencyNs, tc.want)
		}
	}
	// A fixed 250us poll window: menu polls through the whole 100us episode.
	// Seed the CPU with history of short idles so menu chooses POLL.
	var hist []trace.IdlePeriod
	now := int64(0)
	for i := 0; i < 16; i++ { // an imminent timer makes menu poll; it learns 1us intervals
		hist = append(hist, trace.IdlePeriod{State: 0, EntryNs: uint64(now), ExitNs: uint64(now + 1_000), WakeCause: trace.WakeIPIResched, NextTimerKnown: true, NextTimerNs: 1_500})
		now += 10_000
	}
	all := append(append([]trace.IdlePeriod(nil), hist...), ps...)
	specs := []string{"menu+poll=250us", "menu"}
	before, _ := runReplay(t, prof, meta, specs, &synth{periods: hist})
	after, _ := runReplay(t, prof, meta, specs, &synth{periods: all})
	last := func(k int) float64 {
		return after[k].WakeLatencyNs.Mean*float64(after[k].WakeLatencyNs.Count) - before[k].WakeLatencyNs.Mean*float64(before[k].WakeLatencyNs.Count)
	}
	if l := last(0); math.Abs(l) > 1e-6 {
		t.Errorf("menu+poll=250us: the 90us episode's wake paid %v ns, want 0 (caught polling)", l)
	}
	// With the 20us window menu re-selects at every time-out (the kernel
	// then folds KTIME_MAX into its intervals and keeps polling).
	sel := func(k int) uint64 { return after[k].Selections - before[k].Selections }
	if sel(0) != 1 || sel(1) < 4 {
		t.Errorf("selections in the last episode: %d (250us window), %d (20us), want 1 and ≥ 4", sel(0), sel(1))
	}
	// The poll counts: the 250us window caught the wake-up polling with no
	// time-out; the 20us one timed out before every selection but the first.
	woke := func(k int) uint64 { return after[k].WakeupsPolling - before[k].WakeupsPolling }
	timeouts := func(k int) uint64 { return *after[k].PollTimeouts - *before[k].PollTimeouts }
	if woke(0) != 1 || timeouts(0) != 0 || timeouts(1) != sel(1)-1 {
		t.Errorf("last episode: 250us window woke polling %d, %d time-outs; 20us window %d time-outs in %d selections; want 1, 0, %d",
			woke(0), timeouts(0), timeouts(1), sel(1), sel(1)-1)
	}
	if before[0].WakeupsPolling != 16 || before[0].WakeupsPolling > before[0].WakeLatencyNs.Count {
		t.Errorf("history: %d of %d wake-ups polling, want all 16", before[0].WakeupsPolling, before[0].WakeLatencyNs.Count)
	}
}

func TestAssumptions(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	a := Assumptions(prof, []Policy{mustPolicy(t, "menu"), mustPolicy(t, "oracle"), mustPolicy(t, "menu+blkqos=10us/3ms")})
	for _, w := range []string{"First-order", "exit latency", "HZ=250", "Oracle", "blkqos", "estimated", "Profile spr"} {
		if !strings.Contains(a, w) {
			t.Errorf("assumptions lack %q: %s", w, a)
		}
	}
	if strings.Contains(a, "\n") {
		t.Error("assumptions must be one paragraph")
	}
}

// TestAssumptionsSamePower: where estimated powers sit on the floor for
// several states, the report says the energy figures cannot tell them
// apart (a new user read hsw's oracle, which keeps to C7s, as a failed
// lower bound); with powers given, or one state on the floor, it does not.
func TestAssumptionsSamePower(t *testing.T) {
	const note = "all get 0.02, so the energy figures do not tell them apart"
	measured := mustBuiltin(t, "hsw", 250)
	measured.States = slices.Clone(measured.States)
	for i := range measured.States {
		measured.States[i].PowerEstimated = false
	}
	oneDeep := mkProfile("one", 250, []State{{Name: "C1", ExitLatencyNs: 2000, TargetResidencyNs: 2000}, {Name: "C6", ExitLatencyNs: 600_000, TargetResidencyNs: 1_800_000}})
	for _, tc := range []struct {
		prof *Profile
		want string
	}{
		{mustBuiltin(t, "hsw", 250), "C7s, C8, C9, C10 " + note},
		{measured, ""},
		{oneDeep, ""},
	} {
		a := Assumptions(tc.prof, []Policy{mustPolicy(t, "oracle")})
		if got := strings.Contains(a, note); got != (tc.want != "") || (tc.want != "" && !strings.Contains(a, tc.want)) {
			t.Errorf("%s: want %q (or none if empty) in: %s", tc.prof.Name, tc.want, a)
		}
	}
}

// ---- benchmarks ----

// benchPeriods is a fixed in-memory period stream replayed round-robin so
// the benchmark measures the replay, not the generator; times are shifted
// every round so they keep increasing.
func benchReplay(b *testing.B, specs []string) {
	s := genTrace(5, 4, 1<<14, 20_000)
	prof := mustBuiltin(b, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	benchPeriods(b, prof, meta, specs, s.periods)
}

// benchPeriods replays periods round-robin b.N times through specs, every
// round shifted past the previous one so each CPU's times keep increasing.
func benchPeriods(b *testing.B, prof *Profile, meta *trace.Metadata, specs []string, periods []trace.IdlePeriod) {
	var pols []Policy
	for _, sp := range specs {
		pols = append(pols, mustPolicy(b, sp))
	}
	rp, err := NewReplay(prof, meta, pols)
	if err != nil {
		b.Fatal(err)
	}
	var span uint64
	for _, p := range periods {
		span = max(span, p.ExitNs, p.EntryNs)
	}
	span += 1_000_000
	n := len(periods)
	p := trace.IdlePeriod{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src := &periods[i%n]
		shift := uint64(i/n) * span
		p = *src
		p.EntryNs += shift
		p.ExitNs += shift
		if err := rp.Idle(&p); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "periods/s")
}

// BenchmarkReplayMenuRealTrace: menu on the recorded profile over the real
// testdata/demo.trace (78k periods on 2 CPUs), decoded into memory before
// the timer starts and replayed round-robin like the synthetic benchmark.
func BenchmarkReplayMenuRealTrace(b *testing.B) {
	r, err := trace.Open(filepath.Join("..", "..", "testdata", "demo.trace"))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var periods []trace.IdlePeriod
	if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error { periods = append(periods, *p); return nil }}); err != nil {
		b.Fatal(err)
	}
	prof, err := Recorded(r.Meta)
	if err != nil {
		b.Fatal(err)
	}
	benchPeriods(b, prof, r.Meta, []string{"menu"}, periods)
}

// BenchmarkReplayMenu: menu on the spr profile over a large synthetic trace
// (4 CPUs × 16384 periods, replayed round-robin with increasing times).
func BenchmarkReplayMenu(b *testing.B)       { benchReplay(b, []string{"menu"}) }
func BenchmarkReplayTEO(b *testing.B)        { benchReplay(b, []string{"teo"}) }
func BenchmarkReplayOracle(b *testing.B)     { benchReplay(b, []string{"oracle"}) }
func BenchmarkReplayMenuBlkQoS(b *testing.B) { benchReplay(b, []string{"menu+blkqos=10us/3ms"}) }
func BenchmarkReplayFivePolicies(b *testing.B) {
	benchReplay(b, []string{"menu", "menu+margin=25", "teo", "ladder", "oracle"})
}

// Recorded PM QoS changes bound every policy from their time on: the
// global limit (cpu_dma_latency) on every CPU, a CPU's resume latency on
// that CPU, the smaller of the two where both hold (model review B7).
func TestRecordedPMQoSChanges(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250, FormatVersion: 1,
		PMQoS:  trace.PMQoS{CPUDMALatencyUs: trace.PMQoSNoGlobalLimitUs, ResumeLatencyUs: []int64{-1, -1}},
		Inputs: trace.Inputs{PMQoSTrace: true}}
	// Fed out of time order, as the ring buffer may hand them over across
	// CPUs.
	changes := []trace.PMQoSChange{
		{TimeNs: 3_000_000, CPU: 1, LimitUs: -1, PrevUs: 0},                                         // CPU 1's own limit gone
		{TimeNs: 1_000_000, CPU: 1, LimitUs: 0, PrevUs: -1},                                         // CPU 1 "n/a": polling only
		{TimeNs: 5_000_000, CPU: trace.PMQoSGlobal, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 5}, // and the global one
		{TimeNs: 2_500_000, CPU: trace.PMQoSGlobal, LimitUs: 5, PrevUs: trace.PMQoSNoGlobalLimitUs}, // everyone within 5 µs
	}
	mk := func(cpu uint32, e, d int64) trace.IdlePeriod {
		return trace.IdlePeriod{CPU: cpu, EntryNs: uint64(e), ExitNs: uint64(e + d), WakeCause: trace.WakeTimer,
			NextTimerKnown: true, NextTimerNs: d, TickStopped: trace.Yes}
	}
	periods := []trace.IdlePeriod{
		mk(0, 1_100_000, 1_000_000), // free: C6
		mk(1, 1_100_000, 1_300_000), // CPU 1 at 0 µs: POLL
		mk(0, 2_700_000, 1_500_000), // global 5 µs: C1E at most
		mk(1, 3_500_000, 1_000_000), // CPU 1 free of its own, global 5 µs
		mk(0, 5_500_000, 2_000_000), // all free again: C6
	}
	for _, spec := range []string{"menu", "teo", "oracle", "menu+qos=10us"} {
		rp, err := NewReplay(prof, meta, []Policy{mustPolicy(t, spec)})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := rp.Prepass(nil)
		if !ok || v.PMQoS == nil {
			t.Fatalf("%s: the prepass does not ask for the PM QoS changes", spec)
		}
		for i := range changes {
			if err := v.PMQoS(&changes[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i := range periods {
			if err := rp.Idle(&periods[i]); err != nil {
				t.Fatal(err)
			}
		}
		res, err := rp.Finish()
		if err != nil {
			t.Fatal(err)
		}
		share := res[0].StateShare
		// Each stay with its state's exit latency; the limited ones in C1E.
		c6x, c1ex := exitMs(t, prof, "C6"), exitMs(t, prof, "C1E")
		if spec == "menu+qos=10us" { // its own limit keeps C6 out throughout
			c6x = c1ex
		}
		total := 1.0 + c6x + 1.3 + 1.5 + c1ex + 1.0 + c1ex + 2.0 + c6x
		wantC6, wantPoll := (1.0+2.0+2*c6x)/total, 1.3/total
		if spec == "menu+qos=10us" {
			wantC6 = 0
		}
		if math.Abs(share["C6"]-wantC6) > 1e-9 || math.Abs(share["POLL"]-wantPoll) > 1e-9 {
			t.Errorf("%s: C6 %.4f and POLL %.4f of idle time, want %.4f and %.4f (shares %v)", spec, share["C6"], share["POLL"], wantC6, wantPoll, share)
		}
		if st := rp.Stats(); st.PMQoSChanges != uint64(len(changes)) {
			t.Errorf("%s: %d changes counted, want %d", spec, st.PMQoSChanges, len(changes))
		}
	}
}

// The limit before the first recorded change is that change's previous
// value, not the metadata's: the metadata was read before the programs
// attached, and a change in between shows only there.
func TestPMQoSBeforeFirstChange(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250, FormatVersion: 1,
		PMQoS:  trace.PMQoS{CPUDMALatencyUs: trace.PMQoSNoGlobalLimitUs},
		Inputs: trace.Inputs{PMQoSTrace: true}}
	rp, err := NewReplay(prof, meta, []Policy{mustPolicy(t, "oracle")})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := rp.Prepass(nil)
	q := trace.PMQoSChange{TimeNs: 3_000_000, CPU: trace.PMQoSGlobal, LimitUs: trace.PMQoSNoGlobalLimitUs, PrevUs: 5}
	if err := v.PMQoS(&q); err != nil {
		t.Fatal(err)
	}
	for _, p := range []trace.IdlePeriod{
		{CPU: 0, EntryNs: 1_000_000, ExitNs: 2_000_000, WakeCause: trace.WakeTimer, NextTimerKnown: true, NextTimerNs: 1_000_000},
		{CPU: 0, EntryNs: 4_000_000, ExitNs: 5_000_000, WakeCause: trace.WakeTimer, NextTimerKnown: true, NextTimerNs: 1_000_000},
	} {
		if err := rp.Idle(&p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rp.Finish()
	if err != nil {
		t.Fatal(err)
	}
	// 1 ms in C1E, then 1 ms in C6, each with its exit latency.
	c6x, c1ex := exitMs(t, prof, "C6"), exitMs(t, prof, "C1E")
	if c6, want := res[0].StateShare["C6"], (1+c6x)/(2+c6x+c1ex); math.Abs(c6-want) > 1e-9 {
		t.Errorf("C6 share %.3f, want %.3f: the first period ran under the 5 µs limit the change's previous value gives", c6, want)
	}
}

// Without wake causes no completion can be said to have woken an idle
// CPU: io_woke_idle is unknown (nil), not 0.
func TestIOWokeIdleUnknownWithoutWakeCauses(t *testing.T) {
	s := genTrace(5, 2, 2000, 20_000)
	if len(s.ios) == 0 {
		t.Fatal("the synthetic trace has no IO")
	}
	for _, wakeCauses := range []bool{true, false} {
		meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
		meta.Inputs.WakeCauses, meta.Inputs.BlockIO = wakeCauses, true
		if !wakeCauses { // as an import of a capture without the wake events has them
			for i := range s.periods {
				s.periods[i].WakeCause, s.periods[i].WakeIRQ = trace.WakeUnknown, -1
			}
		}
		res, _ := runReplay(t, mustBuiltin(t, "spr", 250), meta, []string{"menu", "teo"}, s)
		if got := res[0].IOWokeIdle; (got != nil) != wakeCauses || res[0].IOLatencyNs == nil {
			t.Errorf("wake causes %v: io_woke_idle %v, IO latency %v", wakeCauses, got, res[0].IOLatencyNs)
		}
		// teo's changes against menu: which IO it changed is unknown too.
		js, err := json.Marshal(res[1].Changes)
		if err != nil {
			t.Fatal(err)
		}
		if unknown := strings.Contains(string(js), `"io_changed":null,"io_woke_idle":null`); unknown == wakeCauses || strings.Count(string(js), `"io_woke_idle"`) != 1 {
			t.Errorf("wake causes %v: changes %s", wakeCauses, js)
		}
	}
}

// A completion that woke a CPU from a recorded state the profile lacks
// still loses that state's exit latency under a policy: the IO latency on
// a POLL-only table is the same as on one whose other states are
// disabled, the recorded latency less the recorded C6's 100 µs.
func TestIOLatencyWithoutTheRecordedState(t *testing.T) {
	tab := []trace.StateInfo{
		{Index: 0, Name: "POLL", Polling: true},
		{Index: 1, Name: "C1", ExitLatencyNs: 1_000, TargetResidencyNs: 1_000},
		{Index: 2, Name: "C6", ExitLatencyNs: 100_000, TargetResidencyNs: 400_000},
	}
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250, CPUIdleDriver: "intel_idle", CPUIdleGovernor: "menu",
		States: []trace.CPUStates{{CPU: 0, States: tab}}, Inputs: trace.Inputs{WakeCauses: true, BlockIO: true}}
	var s synth
	for i := range 50 {
		e := int64(1_000_000 + i*2_000_000)
		s.periods = append(s.periods, trace.IdlePeriod{CPU: 0, State: 2, EntryNs: uint64(e), ExitNs: uint64(e + 1_000_000),
			WakeCause: trace.WakeIRQ, WakeIRQ: 24, NextTimerKnown: true, NextTimerNs: 3_000_000, TickStopped: trace.Yes})
		s.ios = append(s.ios, trace.BlockIO{IssueCPU: 0, CompleteCPU: 0, IssueNs: uint64(e - 500_000), CompleteNs: uint64(e + 1_000_000 - 50_000)})
	}
	pollOnly := mkProfile("poll-only", 250, []State{{Name: "POLL", Polling: true}})
	disabled := mkProfile("disabled", 250, []State{{Name: "POLL", Polling: true},
		{Name: "C1", ExitLatencyNs: 1_000, TargetResidencyNs: 1_000, Disabled: true}, {Name: "C6", ExitLatencyNs: 100_000, TargetResidencyNs: 400_000, Disabled: true}})
	const want = 1_450_000 - 100_000 // issue to completion, less the recorded C6's exit
	for _, prof := range []*Profile{pollOnly, disabled} {
		res, _ := runReplay(t, prof, meta, []string{"menu"}, &s)
		if got := res[0].IOLatencyNs; got == nil || got.Count != 50 || math.Abs(got.Mean-want) > 1 {
			t.Errorf("%s: IO latency %+v, want a mean of %d ns over 50", prof.Name, got, want)
		}
	}
}

// menu's stopped-tick override (menu_select: tick_nohz_tick_stopped() and
// a prediction under a tick take the next timer), counted for whatif's
// margin reason: the selections that reach it, and where margin=
// predicts other than the next timer.
func TestMenuStoppedOverrideCounts(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1) // tick 4 ms
	const timer = 3_000_000
	for _, tc := range []struct {
		name                string
		margin              bool
		pct                 float64
		stopped             bool
		predicted, want     uint64
		wantRuns, wantOther uint64
	}{
		{"tick running: no override", false, 0, false, 100_000, 100_000, 0, 0},
		{"a prediction of a tick or more: no override", false, 0, true, 4_000_000, 4_000_000, 0, 0},
		{"menu takes the next timer", false, 0, true, 100_000, timer, 1, 0},
		{"margin 25 % predicts 125 µs", true, 25, true, 100_000, 125_000, 1, 1},
		{"margin reaching the timer takes it", true, 5000, true, 100_000, timer, 1, 0},
	} {
		f := menuFlagsFor(Version{6, 18, 44})
		f.margin, f.marginPct = tc.margin, tc.pct
		m := newMenu(tab, &f)
		m.nextTimer = timer
		p := tc.predicted
		m.stoppedOverride(&p, &selInput{tickStopped: tc.stopped})
		if p != tc.want || m.tally.stoppedRuns != tc.wantRuns || m.tally.marginOther != tc.wantOther {
			t.Errorf("%s: predicted %d, runs %d, other %d; want %d, %d, %d", tc.name, p, m.tally.stoppedRuns, m.tally.marginOther, tc.want, tc.wantRuns, tc.wantOther)
		}
	}
}

// TestSetWindowIsTheTraceCutAtItsEnd: a replay told where the recording
// ended (SetWindow) gives what a replay of only the periods entered up to
// then gives, every policy's every figure: the periods after it are
// counted apart (AfterEnd) and change nothing.
func TestSetWindowIsTheTraceCutAtItsEnd(t *testing.T) {
	s := genTrace(7, 2, 600, 50_000)
	var entries []uint64
	for _, p := range s.periods {
		entries = append(entries, p.EntryNs)
	}
	slices.Sort(entries)
	end := entries[len(entries)/2] + 1 // a period that straddles the end is replayed
	cut := &synth{ios: s.ios}
	for _, p := range s.periods {
		if p.EntryNs <= end {
			cut.periods = append(cut.periods, p)
		}
	}
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	specs := []string{"menu", "teo", "ladder", "oracle", "menu+blkqos=10us/3ms", "menu+margin=25"}
	replay := func(s *synth) ([]Result, Stats) {
		res, rp := runReplayWith(t, mustBuiltin(t, "spr", 250), meta, specs, s, func(rp *Replay) { rp.SetWindow(0, end) })
		return res, rp.Stats()
	}
	full, fullStats := replay(s)
	short, shortStats := replay(cut)
	after := uint64(len(s.periods) - len(cut.periods))
	if fullStats.AfterEnd != after || after == 0 || shortStats.AfterEnd != 0 || fullStats.IdlePeriods != uint64(len(cut.periods)) {
		t.Errorf("after the end %d, replayed %d; want %d (of %d) and %d", fullStats.AfterEnd, fullStats.IdlePeriods, after, len(s.periods), len(cut.periods))
	}
	var ioAfter uint64
	for _, b := range s.ios {
		if b.CompleteNs > end {
			ioAfter++
		}
	}
	if fullStats.IOOutsideWindow != ioAfter || ioAfter == 0 {
		t.Errorf("IO completions outside the window %d, want %d (of %d)", fullStats.IOOutsideWindow, ioAfter, len(s.ios))
	}
	fullStats.AfterEnd = 0
	if fullStats != shortStats {
		t.Errorf("stats %+v, the cut trace's %+v", fullStats, shortStats)
	}
	if !reflect.DeepEqual(full, short) {
		for i := range full {
			if !reflect.DeepEqual(full[i], short[i]) {
				t.Errorf("%s: the whole trace with its end gives %+v, the trace cut there %+v", specs[i], full[i], short[i])
			}
		}
	}
}

// TestStayCountsOwnExitLatency: a stay an interrupt ended lasts, in the
// policy's state, until the interrupt (the recorded exit less the recorded
// state's exit latency) plus that state's own exit latency: what the
// kernel's time counter would show. A 1 ms period recorded in spr's C6
// (290 µs exit latency) is 712 µs in C1E (2 µs) when C6 is off, and 710
// µs polling under qos=0. Its energy covers the whole recorded 1 ms in
// every state: the work is the same, so the 288 µs C1E saves is idle time
// later, not time for nothing (charged as counted, polling had cost less
// than halting wherever periods are as short as exit latencies). The
// oracle chooses for that 1 ms too: past C6's 800 µs break-even.
func TestStayCountsOwnExitLatency(t *testing.T) {
	prof := mustBuiltin(t, "spr", 250)
	// The recorded table: the exit latency the recorded stay paid.
	meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, States: []trace.CPUStates{{CPU: 0, States: prof.StateInfos()}}}
	const entry, d = 1_000_000, 1_000_000
	s := &synth{periods: []trace.IdlePeriod{{CPU: 0, State: 3, EntryNs: entry, ExitNs: entry + d, WakeCause: trace.WakeTimer, WakeIRQ: -1,
		NextTimerKnown: true, NextTimerNs: d, TickStopped: trace.Yes, TickStoppedBefore: trace.Yes}}}
	res, rp := runReplay(t, prof, meta, []string{"menu", "menu+disable=C6", "oracle", "menu+qos=0"}, s)
	c6 := int64(prof.States[3].ExitLatencyNs)
	for k, r := range res {
		if len(r.StateShare) == 0 {
			t.Fatalf("%s: no state", r.Policy)
		}
		tab := rp.pols[k].tab
		for name, share := range r.StateShare {
			if share == 0 {
				continue
			}
			i := slices.IndexFunc(prof.States, func(st State) bool { return st.Name == name })
			want := int64(d) // the recorded state: as it was recorded
			if i != 3 {
				want = d - c6 + tab.el[i]
			}
			wantEnergy := tab.power[i]*float64(d)/1e9 + tab.overhead[i]/1e9
			got := rp.pols[k].timeNs[i]
			if share != 1 || got != want || math.Abs(r.EnergyBusyCoreSeconds-wantEnergy) > 1e-12 || r.StateTimeNs != uint64(want) || r.RecordedTimeNs != d {
				t.Errorf("%s: %s share %.3f for %d ns, energy %.9g; want one state for %d ns, energy %.9g", r.Policy, name, share, got, r.EnergyBusyCoreSeconds, want, wantEnergy)
			}
		}
	}
	if res[1].StateShare["C1E"] != 1 {
		t.Errorf("menu+disable=C6 chose %v, want C1E", res[1].StateShare)
	}
	if res[2].StateShare["C6"] != 1 {
		t.Errorf("the oracle chose %v for a 1 ms period, want C6 (800 µs break-even)", res[2].StateShare)
	}
	if res[3].StateShare["POLL"] != 1 {
		t.Fatalf("menu+qos=0 chose %v, want POLL", res[3].StateShare)
	}
	// Polling costs more than halting over the same time, however much
	// sooner it is left.
	if !(res[3].EnergyBusyCoreSeconds > res[1].EnergyBusyCoreSeconds && res[1].EnergyBusyCoreSeconds > res[0].EnergyBusyCoreSeconds) {
		t.Errorf("energy: POLL %.9g, C1E %.9g, C6 %.9g; want POLL > C1E > C6",
			res[3].EnergyBusyCoreSeconds, res[1].EnergyBusyCoreSeconds, res[0].EnergyBusyCoreSeconds)
	}
}

// TestUnrecordedCPUsIOUnknown: a completion on a CPU the recording left
// out (record --cpus), or a waiting task that ran on one, may have woken
// it from idle or not: the replay counts them as unknown, keeps their
// recorded latency, and does not count them among those that woke none.
func TestUnrecordedCPUsIOUnknown(t *testing.T) {
	const ms = 1_000_000
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250, NumCPUs: 2, RecordedCPUs: []int{0},
		Inputs: trace.Inputs{WakeCauses: true, BlockIO: true, TaskIO: true}}
	s := &synth{}
	for i := range 10 {
		entry := uint64(1000*ms + i*ms)
		s.periods = append(s.periods, trace.IdlePeriod{CPU: 0, State: 1, EntryNs: entry, ExitNs: entry + 400_000, WakeCause: trace.WakeIRQ, WakeIRQ: 11})
		done := entry + 390_000
		io := trace.BlockIO{IssueNs: entry - 50_000, CompleteNs: done, IssueCPU: 0, CompleteCPU: 0, Bytes: 4096,
			Tid: 7, TaskWokenNs: done + 1000, TaskRunNs: done + 20_000, TaskCPU: 1} // its task ran on CPU 1
		if i%2 == 1 {
			io.CompleteCPU, io.TaskCPU = 1, 0 // completed on CPU 1, the task on 0
		}
		s.ios = append(s.ios, io)
	}
	res, rp := runReplay(t, mustBuiltin(t, "spr", 250), meta, []string{"menu"}, s)
	st := rp.Stats()
	if st.IOCompletions != 10 || st.IOWokeIdle != 5 || st.IOWokeUnknown != 5 || st.TaskWokeUnknown != 5 {
		t.Errorf("completions %d, woke %d, unknown %d, task unknown %d; want 10, 5, 5, 5", st.IOCompletions, st.IOWokeIdle, st.IOWokeUnknown, st.TaskWokeUnknown)
	}
	if w := res[0].IOWokeIdle; w == nil || *w != 5 {
		t.Errorf("io_woke_idle %v, want 5", w)
	}
}
