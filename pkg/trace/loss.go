package trace

import "fmt"

// LossAccount is the one account of what a recording did not capture, by
// kind. The recorder's summary, info and stats all print it (String) and
// stats' lost_events is its Total, so the same numbers carry the same names
// everywhere.
type LossAccount struct {
	// RingBufferFull: records dropped because the ring buffer was full,
	// the recorder's own loss (a larger --ring-mib or a faster reader).
	RingBufferFull uint64 `json:"ring_buffer_full"`
	// Undelivered: events the kernel raised without running the programs
	// attached to them: IO completions (found when the request's device
	// and sector are issued again, or still waiting at stop on an idle
	// device) and unpaired cpu_idle events.
	Undelivered uint64 `json:"undelivered"`
	// IOInFlightAtStart: IO completions whose issue came before the
	// recording: counted, not recorded.
	IOInFlightAtStart uint64 `json:"io_in_flight_at_start"`
	// IOInFlightAtStop: IO requests issued but not completed when the
	// recording stopped.
	IOInFlightAtStop uint64 `json:"io_in_flight_at_stop"`
	// IOTableFull: IO issues that did not fit the in-kernel pairing table.
	IOTableFull uint64 `json:"io_table_full"`
	// IOUnissued: IO completions without an issue event of their own,
	// which the block layer makes for the original request of a flush
	// sequence (its flush_rq is issued, completed and recorded in its
	// place). Nothing was lost: not part of Total.
	IOUnissued uint64 `json:"io_completed_unissued"`
	// UndeliveredMeasured: Undelivered's IO part is the kernel's own count
	// of the block tracepoints minus the programs' runs (IORaised), not
	// the issues found left waiting. UndeliveredReason names the kernel
	// rule behind them, where one is known.
	UndeliveredMeasured bool   `json:"undelivered_measured"`
	UndeliveredReason   string `json:"undelivered_reason,omitempty"`
	// PerfDisturbed: the counts were taken but the programs ran more often
	// than perf counted (another tracer hid events from perf), so the
	// estimate stands in.
	PerfDisturbed bool `json:"perf_disturbed,omitempty"`
	// Known is false when the trace has no end record (a killed
	// recording): the in-flight counts at stop are then unknown and the
	// others are those of the last loss chunk written.
	Known bool `json:"known"`
}

// NewLossAccount sums the per-CPU counters (end.Loss, or the last loss
// chunk's when the trace has no end record) and the end record's in-flight
// counts. Undelivered IO is measured between the start snapshot and the end
// one where both counted the tracepoints (IORaised).
func NewLossAccount(losses []Loss, start *Snapshot, end *End) LossAccount {
	var a LossAccount
	var undeliveredIssues uint64
	if end != nil {
		a.Known = true
		a.IOInFlightAtStop = end.IOInFlight - min(end.IOOrphanedAtStop, end.IOInFlight)
		a.UndeliveredReason = end.UndeliveredReason
		var completions uint64
		if start != nil && start.IORaised != nil && end.Snapshot != nil && end.Snapshot.IORaised != nil {
			undeliveredIssues, completions, a.UndeliveredMeasured = end.Snapshot.IORaised.undeliveredSince(start.IORaised)
			a.PerfDisturbed = !a.UndeliveredMeasured
		}
		if a.UndeliveredMeasured {
			a.Undelivered = undeliveredIssues + completions
			// An issue whose completion was not delivered stays in the
			// pairing table: it is in flight at stop only if the kernel
			// still had that many in flight.
			a.IOInFlightAtStop = min(a.IOInFlightAtStop, end.Snapshot.BlockInFlight())
		} else {
			a.Undelivered = end.IOOrphanedAtStop
		}
	}
	var unmatched uint64
	for i := range losses {
		l := &losses[i]
		a.RingBufferFull += l.RingLost()
		if a.UndeliveredMeasured {
			a.Undelivered += l.IdleUnpaired
		} else {
			a.Undelivered += l.Undelivered()
		}
		a.IOTableFull += l.IOTableFull
		a.IOUnissued += l.IOUnissued
		unmatched += l.IOUnmatched
	}
	// The completion of an issue the kernel did not deliver, or of one
	// that did not fit the pairing table, looks unissued too.
	a.IOUnissued -= min(undeliveredIssues+a.IOTableFull, a.IOUnissued)
	// A table-full issue's completion finds no issue either, nor does an
	// unissued one or one whose issue was not delivered.
	a.IOInFlightAtStart = unmatched - min(a.IOTableFull+a.IOUnissued+undeliveredIssues, unmatched)
	if a.Undelivered == 0 {
		a.UndeliveredReason = "" // a rule that kept nothing away is no reason
	}
	return a
}

// Total is every kind together: stats' lost_events.
func (a LossAccount) Total() uint64 {
	return a.RingBufferFull + a.Undelivered + a.IOInFlightAtStart + a.IOInFlightAtStop + a.IOTableFull
}

// Lost is what was lost rather than merely cut by the recording's bounds:
// the ring buffer's drops, the kernel's undelivered events and the pairing
// table's overflow. Counts computed from the trace are lower bounds by it.
func (a LossAccount) Lost() uint64 { return a.RingBufferFull + a.Undelivered + a.IOTableFull }

// String is the account as every command prints it.
func (a LossAccount) String() string {
	if a.Known && a.Total() == 0 && a.IOUnissued == 0 {
		return "not recorded 0: nothing lost" // nor cut: no IO in flight at start or stop (where IO was traced)
	}
	estimated := ""
	switch {
	case !a.Known || a.UndeliveredMeasured || a.Undelivered == 0:
	case a.PerfDisturbed:
		estimated = " (IO estimated from issues left waiting: perf's counts were disturbed, another tracer hid events from it)"
	default:
		estimated = " (IO estimated from issues left waiting)"
	}
	s := fmt.Sprintf("not recorded %d: ring buffer full %d, not delivered by the kernel %d%s, IO in flight at start %d",
		a.Total(), a.RingBufferFull, a.Undelivered, estimated, a.IOInFlightAtStart)
	if a.Known {
		s += fmt.Sprintf(", IO in flight at stop %d", a.IOInFlightAtStop)
	} else {
		s += ", IO in flight at stop unknown (no end record)"
	}
	s += fmt.Sprintf(", IO pairing table full %d", a.IOTableFull)
	if a.Undelivered > 0 && a.UndeliveredReason != "" {
		s += "; not delivered: " + a.UndeliveredReason
	}
	if a.IOUnissued > 0 {
		s += fmt.Sprintf("; besides, IO completed without an issue of its own %d (flush sequences: their flush requests are recorded)", a.IOUnissued)
	}
	return s
}
