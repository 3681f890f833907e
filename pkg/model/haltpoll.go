package model

import "github.com/idletrace/idletrace/pkg/trace"

// haltpoll governor model.
//
// Follows drivers/cpuidle/governors/haltpoll.c of Linux 6.18, which is the
// file as 496d0a648509 ("cpuidle: haltpoll: do not shrink guest
// poll_limit_ns below grow_start", 6.9) left it: the next change,
// 9b9c0ff095f0 (7.0, "Remove single state handling"), moved the
// state_count test into cpuidle_select and changes nothing for the two-state
// cpuidle-haltpoll driver; "Fix guest_halt_poll_ns failed to take effect"
// (2024, clamp after a shrink too) was posted, never merged. Before 6.9 a
// shrink below grow_start kept its value (shrinkToZero false).
//
// What the kernel does, and where the model follows it:
//   - haltpoll_select: cpuidle_governor_latency_req() == 0 → POLL, tick kept;
//     dev->poll_limit_ns == 0 → halt (stop_tick left true); last state POLL
//     → halt if dev->poll_time_limit, else POLL with the tick; last state
//     halt → POLL with the tick. Disabled states are not looked at.
//   - haltpoll_reflect runs only for entries cpuidle_enter_state made: not
//     after an aborted one (call_cpuidle returns -EBUSY, cpuidle_reflect
//     skips index < 0; select itself changes nothing), nor for
//     cpu_idle_poll or s2idle, which bypass the governor. It stores the
//     index and, for index != 0, runs adjust_poll_limit on
//     dev->last_residency_ns, the core's own measure (the replay passes the
//     recorded one where the trace has it).
//   - adjust_poll_limit: grow when window < block ≤ guest_halt_poll_ns
//     (val = window × grow in unsigned int, raised to grow_start, capped at
//     guest_halt_poll_ns); shrink when block > guest_halt_poll_ns and
//     allowed (÷shrink, 0 if shrink is 0, and 0 below grow_start since
//     6.9; no cap). Each branch fires power:guest_halt_poll_ns once, even
//     when the value stays (a window of 0 "shrinks" to 0 on every long
//     halt): changes counts them.
//   - poll_idle takes its limit from cpuidle_poll_time(): dev->poll_limit_ns
//     when set, else the generic limit (TICK_NSEC/16 for this driver, whose
//     halt state's 1 µs residency is below CPUIDLE_POLL_MIN), which it
//     caches in dev->poll_limit_ns without a tracepoint. Under haltpoll that
//     happens only for a POLL chosen with the window at 0 (latency_req 0).
//   - haltpoll_enable_device (device registration, governor switch) sets
//     the window to 0; last_state_idx and poll_time_limit stay as they
//     were, which the window of 0 makes irrelevant. The window a trace
//     starts with is the first power:guest_halt_poll_ns record's old value
//     (Replay.SetHaltpollWindow), else 0.
//
// Parameters come from the trace (Metadata.HaltPoll), else the module's
// compiled defaults (200000, 2, 2, 50000, allow shrink); the policy's
// guest_halt_poll_* modifiers override either (haltpollParams.with).

type haltpollParams struct {
	guestNs, grow, shrink, growStart uint64
	allowShrink                      bool
	shrinkToZero                     bool   // 496d0a648509 (6.9)
	generic                          uint64 // cpuidle_poll_time's own limit
}

func haltpollParamsFrom(h *trace.HaltPollParams, v Version, generic int64) haltpollParams {
	p := haltpollParams{guestNs: 200000, grow: 2, shrink: 2, growStart: 50000, allowShrink: true}
	if h != nil {
		p = haltpollParams{guestNs: h.GuestHaltPollNs, grow: h.Grow, shrink: h.Shrink, growStart: h.GrowStart, allowShrink: h.AllowShrink}
	}
	p.shrinkToZero = v.AtLeast(6, 9)
	p.generic = uint64(max(generic, 0))
	return p
}

// params are p in the trace's terms.
func (p haltpollParams) params() trace.HaltPollParams {
	return trace.HaltPollParams{GuestHaltPollNs: p.guestNs, Grow: p.grow, Shrink: p.shrink, GrowStart: p.growStart, AllowShrink: p.allowShrink}
}

// with overrides the parameters the policy's guest_halt_poll_* modifiers
// set, as writing the module's sysfs files would before the recording.
func (p haltpollParams) with(o HaltPollOverrides) haltpollParams {
	for _, f := range []struct{ dst, src *uint64 }{
		{&p.guestNs, o.GuestHaltPollNs}, {&p.grow, o.Grow}, {&p.shrink, o.Shrink}, {&p.growStart, o.GrowStart},
	} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	if o.AllowShrink != nil {
		p.allowShrink = *o.AllowShrink
	}
	return p
}

type haltpollGov struct {
	t       *table
	p       haltpollParams
	limit   uint64 // dev->poll_limit_ns
	last    int    // dev->last_state_idx
	pollTO  bool   // dev->poll_time_limit
	changes uint64 // power:guest_halt_poll_ns events so far
}

func newHaltpoll(t *table, p haltpollParams) *haltpollGov { return &haltpollGov{t: t, p: p} }

func (g *haltpollGov) selectState(in *selInput) (int, bool) {
	if g.t.n == 0 || in.latReq == 0 {
		return 0, false
	}
	if g.limit == 0 {
		return 1, true
	}
	if g.last == 0 && g.pollTO {
		return 1, true
	}
	return 0, false
}

func (g *haltpollGov) reflect(idx int, residencyNs int64, tickWakeup, pollTimedOut bool) {
	g.last = idx
	if g.t.polling[idx] {
		g.pollTO = pollTimedOut
		g.pollLimit() // poll_idle asked cpuidle_poll_time
	}
	if idx != 0 {
		g.adjust(uint64(max(residencyNs, 0)))
	}
}

func (g *haltpollGov) adjust(block uint64) {
	p := &g.p
	switch {
	case block > g.limit && block <= p.guestNs:
		v := uint64(uint32(g.limit * p.grow)) // unsigned int val
		v = max(v, p.growStart)
		g.limit = min(v, p.guestNs)
	case block > p.guestNs && p.allowShrink:
		v := uint64(uint32(g.limit))
		if p.shrink == 0 {
			v = 0
		} else {
			v /= p.shrink
			if p.shrinkToZero && v < p.growStart {
				v = 0
			}
		}
		g.limit = v
	default:
		return
	}
	g.changes++
}

// pollLimit is cpuidle_poll_time under haltpoll: the window, the generic
// limit cached into it when it is 0.
func (g *haltpollGov) pollLimit() int64 {
	if g.limit == 0 {
		g.limit = g.p.generic
	}
	return int64(g.limit)
}

// polledOut checks a guess of dev->poll_time_limit, where the trace could
// not read it ("nothing was seen to wake the poll"), against the kernel's
// rule: poll_idle stops on its limit only once local_clock() is past it, and
// a traced stay is never shorter than the poll inside it, so a poll no
// longer than the window was woken (by a wake-up the recorder missed). The
// guess stays needed beyond the window: a poll may run past it before
// poll_idle looks at the clock (every 200 loops, after any interrupt) and
// still end on need_resched. On a trace of the 6.18 haltpoll kernel without
// the field, the guess alone misjudged 272 of 58,821 polls, the two together
// 41.
func (g *haltpollGov) polledOut(residencyNs int64) bool {
	lim := g.limit
	if lim == 0 {
		lim = g.p.generic
	}
	return lim > 0 && residencyNs > int64(lim)
}
