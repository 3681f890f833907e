package model

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestProfilePrintedReadsBack: what `idletrace profiles NAME --format json`
// prints (the Profile itself, times in ns) reads back as the same profile
// (issue 11: one profile schema, written and read).
func TestProfilePrintedReadsBack(t *testing.T) {
	for _, name := range BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			want, err := Builtin(name, 0)
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseProfile(name+".json", data, 0)
			if err != nil {
				t.Fatalf("the printed profile does not read back: %v", err)
			}
			if got.Name != want.Name || got.HZ != want.HZ || !reflect.DeepEqual(got.States, want.States) {
				t.Errorf("read back %+v, printed %+v", got, want)
			}
		})
	}
}

func TestProfileTimeUnits(t *testing.T) {
	for _, tc := range []struct {
		name, state, err string
		exitNs           uint64
	}{
		{"us", `{"name":"C1","exit_latency_us":2,"target_residency_us":2}`, "", 2000},
		{"ns", `{"name":"C1","exit_latency_ns":2500,"target_residency_ns":3000}`, "", 2500},
		{"both", `{"name":"C1","exit_latency_us":2,"exit_latency_ns":2000,"target_residency_us":2}`, "states[0].exit_latency_us: give exit_latency_us or exit_latency_ns, not both", 0},
		// A missing time is named as the state spells its other time.
		{"ns, exit missing", `{"name":"C1","target_residency_ns":3000}`, "states[0].exit_latency_ns: missing", 0},
		{"us, exit missing", `{"name":"C1","target_residency_us":3}`, "states[0].exit_latency_us: missing", 0},
		{"ns, residency missing", `{"name":"C1","exit_latency_ns":3000}`, "states[0].target_residency_ns: missing", 0},
		{"us, residency missing", `{"name":"C1","exit_latency_us":3}`, "states[0].target_residency_us: missing", 0},
		{"neither", `{"name":"C1"}`, "states[0].exit_latency_us (or exit_latency_ns): missing", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parseStates(t, tc.state, tc.err)
			if p == nil {
				return
			}
			if p.States[0].ExitLatencyNs != tc.exitNs {
				t.Errorf("exit latency %d ns, want %d", p.States[0].ExitLatencyNs, tc.exitNs)
			}
		})
	}
}

// TestProfileEditedPower: a power given in a file is used, also where the
// file (as `profiles --format json` writes it) marks it estimated: one
// edited there is the user's (a new user's edited C6 power was silently
// estimated again), and the profile's source says it is no estimate of
// the state's times (as it is not where the times were edited instead);
// an unedited one stays marked estimated; one out of range is refused
// either way.
func TestProfileEditedPower(t *testing.T) {
	c6 := State{Name: "C6", ExitLatencyNs: 290_000, TargetResidencyNs: 800_000}
	est := EstimatePower(c6)
	for _, tc := range []struct {
		name, power string
		want        float64
		estimated   bool
		err, note   string
	}{
		{"unedited", `"power":` + strconvF(est) + `,"power_estimated":true`, est, true, "", ""},
		{"edited, marked estimated", `"power":0.5,"power_estimated":true`, 0.5, false, "", "C6's power 0.5, marked estimated, is not the estimate of its times"},
		{"given", `"power":0.5`, 0.5, false, "", ""},
		{"absent", ``, est, true, "", ""},
		{"out of range, marked estimated", `"power":5,"power_estimated":true`, 0, false, "states[0].power: must be between 0 and 2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := `{"name":"C6","exit_latency_ns":290000,"target_residency_ns":800000`
			if tc.power != "" {
				state += "," + tc.power
			}
			p := parseStates(t, state+"}", tc.err)
			if p == nil {
				return
			}
			if s := p.States[0]; s.Power != tc.want || s.PowerEstimated != tc.estimated {
				t.Errorf("power %v (estimated %t), want %v (%t)", s.Power, s.PowerEstimated, tc.want, tc.estimated)
			}
			if noted := strings.Contains(p.Source, "marked estimated"); noted != (tc.note != "") || !strings.Contains(p.Source, tc.note) {
				t.Errorf("source %q, want the note %q", p.Source, tc.note)
			}
		})
	}
}

func strconvF(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestProfileUnitDoubts: times that look given in the other unit (µs
// numbers in _ns fields, ns numbers in _us fields) are named in the
// profile's source, which whatif prints; plausible ones are not.
func TestProfileUnitDoubts(t *testing.T) {
	for _, tc := range []struct {
		name, states, want string
	}{
		{"plausible", `{"name":"POLL","polling":true,"exit_latency_ns":0,"target_residency_ns":0},{"name":"C1","exit_latency_ns":1000,"target_residency_ns":1000},{"name":"C6","exit_latency_us":290,"target_residency_us":800}`, ""},
		{"µs in ns fields", `{"name":"C1","exit_latency_ns":1,"target_residency_ns":1},{"name":"C6","exit_latency_ns":290,"target_residency_ns":800}`,
			"check the units of C1's exit_latency_ns 1 ns, C1's target_residency_ns 1 ns, C6's exit_latency_ns 290 ns, C6's target_residency_ns 800 ns"},
		{"ns in µs fields", `{"name":"C6","exit_latency_us":290000,"target_residency_us":800000}`,
			"check the units of C6's exit_latency_us 290000 µs, C6's target_residency_us 800000 µs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parseStates(t, tc.states, "")
			if got := strings.Contains(p.Source, "check the units"); got != (tc.want != "") || !strings.Contains(p.Source, tc.want) {
				t.Errorf("source %q, want %q", p.Source, tc.want)
			}
		})
	}
}

// parseStates parses a profile file holding states (JSON objects, comma
// separated); where wantErr is given, it checks the error says it and
// returns nil.
func parseStates(t *testing.T, states, wantErr string) *Profile {
	t.Helper()
	p, err := ParseProfile("p.json", []byte(`{"name":"p","states":[`+states+`]}`), 250)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want %q", err, wantErr)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}
