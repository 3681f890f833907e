package tune

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/model"
)

// fixture builds a sysfs root of a 2-CPU machine with the given driver and
// state names (none: no cpuidle driver), haltpoll's parameters and a
// regular file standing in for /dev/cpu_dma_latency.
func fixture(t *testing.T, driver string, states ...string) string {
	t.Helper()
	root := t.TempDir()
	put := func(rel, val string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(val+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("sys/devices/system/cpu/cpuidle/current_driver", driver)
	if driver != "none" {
		put("sys/devices/system/cpu/cpuidle/available_governors", "ladder menu haltpoll ")
		put("sys/devices/system/cpu/cpuidle/current_governor", "haltpoll")
	}
	for cpu := 0; cpu < 2; cpu++ {
		for i, s := range states {
			d := filepath.Join("sys/devices/system/cpu", "cpu"+string(rune('0'+cpu)), "cpuidle", "state"+string(rune('0'+i)))
			put(filepath.Join(d, "name"), s)
			put(filepath.Join(d, "disable"), "0")
		}
	}
	for name, v := range map[string]string{"guest_halt_poll_ns": "0", "guest_halt_poll_grow": "2", "guest_halt_poll_shrink": "2", "guest_halt_poll_grow_start": "50000", "guest_halt_poll_allow_shrink": "Y"} {
		put(filepath.Join("sys/module/haltpoll/parameters", name), v)
	}
	put("dev/cpu_dma_latency", "")
	return root
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func mustPolicy(t *testing.T, spec string) model.Policy {
	t.Helper()
	p, err := model.ParsePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApplyRestore: every knob a policy names is set while applied and
// back as it was after Restore, which a second call leaves alone.
func TestApplyRestore(t *testing.T) {
	root := fixture(t, "haltpoll", "POLL", "haltpoll idle")
	cases := []struct {
		spec  string
		check map[string]string // file → value while applied
	}{
		{"haltpoll+guest_halt_poll_ns=200us+guest_halt_poll_allow_shrink=N", map[string]string{
			"sys/module/haltpoll/parameters/guest_halt_poll_ns":           "200000",
			"sys/module/haltpoll/parameters/guest_halt_poll_allow_shrink": "N",
			"sys/devices/system/cpu/cpuidle/current_governor":             "haltpoll"}},
		{"menu+disable=poll", map[string]string{
			"sys/devices/system/cpu/cpuidle/current_governor":    "menu",
			"sys/devices/system/cpu/cpu0/cpuidle/state0/disable": "1",
			"sys/devices/system/cpu/cpu1/cpuidle/state0/disable": "1",
			"sys/devices/system/cpu/cpu1/cpuidle/state1/disable": "0"}},
		{"ladder+disable=haltpoll idle", map[string]string{
			"sys/devices/system/cpu/cpuidle/current_governor":    "ladder",
			"sys/devices/system/cpu/cpu0/cpuidle/state1/disable": "1",
			"sys/devices/system/cpu/cpu1/cpuidle/state1/disable": "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			before := map[string]string{}
			for f := range tc.check {
				before[f] = read(t, root, f)
			}
			pl, err := PlanFor(mustPolicy(t, tc.spec), root)
			if err != nil {
				t.Fatal(err)
			}
			var log []string
			a, err := pl.Apply(func(s string) { log = append(log, s) })
			if err != nil {
				t.Fatal(err)
			}
			for f, want := range tc.check {
				if got := read(t, root, f); got != want {
					t.Errorf("applied: %s = %q, want %q", f, got, want)
				}
			}
			if err := a.Restore(); err != nil {
				t.Fatal(err)
			}
			for f, want := range before {
				if got := read(t, root, f); got != want {
					t.Errorf("restored: %s = %q, want %q", f, got, want)
				}
			}
			// A second Restore (the signal path and the defer both call it)
			// writes nothing.
			os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/cpuidle/current_governor"), []byte("ladder"), 0o644)
			if err := a.Restore(); err != nil {
				t.Fatal(err)
			}
			if got := read(t, root, "sys/devices/system/cpu/cpuidle/current_governor"); got != "ladder" {
				t.Errorf("a second Restore wrote the governor again: %q", got)
			}
			os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/cpuidle/current_governor"), []byte("haltpoll"), 0o644)
			if len(log) != 2*len(pl.Writes) {
				t.Errorf("log %q for %d writes", log, len(pl.Writes))
			}
		})
	}
}

// TestQoSHeld: qos= writes the limit as a binary s32 of µs and holds the
// file open until Restore.
func TestQoSHeld(t *testing.T) {
	root := fixture(t, "haltpoll", "POLL", "haltpoll idle")
	pl, err := PlanFor(mustPolicy(t, "haltpoll+qos=20us"), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Writes) != 0 || pl.QoSUs == nil || *pl.QoSUs != 20 {
		t.Fatalf("plan %+v", pl)
	}
	a, err := pl.Apply(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "dev/cpu_dma_latency"))
	if len(b) < 4 || binary.LittleEndian.Uint32(b[:4]) != 20 {
		t.Errorf("wrote %x, want 20 as a little-endian s32", b)
	}
	if a.qos == nil {
		t.Fatal("the latency limit is not held open")
	}
	if err := a.Restore(); err != nil {
		t.Fatal(err)
	}
	if a.qos != nil {
		t.Error("the latency limit is still held after Restore")
	}
}

// TestNothingToChange: knobs already as asked are neither written nor
// restored.
func TestNothingToChange(t *testing.T) {
	root := fixture(t, "haltpoll", "POLL", "haltpoll idle")
	for _, spec := range []string{"recorded", "haltpoll", "haltpoll+guest_halt_poll_ns=0"} {
		pl, err := PlanFor(mustPolicy(t, spec), root)
		if err != nil {
			t.Fatal(err)
		}
		if !pl.Empty() {
			t.Errorf("%s: plan %v", spec, pl.Changes())
		}
	}
}

// TestRefusals: what the running kernel cannot change is refused with one
// line naming why, and nothing is written.
func TestRefusals(t *testing.T) {
	withDriver := fixture(t, "haltpoll", "POLL", "haltpoll idle")
	noDriver := fixture(t, "none")
	cases := []struct {
		root, spec, want string
	}{
		{withDriver, "menu+maxcstate=1", "boot parameter"},
		{withDriver, "menu+kernel=6.1", "kernel="},
		{withDriver, "menu+margin=25", "margin="},
		{withDriver, "menu+poll=50us", "poll="},
		{withDriver, "menu+blkqos=10us/3ms", "blkqos="},
		{withDriver, "teo", "no teo governor (available: ladder, menu, haltpoll)"},
		{withDriver, "oracle", "oracle"},
		{withDriver, "menu+disable=C6", `no state "C6" (states: POLL, haltpoll idle)`},
		{noDriver, "menu", "no cpuidle driver"},
		{noDriver, "haltpoll+guest_halt_poll_ns=200us", "no cpuidle driver"},
	}
	for _, tc := range cases {
		_, err := PlanFor(mustPolicy(t, tc.spec), tc.root)
		if err == nil || !IsRefusal(err) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line refusal containing %q", tc.spec, err, tc.want)
		}
	}
	if got := read(t, withDriver, "sys/devices/system/cpu/cpuidle/current_governor"); got != "haltpoll" {
		t.Errorf("a refused plan changed the governor to %q", got)
	}
}

// TestApplyFailureRestores: when a write fails half way, what was written
// is put back.
func TestApplyFailureRestores(t *testing.T) {
	root := fixture(t, "haltpoll", "POLL", "haltpoll idle")
	pl, err := PlanFor(mustPolicy(t, "menu+disable=POLL"), root)
	if err != nil {
		t.Fatal(err)
	}
	// The last write goes to a path that cannot be written.
	pl.Writes[len(pl.Writes)-1].Path = filepath.Join(root, "no/such/dir/disable")
	if _, err := pl.Apply(nil); err == nil {
		t.Fatal("Apply succeeded with a write that cannot succeed")
	}
	if got := read(t, root, "sys/devices/system/cpu/cpuidle/current_governor"); got != "haltpoll" {
		t.Errorf("governor left at %q after a failed Apply", got)
	}
	if got := read(t, root, "sys/devices/system/cpu/cpu0/cpuidle/state0/disable"); got != "0" {
		t.Errorf("cpu0 POLL disable left at %q after a failed Apply", got)
	}
}

// TestEnable: enable= writes 0 to the disable files of a state the machine
// had turned off, and Restore turns it off again.
func TestEnable(t *testing.T) {
	root := fixture(t, "haltpoll", "POLL", "haltpoll idle")
	files := []string{"sys/devices/system/cpu/cpu0/cpuidle/state1/disable", "sys/devices/system/cpu/cpu1/cpuidle/state1/disable"}
	for _, f := range files {
		os.WriteFile(filepath.Join(root, f), []byte("1\n"), 0o644)
	}
	pl, err := PlanFor(mustPolicy(t, "haltpoll+enable=haltpoll idle"), root)
	if err != nil {
		t.Fatal(err)
	}
	a, err := pl.Apply(func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if got := read(t, root, f); got != "0" {
			t.Errorf("applied: %s = %q, want 0", f, got)
		}
	}
	if err := a.Restore(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if got := read(t, root, f); got != "1" {
			t.Errorf("restored: %s = %q, want 1", f, got)
		}
	}
	if _, err := PlanFor(mustPolicy(t, "menu+enable=C6"), root); err == nil || !strings.Contains(err.Error(), `enable=: the running kernel has no state "C6"`) {
		t.Errorf("enable of a missing state: %v", err)
	}
}
