package model

import (
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Kernel behaviour pinned by stable release: which 6.18.y first carried a
// later mainline governor change (from the 6.18.3-rc1 and 6.18.14-rc1
// stable review series), and mainline v6.18 ("6.18") without them.

// 07d815701274 ("cpuidle: menu: Use residency threshold in polling state
// override decisions", 6.19) reached 6.18.y in 6.18.3: a state with target
// residency ≥ 15 µs no longer replaces POLL through the polling override.
func TestMenuPollOverrideResidencyThreshold6183(t *testing.T) {
	prof := mkProfile("pin", 250, []State{
		{Name: "POLL", Polling: true},
		{Name: "C1", ExitLatencyNs: 2_000, TargetResidencyNs: 20_000},
		{Name: "C6", ExitLatencyNs: 100_000, TargetResidencyNs: 600_000},
	})
	pinMenu(t, newTable(prof, nil, nil, -1), [8]uint32{16, 16, 16, 16, 16, 16, 16, 16},
		selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 3_000_000}, []versionWant{
			{Version{6, 18, -1}, 1}, // mainline v6.18: override to C1 (el 2 µs ≤ predicted 16 µs)
			{Version{6, 18, 2}, 1},
			{Version{6, 18, 3}, 0}, // C1's 20 µs residency is not below 15 µs: keep polling
			{Version{6, 18, 44}, 0},
			{Version{6, 19, -1}, 0},
		})
}

type versionWant struct {
	v    Version
	want int
}

// pinMenu checks menu's choice for in after the intervals iv on each
// release; the tick is to be stopped exactly when in says it already is.
func pinMenu(t *testing.T, tab *table, iv [8]uint32, in selInput, cases []versionWant) {
	t.Helper()
	for _, tc := range cases {
		f := menuFlagsFor(tc.v)
		m := newMenu(tab, &f)
		m.setIntervals(iv)
		in := in
		idx, stop := m.selectState(&in)
		if idx != tc.want || stop != in.tickStopped {
			t.Errorf("%v: idx=%d stop=%v, want %d with stop=%v", tc.v, idx, stop, tc.want, in.tickStopped)
		}
	}
}

// 80606f4eb8d7 ("cpuidle: governors: menu: Always check timers with tick
// stopped", 7.0) reached 6.18.y in 6.18.14 and 6.19.y in 6.19.4 (the
// 6.19.4-rc1 review series, patch 044/781): with the tick stopped and a
// typical interval ≤ 15 µs, menu queries the next timer and the
// stopped-tick override uses it instead of KTIME_MAX.
func TestMenuStoppedTickTimerQuery61814(t *testing.T) {
	pinMenu(t, newTable(seedIntel(250), nil, nil, -1), [8]uint32{5, 5, 5, 5, 5, 5, 5, 5},
		selInput{latReq: noLimit, sleepLen: 200_000, deltaTick: 200_000, tickStopped: true}, []versionWant{
			{Version{6, 18, -1}, 4}, // no query: next timer KTIME_MAX, deepest state
			{Version{6, 18, 13}, 4},
			{Version{6, 18, 14}, 3}, // next timer 200 µs: C3 (100 µs), not C6 (400 µs)
			{Version{6, 19, -1}, 4},
			{Version{6, 19, 3}, 4},
			{Version{6, 19, 4}, 3},
			{Version{7, 0, -1}, 3},
		})
}

// a03b2011808a ("cpuidle: governors: teo: Drop misguided target residency
// check", 6.19) reached 6.18.y in 6.18.3: when the candidate's target
// residency exceeds the sleep length, the shallower state found is used
// even if the tick is stopped and its residency is below a tick.
func TestTEOShallowerStateWithStoppedTick6183(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	for _, tc := range []versionWant{
		{Version{6, 18, -1}, 4}, // teo_state_ok rejects C3 (100 µs < tick): stays in C6
		{Version{6, 18, 2}, 4},
		{Version{6, 18, 3}, 3}, // C3 fits the 150 µs sleep length
		{Version{6, 18, 44}, 3},
	} {
		g := newTEO(tab)
		g.shallowerAlways = teoShallowerAlways(tc.v)
		idx, stop := g.selectState(&selInput{latReq: noLimit, sleepLen: 150_000, deltaTick: 150_000, tickStopped: true})
		if idx != tc.want || !stop {
			t.Errorf("%v: idx=%d stop=%v, want %d with the tick stopped", tc.v, idx, stop, tc.want)
		}
	}
}

func TestRecordedVersion(t *testing.T) {
	for _, tc := range []struct{ release, version, want string }{
		{"6.1.0-57-cloud-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)", "6.1.192"},
		{"6.12.117+deb12-cloud-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.12.117-1~deb12u1 (2026-11-14)", "6.12.117"},
		{"6.18.44-fc-v657", "#1 SMP PREEMPT_DYNAMIC @0", "6.18.44"},
		{"6.8.0-45-generic", "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024", "6.8.0"},
		{"6.1.0-57-amd64", "#1 SMP Debian 6.12.3-1 (other series)", "6.1.0"},
	} {
		v, ok := RecordedVersion(&trace.Metadata{KernelRelease: tc.release, KernelVersion: tc.version})
		if !ok || v.String() != tc.want {
			t.Errorf("%s / %s: %v %v, want %s", tc.release, tc.version, v, ok, tc.want)
		}
	}
}

