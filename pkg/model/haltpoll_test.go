package model

import (
	"fmt"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

func TestHaltpollAdjust(t *testing.T) {
	v618, v68 := Version{Major: 6, Minor: 18}, Version{Major: 6, Minor: 8}
	def := &trace.HaltPollParams{GuestHaltPollNs: 200000, Grow: 2, Shrink: 2, GrowStart: 50000, AllowShrink: true}
	type step struct {
		block         int64
		window, fired uint64
	}
	for _, tc := range []struct {
		name  string
		p     *trace.HaltPollParams
		v     Version
		start uint64
		steps []step
	}{
		{"6.18 grows and shrinks to 0 below grow_start", def, v618, 0, []step{
			{30_000, 50_000, 1}, {80_000, 100_000, 2}, {90_000, 100_000, 2}, {150_000, 200_000, 3},
			{200_000, 200_000, 3}, // not above the window
			{500_000, 100_000, 4}, {500_000, 50_000, 5}, {500_000, 0, 6},
		}},
		{"6.8 keeps a shrunk window below grow_start", def, v68, 50_000, []step{
			{500_000, 25_000, 1}, {500_000, 12_500, 2}, {30_000, 50_000, 3},
		}},
		{"guest_halt_poll_ns 0: every halt shrinks 0 to 0, each a change", &trace.HaltPollParams{Grow: 2, Shrink: 2, GrowStart: 50000, AllowShrink: true}, v618, 0, []step{
			{1, 0, 1}, {5_000_000, 0, 2},
		}},
		{"a zero-length halt neither grows nor shrinks", def, v618, 0, []step{{0, 0, 0}}},
		{"no shrink when not allowed", &trace.HaltPollParams{GuestHaltPollNs: 200000, Grow: 2, Shrink: 2, GrowStart: 50000}, v618, 100_000, []step{
			{500_000, 100_000, 0},
		}},
		{"shrink 0 drops the window", &trace.HaltPollParams{GuestHaltPollNs: 200000, Grow: 2, GrowStart: 50000, AllowShrink: true}, v618, 100_000, []step{
			{500_000, 0, 1},
		}},
		{"grow wraps in unsigned int", &trace.HaltPollParams{GuestHaltPollNs: 4_000_000_000, Grow: 4, Shrink: 2, GrowStart: 50000, AllowShrink: true}, v618, 1 << 30, []step{
			{(1 << 30) + 1, 50_000, 1}, // 2^32 truncates to 0, raised to grow_start
		}},
		{"no cap after a shrink (the 2024 clamp patch was not merged)", def, v618, 1_000_000, []step{
			{500_000, 500_000, 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newHaltpoll(newTable(mustBuiltin(t, "haltpoll", 250), nil, nil, -1), haltpollParamsFrom(tc.p, tc.v, 250_000))
			g.limit = tc.start
			for i, s := range tc.steps {
				g.reflect(1, s.block, false, false)
				if g.limit != s.window || g.changes != s.fired {
					t.Fatalf("step %d (halt of %d ns): window %d after %d changes, want %d after %d", i, s.block, g.limit, g.changes, s.window, s.fired)
				}
			}
		})
	}
}

func TestHaltpollSelect(t *testing.T) {
	for _, tc := range []struct {
		name     string
		latReq   int64
		window   uint64
		last     int
		pollTO   bool
		disabled []int
		idx      int
		stop     bool
	}{
		{"latency 0 polls, tick kept", 0, 0, 1, false, nil, 0, false},
		{"window 0 halts, tick may stop", noLimit, 0, 0, false, nil, 1, true},
		{"after a halt: poll", noLimit, 50_000, 1, false, nil, 0, false},
		{"after a woken poll: poll", noLimit, 50_000, 0, false, nil, 0, false},
		{"after a timed-out poll: halt", noLimit, 50_000, 0, true, nil, 1, true},
		{"disabled states are not looked at", noLimit, 0, 0, false, []int{1}, 1, true},
		{"nor is a disabled POLL", noLimit, 50_000, 1, false, []int{0}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newTable(mustBuiltin(t, "haltpoll", 250), tc.disabled, nil, -1)
			g := newHaltpoll(tab, haltpollParamsFrom(nil, NewestVersion, 250_000))
			g.limit, g.last, g.pollTO = tc.window, tc.last, tc.pollTO
			idx, stop := g.selectState(&selInput{latReq: tc.latReq})
			if idx != tc.idx || stop != tc.stop {
				t.Fatalf("select = %d (stop tick %v), want %d (%v)", idx, stop, tc.idx, tc.stop)
			}
		})
	}
}

// A poll with the window at 0 (latency 0) makes poll_idle cache
// cpuidle_poll_time's limit, TICK_NSEC/16, without a tracepoint; haltpoll
// then shrinks from there.
func TestHaltpollPollCachesGenericLimit(t *testing.T) {
	tab := newTable(mustBuiltin(t, "haltpoll", 250), nil, nil, -1)
	g := newHaltpoll(tab, haltpollParamsFrom(nil, NewestVersion, genericPollLimit(tab, kernelPollRule(NewestVersion), 0)))
	if idx, _ := g.selectState(&selInput{latReq: 0}); idx != 0 {
		t.Fatalf("latency 0: select %d, want POLL", idx)
	}
	g.reflect(0, 10_000, false, false)
	if g.limit != 250_000 || g.changes != 0 {
		t.Fatalf("after a poll at window 0: window %d after %d changes, want 250000 after 0", g.limit, g.changes)
	}
	g.reflect(1, 300_000, false, false)
	if g.limit != 125_000 || g.changes != 1 {
		t.Fatalf("after a long halt: window %d after %d changes, want 125000 after 1", g.limit, g.changes)
	}
}

// Where the trace could not read dev->poll_time_limit, the model kept on
// the kernel's history takes the recorder's "poll time-out" only from a
// poll longer than the window.
func TestHaltpollGuessedPollTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		kernelKnown bool
		pollNs      uint64
		want        uint32 // the state the model picks next
	}{
		{"guess within the window: woken, poll again", false, 20_000, 0},
		{"guess beyond the window: timed out, halt", false, 60_000, 1},
		{"the kernel's own flag is taken as it is", true, 20_000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := haltpollMeta("")
			prof, err := Recorded(meta)
			if err != nil {
				t.Fatal(err)
			}
			pol, _ := ParsePolicy("haltpoll")
			rp, err := NewReplay(prof, meta, []Policy{pol})
			if err != nil {
				t.Fatal(err)
			}
			rp.SetHaltpollWindow(0, 50_000)
			poll := trace.IdlePeriod{EntryNs: 1_000_000, ExitNs: 1_000_000 + tc.pollNs, State: 0, WakeCause: trace.WakePollTimeout,
				PollTimedOut: trace.Yes, KernelKnown: tc.kernelKnown, KernelCounted: tc.kernelKnown, KernelResidencyNs: tc.pollNs, WakeIRQ: -1}
			next := trace.IdlePeriod{EntryNs: poll.ExitNs + 5_000, ExitNs: poll.ExitNs + 25_000, State: tc.want, WakeCause: trace.WakeIPIResched,
				KernelKnown: tc.kernelKnown, KernelCounted: tc.kernelKnown, KernelResidencyNs: 20_000, WakeIRQ: -1}
			for _, p := range []*trace.IdlePeriod{&poll, &next} {
				if err := rp.Idle(p); err != nil {
					t.Fatal(err)
				}
			}
			res, err := rp.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Agreement == nil || *res[0].Agreement != 1 {
				t.Fatalf("agreement %v, want 1 (next state %d)", res[0].Agreement, tc.want)
			}
		})
	}
}

