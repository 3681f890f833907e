package analysis

import (
	"slices"
	"sync"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Top is the live aggregation behind `idletrace top`. The records of a
// recording in progress (record.Options.Live) feed two StatsBuilders: one
// for the interval since the last frame and one since the start. A frame's
// figures therefore follow the rules `idletrace stats` follows (the
// recording window, residency and above/below as the cpuidle core counts
// them, wake causes, measured wake latency, the iowake rule), with one
// difference: a record counts in the interval in which it reaches the
// recorder, which is after its idle period ended (the kernel's counters
// also count a period at its exit) and, with a cpuidle driver, after the
// CPU's next idle entry. The IO-wake matcher is handed from interval to
// interval (StatsBuilder.Next), so a completion and its idle period that
// arrive in different intervals still meet.
//
// One goroutine feeds it (Visitor) while another takes frames (Frame).
type Top struct {
	mu              sync.Mutex
	cur, total      *StatsBuilder
	startNs, lastNs uint64
	qos             TopPMQoS
	// shownCPU: the recorded CPUs, whose resume-latency constraints the
	// frames show (nil: every CPU's).
	shownCPU map[int32]bool
}

// TopPMQoS is the latency constraints in force, as the recording started
// and as each traced change left them.
type TopPMQoS struct {
	// GlobalUs is the CPU latency limit (/dev/cpu_dma_latency) in
	// PMQoSChange's terms: trace.PMQoSNoGlobalLimitUs for none, negative
	// where the start's could not be read and no change was seen since.
	GlobalUs int64
	// ResumeUs holds each shown CPU's resume-latency constraint, indexed
	// by CPU (−1: none, or a CPU --cpus left out; 0: "n/a", only polling).
	ResumeUs []int64
	// Traced: changes are recorded (the metadata's inputs say so), so the
	// limits follow them; without, only the start's are known.
	Traced bool
	// Changes counts the changes since the start (the global limit's and
	// the shown CPUs'), IntervalChanges those of the last interval.
	Changes, IntervalChanges uint64
}

// TopFrame is one refresh of the live view.
type TopFrame struct {
	// ElapsedNs is the time since the recording's start snapshot;
	// IntervalNs the time Interval covers (since the previous frame).
	ElapsedNs, IntervalNs uint64
	// Interval holds the records that arrived since the previous frame,
	// Total those since the start.
	Interval, Total *Stats
	// PMQoS is the latency constraints in force at the frame.
	PMQoS TopPMQoS
}

// NewTop starts the live aggregation of a recording whose metadata is
// meta, at nowNs (CLOCK_MONOTONIC, as the trace's times); the first
// interval starts at the start snapshot when the metadata has one.
func NewTop(meta *trace.Metadata, nowNs uint64) *Top {
	t := &Top{cur: NewStatsBuilder(meta, nil), total: NewStatsBuilder(meta, nil), startNs: nowNs}
	if meta != nil && meta.Start != nil && meta.Start.MonotonicNs > 0 && meta.Start.MonotonicNs <= nowNs {
		t.startNs = meta.Start.MonotonicNs
	}
	t.lastNs = t.startNs
	t.qos.GlobalUs = -1
	if meta != nil {
		t.qos.GlobalUs = meta.PMQoS.CPUDMALatencyUs
		t.qos.ResumeUs = slices.Clone(meta.PMQoS.ResumeLatencyUs)
		t.qos.Traced = meta.Inputs.PMQoSTrace
		if len(meta.RecordedCPUs) > 0 { // --cpus: those CPUs' constraints only
			t.shownCPU = map[int32]bool{}
			for _, c := range meta.RecordedCPUs {
				t.shownCPU[int32(c)] = true
			}
			for c := range t.qos.ResumeUs {
				if !t.shownCPU[int32(c)] {
					t.qos.ResumeUs[c] = -1
				}
			}
		}
	}
	return t
}

// Visitor returns the trace.Visitor that feeds both builders.
func (t *Top) Visitor() trace.Visitor {
	return trace.Visitor{
		Idle: func(p *trace.IdlePeriod) error {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.cur.AddIdle(p)
			return t.total.AddIdle(p)
		},
		BlockIO: func(b *trace.BlockIO) error {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.cur.AddBlockIO(b)
			return t.total.AddBlockIO(b)
		},
		Loss: func(l *trace.Loss) error {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.cur.AddLoss(l)
			return t.total.AddLoss(l)
		},
		PMQoS: func(q *trace.PMQoSChange) error {
			t.mu.Lock()
			defer t.mu.Unlock()
			switch {
			case q.CPU == trace.PMQoSGlobal:
				t.qos.GlobalUs = q.LimitUs
			case q.CPU >= 0 && q.CPU < trace.MaxCPUs && (t.shownCPU == nil || t.shownCPU[q.CPU]):
				for len(t.qos.ResumeUs) <= int(q.CPU) {
					t.qos.ResumeUs = append(t.qos.ResumeUs, -1)
				}
				t.qos.ResumeUs[q.CPU] = q.LimitUs
			default:
				return nil // a CPU not shown
			}
			t.qos.Changes++
			t.qos.IntervalChanges++
			return nil
		},
	}
}

// Frame closes the current interval at nowNs and returns its figures and
// the running totals; the next interval starts there.
func (t *Top) Frame(nowNs uint64) *TopFrame {
	t.mu.Lock()
	done := t.cur
	t.cur = done.Next()
	total := t.total.Current()
	f := &TopFrame{Total: total, PMQoS: t.qos}
	f.PMQoS.ResumeUs = slices.Clone(t.qos.ResumeUs)
	t.qos.IntervalChanges = 0
	if nowNs > t.lastNs {
		f.IntervalNs = nowNs - t.lastNs
	}
	if nowNs > t.startNs {
		f.ElapsedNs = nowNs - t.startNs
	}
	t.lastNs = max(t.lastNs, nowNs)
	t.mu.Unlock()
	// done is no longer fed: finish it without holding the recorder up.
	f.Interval = done.Finish(nil)
	return f
}
