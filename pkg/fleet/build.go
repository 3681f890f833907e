package fleet

import (
	"fmt"
	"math"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/latency"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Key is what every row of one trace starts with, after its kind: which
// host and trace it is, and what the trace says of its machine (the key
// columns of both files: StatsRow and WhatifRow embed it).
type Key struct {
	Host                string  `parquet:"host,dict" json:"host"`
	Trace               string  `parquet:"trace,dict" json:"trace"`
	RecordedStartUnixNs *int64  `parquet:"recorded_start_unix_ns,optional" json:"recorded_start_unix_ns"`
	KernelRelease       *string `parquet:"kernel_release,optional,dict" json:"kernel_release"`
	CPUModel            *string `parquet:"cpu_model,optional,dict" json:"cpu_model"`
	Driver              *string `parquet:"driver,optional,dict" json:"driver"`
	Governor            *string `parquet:"governor,optional,dict" json:"governor"`
	HZ                  *int32  `parquet:"hz,optional" json:"hz"`
}

// NoHostError is KeyOf's refusal of a trace that names no host when no
// --host was given: rows without a host cannot be merged with others.
type NoHostError struct {
	Trace string
	Named string // the name it gives, where that names no one host ("(none)")
}

func (e *NoHostError) Error() string {
	if e.Named != "" {
		return fmt.Sprintf("%s names its host %q, the kernel's default nodename, which every unnamed machine shares: give --host NAME", e.Trace, e.Named)
	}
	return fmt.Sprintf("%s names no host (an imported capture?): give --host NAME", e.Trace)
}

// unnamedHost is the nodename a kernel gives a machine nobody named
// (UTS_NODENAME's default): rows keyed by it would merge unrelated hosts.
const unnamedHost = "(none)"

// KeyOf is the key of the trace at path (as given on the command line):
// host overrides the hostname the trace recorded.
func KeyOf(path, host string, meta *trace.Metadata) (Key, error) {
	if meta == nil {
		meta = &trace.Metadata{}
	}
	if host == "" {
		host = meta.Hostname
	}
	if host == "" {
		return Key{}, &NoHostError{Trace: path}
	}
	if host == unnamedHost {
		return Key{}, &NoHostError{Trace: path, Named: host}
	}
	k := Key{Host: host, Trace: path, RecordedStartUnixNs: RecordedStartUnixNs(meta),
		KernelRelease: str(meta.KernelRelease), CPUModel: str(meta.CPUModel),
		Driver: str(meta.CPUIdleDriver), Governor: str(meta.CPUIdleGovernor)}
	if meta.HZ > 0 {
		k.HZ = i32(meta.HZ)
	}
	return k, nil
}

// RecordedStartUnixNs is the wall-clock time of the trace's start
// snapshot, from its wall-clock anchor (a monotonic instant and the Unix
// time at it, taken when recording began); the anchor's own time without a
// start snapshot; nil without an anchor.
//
// Choice: the start snapshot, not the first record, so that a trace's
// stats and whatif rows carry the same instant whatever each counts.
func RecordedStartUnixNs(meta *trace.Metadata) *int64 {
	wc := meta.WallClock
	if wc.UnixNs == 0 {
		return nil
	}
	t := wc.UnixNs
	if meta.Start != nil && meta.Start.MonotonicNs != 0 && wc.MonotonicNs != 0 {
		t += int64(meta.Start.MonotonicNs) - int64(wc.MonotonicNs)
	}
	return &t
}

// StatsRows are the rows of one trace's stats: a state row per CPU and
// state that stats reports (those the kernel's counters hold too), then
// the trace row. periods splits stats' idle period figures by CPU and state
// (StatsFromReader; nil: none).
func StatsRows(k Key, s *analysis.Stats, periods PeriodsByCPUState) []StatsRow {
	head := StatsRow{Key: k, DurationNs: int64(s.DurationNs), LostEvents: int64(s.LostEvents), DamagedChunks: int64(s.Damage.Chunks + s.Damage.Regions)}
	kernel := map[int][]analysis.StateStats{}
	if s.Kernel.Available {
		for _, c := range s.Kernel.CPUs {
			kernel[c.CPU] = c.States
		}
	}
	// Above and below are judged only on a state table: stats shows 0
	// without one (its note says why), a row NULL.
	classified := s.CPUIdleDriver != trace.CPUIdleDriverNone
	var rows []StatsRow
	var idlePeriods uint64
	for _, c := range s.CPUs {
		idlePeriods += c.Periods
		ks, haveKernel := kernel[c.CPU]
		for _, idx := range analysis.StateIndexes(c.States, ks) {
			r := head
			r.Kind = KindState
			r.CPU, r.StateIndex, r.WindowNs = i32(c.CPU), i32(idx), u64(c.WindowNs)
			var t analysis.StateStats
			if p := findState(c.States, idx); p != nil {
				t = *p
			} else {
				t = *findState(ks, idx)
				t.Usage, t.TimeNs, t.Above, t.Below = 0, 0, 0, 0 // the trace saw none
				t.ExitLatencyNs, t.TargetResidencyNs = nil, nil
			}
			r.State = &t.Name
			r.ExitLatencyNs, r.TargetResidencyNs = u64p(t.ExitLatencyNs), u64p(t.TargetResidencyNs)
			r.Usage, r.TimeNs = u64(t.Usage), u64(t.TimeNs)
			if classified && t.TargetResidencyNs != nil { // a table: an import's lacks exit latencies, not the rule
				r.Above, r.Below = u64(t.Above), u64(t.Below)
			}
			if haveKernel {
				if ke := findState(ks, idx); ke != nil {
					r.KernelUsage, r.KernelTimeNs = u64(ke.Usage), u64(ke.TimeNs)
					r.KernelAbove, r.KernelBelow, r.KernelRejected = u64(ke.Above), u64(ke.Below), u64p(ke.Rejected)
				}
			}
			p := periods[[2]int{c.CPU, idx}]
			if p == nil {
				p = &CPUStatePeriods{}
			}
			if s.Inputs.WakeRequests {
				r.WakeLatency = WakeLatency(histogramCols(&p.WakeLatencyNs))
			}
			r.IdlePeriodLength = IdlePeriodLength(histogramCols(&p.LengthNs))
			if s.Inputs.TickState {
				r.TickStopped, r.TickStoppedKnown = u64(p.TickStopped.Stopped), u64(p.TickStopped.Known)
			}
			if s.Inputs.TickStateBefore {
				r.TickStoppedBefore, r.TickStoppedBeforeKnown = u64(p.TickStoppedBefore.Stopped), u64(p.TickStoppedBefore.Known)
			}
			rows = append(rows, r)
		}
	}
	r := head
	r.Kind = KindTrace
	r.CPUs, r.IdlePeriods = i32(len(s.CPUs)), u64(idlePeriods)
	r.CutShort, r.Mismatches = &s.CutShort, i64(int64(len(s.Mismatches)))
	r.IOFilter = str(s.IO.Filter)
	r.KernelTickStops = kernelTickStops(s.CPUs)
	if s.Inputs.BlockIO {
		io := &s.IO
		r.IORequests, r.IOErrors = u64(io.Requests), u64(io.Errors)
		if io.WokeIdleKnown() {
			r.IOWokeIdle = u64(io.WokeIdleCPU)
		}
		r.IOLatency = IOLatency(summaryCols(&io.LatencyNs, io.Requests))
		if s.Inputs.TaskIO {
			r.TaskIOWaited = u64(io.TaskWaited)
			r.TaskIOLatency = TaskIOLatency(summaryCols(io.TaskLatencyNs, io.TaskWaited))
		}
	}
	return append(rows, r)
}

// WhatifRows are the rows of one trace's what-if report: one per policy,
// in the report's (the command line's) order. ioFilter is the --io filter
// the replay applied ("" for none).
func WhatifRows(k Key, rep *analysis.WhatifReport, ioFilter string) []WhatifRow {
	head := WhatifRow{Kind: KindPolicy, Key: k, IOFilter: str(ioFilter)}
	if p := rep.Profile; p != nil {
		head.Profile = p.Name
		if p.HZ > 0 {
			head.HZ = i32(p.HZ)
		}
	}
	rows := make([]WhatifRow, 0, len(rep.Results))
	for i := range rep.Results {
		res := &rep.Results[i]
		r := head
		r.PolicyIndex, r.Policy = int32(i), res.Policy
		r.IdlePeriods, r.Selections = int64(res.IdlePeriods), int64(res.Selections)
		r.PollLimitNs = u64p(res.PollLimitNs)
		r.WakeupsPolling, r.PollTimeouts = int64(res.WakeupsPolling), u64p(res.PollTimeouts)
		w := summaryCols(&res.WakeLatencyNs, res.WakeLatencyNs.Count)
		r.PolicyWakeLatency = PolicyWakeLatency{Count: *w.Count, Mean: w.Mean, P50: w.P50, P99: w.P99, P999: w.P999, Max: w.Max}
		if res.IOLatencyNs != nil {
			r.IOLatency = IOLatency(summaryCols(res.IOLatencyNs, res.IOLatencyNs.Count))
		}
		r.IOWokeIdle = u64p(res.IOWokeIdle)
		if res.TaskIOLatencyNs != nil {
			r.TaskIOLatency = TaskIOLatency(summaryCols(res.TaskIOLatencyNs, res.TaskIOLatencyNs.Count))
		}
		r.Above, r.Below = int64(res.Above), int64(res.Below)
		r.EnergyRel = finite(res.EnergyRel)
		if res.Agreement != nil {
			r.Agreement = finite(*res.Agreement)
		}
		r.StateShare = make(map[string]Float, len(res.StateShare))
		for name, v := range res.StateShare {
			if f := finite(v); f != nil {
				r.StateShare[name] = *f
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// summary is the columns of one latency summary over n values: count,
// then NULL for the rest without a value.
type summary struct {
	Count *int64
	Mean  *Float
	P50   *int64
	P99   *int64
	P999  *int64
	Max   *int64
}

func summaryCols(s *latency.Summary, n uint64) summary {
	out := summary{Count: u64(n)}
	if s == nil || s.Count == 0 || n == 0 {
		return out
	}
	out.Mean = finite(s.Mean)
	out.P50, out.P99, out.P999, out.Max = u64(s.P50), u64(s.P99), u64(s.P999), u64(s.Max)
	return out
}

func histogramCols(h *latency.Histogram) summary {
	sum := h.Summary()
	return summaryCols(&sum, sum.Count)
}

// kernelTickStops is the kernel's count of idle entries with the tick
// stopped, over every CPU stats covers (the sum of the state rows'
// tick_stopped counts the same from the trace); nil unless every one of
// them has the kernel's count, so that the two compare.
func kernelTickStops(cpus []analysis.CPUStats) *int64 {
	var n uint64
	for _, c := range cpus {
		if c.KernelTickStops == nil {
			return nil
		}
		n += *c.KernelTickStops
	}
	if len(cpus) == 0 {
		return nil
	}
	return u64(n)
}

func findState(states []analysis.StateStats, idx int) *analysis.StateStats {
	for i := range states {
		if states[i].Index == idx {
			return &states[i]
		}
	}
	return nil
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func i32(v int) *int32 {
	x := int32(v)
	return &x
}

func i64(v int64) *int64 { return &v }

// u64 is a count or a time in ns as Parquet's (and Spark's) signed int64;
// none comes near 2^63.
func u64(v uint64) *int64 {
	x := int64(min(v, math.MaxInt64))
	return &x
}

func u64p(v *uint64) *int64 {
	if v == nil {
		return nil
	}
	return u64(*v)
}

func finite(f float64) *Float {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	x := Float(f)
	return &x
}
