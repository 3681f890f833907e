package model

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// FuzzProfileReplay: a profile file is user input. Whatever its bytes,
// ParseProfile gives a profile or an error (never a panic), and a profile
// it accepts replays under every governor with figures a report can print:
// every period replayed, state shares of the periods' time that add up to
// one, finite energy, ordered latency quantiles. (`go test -fuzz
// FuzzProfileReplay ./pkg/model`; the seeds run in every `go test`.)
func FuzzProfileReplay(f *testing.F) {
	for _, name := range BuiltinNames() {
		p, err := Builtin(name, 250)
		if err != nil {
			f.Fatal(err)
		}
		data, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"name":"one","states":[{"name":"C1","exit_latency_us":0,"target_residency_us":0}]}`,
		`{"name":"poll","states":[{"name":"POLL","exit_latency_us":0,"target_residency_us":0,"polling":true}]}`,
		`{"name":"deep","hz":100,"states":[{"name":"POLL","exit_latency_us":0,"target_residency_us":0,"polling":true},` +
			`{"name":"C1","exit_latency_us":1,"target_residency_us":1},{"name":"C6","exit_latency_us":10000000,"target_residency_us":10000000,"disabled":true}]}`,
		`{"name":"flat","states":[{"name":"A","exit_latency_ns":5,"target_residency_ns":5,"power":0},{"name":"B","exit_latency_ns":5,"target_residency_ns":5,"power":2}]}`,
		`{"name":"tiny","states":[{"name":"POLL","exit_latency_ns":0,"target_residency_ns":0,"polling":true},{"name":"C1","exit_latency_ns":1,"target_residency_ns":1}]}`,
	} {
		f.Add([]byte(s))
	}
	s := genTrace(3, 2, 150, 20_000)
	specs := []string{"recorded", "menu", "menu+kernel=6.1", "menu+kernel=6.12", "teo", "teo+kernel=6.1", "teo+kernel=6.12",
		"ladder", "haltpoll", "oracle", "menu+qos=5us", "teo+maxcstate=1", "menu+poll=tick16",
		"menu+kernel=5.10", "teo+kernel=5.4", "ladder+kernel=4.19", "menu+maxcstate=0", "teo+qos=0",
		// POLL only, on the first-residency rule: a profile's 1 ns target residency once hung the replay.
		"menu+poll=first-residency+qos=0", "menu+kernel=5.10+maxcstate=0"}
	var pols []Policy
	for _, sp := range specs {
		p, err := ParsePolicy(sp)
		if err != nil {
			f.Fatal(err)
		}
		pols = append(pols, p)
	}
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	f.Fuzz(func(t *testing.T, data []byte) {
		prof, err := ParseProfile("fuzz.json", data, 250)
		if err != nil {
			if prof != nil {
				t.Fatalf("profile and error both returned: %v", err)
			}
			return
		}
		replayed := 0
		defer func() {
			if replayed == 0 {
				t.Error("an accepted profile that no policy replays")
			}
		}()
		for _, pol := range pols {
			rp, err := NewReplay(prof, meta, []Policy{pol})
			if err != nil {
				continue // a policy the table cannot run (haltpoll without a polling state): refused, not replayed
			}
			replayed++
			res, err := replaySynth(rp, s)
			if err != nil {
				t.Fatalf("%s: %v", pol.Spec, err)
			}
			checkResultSane(t, pol.Spec, res[0], uint64(len(s.periods)))
		}
	})
}

func checkResultSane(t *testing.T, spec string, r Result, periods uint64) {
	t.Helper()
	if r.IdlePeriods != periods {
		t.Errorf("%s: %d idle periods replayed, want %d", spec, r.IdlePeriods, periods)
	}
	sum := 0.0
	for name, v := range r.StateShare {
		if math.IsNaN(v) || v < 0 || v > 1+1e-9 {
			t.Errorf("%s: state %s share %v", spec, name, v)
		}
		sum += v
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Errorf("%s: state shares add up to %v, want 1", spec, sum)
	}
	for _, v := range []float64{r.EnergyRel, r.EnergyBusyCoreSeconds} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Errorf("%s: energy %v", spec, v)
		}
	}
	lat := []LatencySummary{r.WakeLatencyNs}
	if r.IOLatencyNs != nil {
		lat = append(lat, *r.IOLatencyNs)
	}
	for _, l := range lat {
		if l.Count > 0 && (l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || math.IsNaN(l.Mean)) {
			t.Errorf("%s: latency summary out of order: %+v", spec, l)
		}
	}
}

// FuzzPolicyReplay: a --policy spec is user input too. Whatever the
// string, ParsePolicy gives a policy or an error, and a policy it accepts
// replays on a server table and on haltpoll's with figures a report can
// print (checkResultSane).
func FuzzPolicyReplay(f *testing.F) {
	for _, m := range modifierTable {
		f.Add(m.Example)
	}
	for _, s := range []string{"menu", "teo", "ladder", "haltpoll", "oracle", "recorded", "menu+qos=0", "teo+poll=1us+maxcstate=0",
		"menu+blkqos=1ns/1ns", "haltpoll+guest_halt_poll_ns=0", "menu+disable=C6,C1,POLL+qos=1us", "ladder+kernel=4.19"} {
		f.Add(s)
	}
	s := genTrace(5, 2, 150, 20_000)
	meta := &trace.Metadata{KernelRelease: "6.18.44", HZ: 250}
	var profs []*Profile
	for _, name := range []string{"spr", "haltpoll"} {
		p, err := Builtin(name, 250)
		if err != nil {
			f.Fatal(err)
		}
		profs = append(profs, p)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		pol, err := ParsePolicy(spec)
		if err != nil {
			return
		}
		for _, prof := range profs {
			rp, err := NewReplay(prof, meta, []Policy{pol})
			if err != nil {
				continue // refused for this table (a state it does not have): an error, not a replay
			}
			res, err := replaySynth(rp, s)
			if err != nil {
				t.Fatalf("%s on %s: %v", spec, prof.Name, err)
			}
			checkResultSane(t, spec+" on "+prof.Name, res[0], uint64(len(s.periods)))
		}
	})
}