// 85975daeaa4d ("cpuidle: menu: Avoid discarding useful information",
// 6.15) was backported to the one-sided detector of 6.12.y in 6.12.31 and
// of 6.1.y in 6.1.141, and reverted in 6.12.56 and 6.1.158 (Debian's
// changelogs, ChangeLog-6.12.31/56, ChangeLog-6.1.141/158). With six
// samples left and no steady average it returns their largest, 320 µs:
// C3 (100 µs) with the tick kept, instead of C6 (400 µs) and the tick
// stopped for a 10 ms timer.
func TestMenuDiscardBackport612And61(t *testing.T) {
	tab := newTable(seedIntel(250), nil, nil, -1)
	for _, tc := range []struct {
		v    Version
		want int
	}{
		{Version{6, 1, 140}, 4},
		{Version{6, 1, 141}, 3},
		{Version{6, 1, 157}, 3},
		{Version{6, 1, 158}, 4},
		{Version{6, 12, 30}, 4},
		{Version{6, 12, 31}, 3},
		{Version{6, 12, 55}, 3},
		{Version{6, 12, 56}, 4},
		{Version{6, 12, 118}, 4},
		{Version{6, 16, -1}, 3}, // mainline's two-sided form returns its max too
		{Version{6, 18, -1}, 4},
	} {
		f := menuFlagsFor(tc.v)
		m := newMenu(tab, &f)
		m.setIntervals([8]uint32{10, 20, 40, 80, 160, 320, 640, 1280})
		idx, stop := m.selectState(&selInput{latReq: noLimit, sleepLen: 10_000_000, deltaTick: 3_000_000})
		if idx != tc.want || stop != (tc.want == 4) {
			t.Errorf("%v: idx=%d stop=%v, want %d with stop=%v", tc.v, idx, stop, tc.want, tc.want == 4)
		}
	}
}

// The releases in which 6.12.y and 6.1.y took the later mainline menu
// commits, as Debian's changelogs list them under the upstream stable
// release (menuFlagsFor's comment): each flag off one release before,
// on at it.
func TestMenuStableBackportReleases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flag  func(menuFlags) bool
		first []Version
	}{
		{"abortPush (fa3fa55de0d6)", func(f menuFlags) bool { return f.abortPush }, []Version{{6, 12, 43}, {6, 1, 157}}},
		{"no iowait (38f83090f515)", func(f menuFlags) bool { return !f.iowaitCap }, []Version{{6, 12, 44}}},
		{"latencyFirst (779b1a1cb13a)", func(f menuFlags) bool { return f.latencyFirst }, []Version{{6, 12, 44}}},
		{"pollElOverride (db86f55bf81a)", func(f menuFlags) bool { return f.pollElOverride }, []Version{{6, 12, 58}}},
		{"pollResThresh (07d815701274)", func(f menuFlags) bool { return f.pollResThresh }, []Version{{6, 12, 64}}},
		{"alwaysQueryStopped (80606f4eb8d7)", func(f menuFlags) bool { return f.alwaysQueryStopped }, []Version{{6, 12, 75}}},
	} {
		for _, v := range tc.first {
			before := Version{v.Major, v.Minor, v.Patch - 1}
			if tc.flag(menuFlagsFor(before)) || !tc.flag(menuFlagsFor(v)) || !tc.flag(menuFlagsFor(Version{v.Major, v.Minor, 200})) {
				t.Errorf("%s: want off in %v, on from %v", tc.name, before, v)
			}
		}
	}
}

// TestStableDiffers: kernel=X.Y is mainline X.Y.0; where the X.Y.y stable
// releases took later changes of the governor, whatif says so.
func TestStableDiffers(t *testing.T) {
	for _, tc := range []struct {
		g    Governor
		v    Version
		want bool
	}{
		{GovMenu, Version{6, 12, -1}, true}, // iowait cap dropped in 6.12.44, and more
		{GovMenu, Version{6, 1, -1}, true},
		{GovMenu, Version{6, 18, -1}, true}, // 07d815701274 in 6.18.3, 80606f4eb8d7 in 6.18.14
		{GovMenu, Version{6, 19, -1}, true}, // 80606f4eb8d7 in 6.19.4
		{GovMenu, Version{6, 12, 117}, false},
		{GovMenu, Version{6, 1, 0}, true}, // Debian's uname -r, 6.1.0-28-amd64: as released
		{GovMenu, Version{7, 3, -1}, false},
		{GovTEO, Version{6, 12, -1}, true}, // a03b2011808a in 6.12.64
		{GovTEO, Version{6, 18, -1}, true}, // a03b2011808a in 6.18.3
		{GovTEO, Version{6, 19, -1}, false},
		{GovTEO, Version{7, 3, -1}, false},
		{GovLadder, Version{6, 12, -1}, false},
	} {
		if got := StableDiffers(tc.g, tc.v); got != tc.want {
			t.Errorf("StableDiffers(%s, %v) = %v, want %v", tc.g, tc.v, got, tc.want)
		}
	}
}