// Agreement of haltpoll with other guest_halt_poll_ns values than the
// recording's: its window moves by its own choices on the recorded stays,
// not by the kernel's polls, and its polls time out on its own window. A
// recording at 200 µs, each CPU's window seeded as whatif seeds it (the
// prepass's first power:guest_halt_poll_ns record):
//   - "mostly short polls": in every 50 periods 48 polls woken within
//     20 µs, one that runs out the window, then a 150 µs halt. With a
//     window of 0 the policy ends up halting on every entry (only the
//     kernel's halts agree); at 100 µs it polls as the kernel did but once
//     after each halt, which shrinks its window to 0.
//   - "polls woken at 150 µs", the window 100 µs as it began: the 48 polls
//     are woken past it, the halts last 80 µs. At 100 µs the policy's own
//     polls time out and its halts of 150 µs shrink its window to 0 (the
//     kernel's 80 µs halts would not), so it halts on every entry.
func TestHaltpollAgreementOtherValues(t *testing.T) {
	type want struct {
		spec   string
		lo, hi float64
	}
	for _, sc := range []struct {
		name   string
		seedNs uint32                           // the window as the recording began
		period func(i int, p *trace.IdlePeriod) // sets exit, state, cause of the i-th period
		want   []want
	}{
		{"mostly short polls", 200_000, func(i int, p *trace.IdlePeriod) {
			const every = 50
			switch i % every {
			case every - 2:
				p.ExitNs, p.WakeCause, p.PollTimedOut = p.EntryNs+200_000, trace.WakePollTimeout, trace.Yes
			case every - 1:
				p.ExitNs, p.State, p.WakeCause = p.EntryNs+150_000, 1, trace.WakeIRQ
			}
		}, []want{
			{"haltpoll", 1, 1},
			{"haltpoll+guest_halt_poll_ns=200us", 1, 1},
			{"haltpoll+guest_halt_poll_ns=0", 0, 0.05},
			{"haltpoll+guest_halt_poll_ns=100us", 0.95, 0.99},
		}},
		{"polls woken at 150 µs", 100_000, func(i int, p *trace.IdlePeriod) {
			const every = 50
			p.ExitNs = p.EntryNs + 150_000
			switch i % every {
			case every - 2:
				p.ExitNs, p.WakeCause, p.PollTimedOut = p.EntryNs+200_000, trace.WakePollTimeout, trace.Yes
			case every - 1:
				p.ExitNs, p.State, p.WakeCause = p.EntryNs+80_000, 1, trace.WakeIRQ
			}
		}, []want{
			{"haltpoll", 1, 1},
			{"haltpoll+guest_halt_poll_ns=100us", 0, 0.1},
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			meta := haltpollMeta("6.18.0")
			meta.Inputs.HaltPollTrace = true
			prof, err := Recorded(meta)
			if err != nil {
				t.Fatal(err)
			}
			var pols []Policy
			for _, w := range sc.want {
				p, err := ParsePolicy(w.spec)
				if err != nil {
					t.Fatal(err)
				}
				pols = append(pols, p)
			}
			rp, err := NewReplay(prof, meta, pols)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := rp.Prepass(nil)
			if !ok || v.HaltPoll == nil {
				t.Fatal("the prepass does not read the haltpoll records")
			}
			must := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			must(v.HaltPoll(&trace.HaltPollChange{TimeNs: 2_000_000, CPU: 0, OldNs: sc.seedNs, NewNs: 1}))
			must(v.HaltPoll(&trace.HaltPollChange{TimeNs: 3_000_000, CPU: 0, OldNs: 1, NewNs: 2})) // not the start's
			t0 := uint64(1_000_000)
			for i := range 5000 {
				p := trace.IdlePeriod{EntryNs: t0, ExitNs: t0 + 20_000, State: 0, WakeCause: trace.WakeIPIResched, PollTimedOut: trace.No, WakeIRQ: -1}
				sc.period(i, &p)
				p.KernelKnown, p.KernelCounted, p.KernelResidencyNs = true, true, p.ExitNs-p.EntryNs
				must(rp.Idle(&p))
				t0 = p.ExitNs + 10_000
			}
			res, err := rp.Finish()
			must(err)
			for i, w := range sc.want {
				if a := res[i].Agreement; a == nil || *a < w.lo || *a > w.hi {
					t.Errorf("%s: agreement %s, want within [%g, %g]", w.spec, fmtAgreement(a), w.lo, w.hi)
				}
			}
		})
	}
}

func fmtAgreement(a *float64) string {
	if a == nil {
		return "none"
	}
	return fmt.Sprintf("%.4f", *a)
}

// haltpollMeta is a one-CPU recording of the haltpoll driver and governor
// with the module's default parameters, of kernel release.
func haltpollMeta(release string) *trace.Metadata {
	return &trace.Metadata{FormatVersion: 1, KernelRelease: release, CPUIdleDriver: "haltpoll", CPUIdleGovernor: "haltpoll", HZ: 250,
		PMQoS:    trace.PMQoS{CPUDMALatencyUs: 2_000_000_000, ResumeLatencyUs: []int64{-1}},
		HaltPoll: &trace.HaltPollParams{GuestHaltPollNs: 200000, Grow: 2, Shrink: 2, GrowStart: 50000, AllowShrink: true},
		States: []trace.CPUStates{{CPU: 0, States: []trace.StateInfo{
			{Index: 0, Name: "POLL", Polling: true},
			{Index: 1, Name: "haltpoll idle", ExitLatencyNs: 1000, TargetResidencyNs: 1000},
		}}}}
}
