package analysis

import (
	"fmt"
	"sort"

	"github.com/idletrace/idletrace/pkg/iowake"
	"github.com/idletrace/idletrace/pkg/trace"
)

// The block IO part of the report: request and task latencies, the
// completions that woke an idle CPU, and each device's requests checked
// against the kernel's completed counts (/sys/block/DEV/stat). It is apart
// from the rest of finish because it keeps its own reconciliation with the
// kernel: completions whose issue the recorder never saw explain a
// difference instead of raising a mismatch.

// ioStats sets the block IO figures and checks the devices' completions
// against the kernel's; flush first closes the IO-wake matcher.
func (b *StatsBuilder) ioStats(s *Stats, flush bool) {
	m := b.meta
	s.IO.Requests = b.io.Count()
	s.IO.LatencyNs = b.io.Summary()
	s.IO.Filter = b.ioFilter.Spec
	if m.Inputs.TaskIO || b.taskIO.Count() > 0 {
		t := b.taskIO.Summary()
		s.IO.TaskLatencyNs, s.IO.TaskWaited = &t, t.Count
	}
	s.IO.Errors = b.ioErr
	if flush {
		b.iowake.Flush()
	}
	s.IO.WokeIdleCPUByCause = map[string]uint64{}
	for c, n := range b.ioWoke {
		// The eligible causes are listed even at zero.
		if cause := trace.WakeCause(c); n > 0 || iowake.Eligible(cause) {
			s.IO.WokeIdleCPU += n
			s.IO.WokeIdleCPUByCause[cause.String()] = n
		}
	}
	s.IO.WokeIdleUnknown = b.ioWokeUnknown
	s.IO.wokeKnown = iowake.WokeKnown(m.Inputs, s.IO.Requests, s.IO.WokeIdleCPU, s.IO.WokeIdleUnknown)
	s.IO.WokeWindowNs = iowake.WindowNs
	s.IO.Devices = b.deviceStats()
	// Devices with traced requests: the kernel's counters list devices
	// whatever the recording traced (record --no-io reads them too).
	s.IO.recorded = m.Inputs.BlockIO || len(b.devs) > 0
	// The kernel also counts completions whose issue the recorder did not
	// see (issued before it attached): the snapshots carry that count.
	var undelivered *uint64
	if unmatched, orphaned, ok := trace.IOUndelivered(m.Start, b.end); ok {
		s.IO.WithoutIssueInWindow, s.IO.UndeliveredInWindow = &unmatched, &orphaned
		d := unmatched + orphaned
		undelivered = &d
	}
	s.IO.KernelDiffExplained, s.Mismatches = checkDevices(s.IO.Devices, undelivered, s.Mismatches)
}

// checkDevices holds each device's traced completions to the kernel's
// count: equal, or short by the requests the recording says the trace
// lacks (undelivered, over every device; nil: unknown), within the range
// a snapshot's moving counts leave. They agree when some split of the
// account over the devices puts every device's traced count plus its share
// in its range: each device needs at least max(0, lo−traced) of it and
// takes at most hi−traced. explained: they differ, and the account closes
// the difference.
func checkDevices(devs []DeviceStats, undelivered *uint64, mm []Mismatch) (explained bool, _ []Mismatch) {
	var need uint64
	over, differ := false, false
	for i := range devs {
		d := &devs[i]
		lo, hi, ok := d.kernelBounds()
		if !ok {
			continue
		}
		over = over || d.Requests > hi
		differ = differ || d.Requests != *d.KernelCompleted
		need += sub(lo, d.Requests)
	}
	if undelivered != nil {
		explained = !over && (differ || *undelivered > 0) && need <= *undelivered && *undelivered <= accountRoom(devs)
	}
	if explained {
		return true, mm
	}
	// Without the account, or where it does not close the difference: each
	// device its range alone.
	for _, d := range devs {
		if lo, hi, ok := d.kernelBounds(); ok && (d.Requests < lo || d.Requests > hi) {
			mm = append(mm, Mismatch{Kind: "block", CPU: -1, State: -1, Device: d.Name, Name: d.Name, Field: "completed",
				Traced: d.Requests, Kernel: *d.KernelCompleted, KernelRange: d.KernelCompletedRange})
		}
	}
	return false, mm
}

// accountRoom is how many of the requests the recording says the trace
// lacks the kernel's counts leave room for (each device's high bound less
// its traced count).
func accountRoom(devs []DeviceStats) uint64 {
	var room uint64
	for i := range devs {
		if _, hi, ok := devs[i].kernelBounds(); ok {
			room += sub(hi, devs[i].Requests)
		}
	}
	return room
}

func (b *StatsBuilder) deviceStats() []DeviceStats {
	type key struct{ major, minor uint32 }
	names := map[key]string{}
	for _, d := range b.meta.BlockDevices {
		names[key{d.Major, d.Minor}] = d.Name
	}
	var endSnap *trace.Snapshot
	if b.end != nil {
		endSnap = b.end.Snapshot
	}
	type count struct{ n, lo, hi uint64 }
	kernel := map[key]count{}
	if b.meta.Start != nil && endSnap != nil {
		start := map[key]trace.BlockCounter{}
		for _, c := range b.meta.Start.Block {
			start[key{c.Major, c.Minor}] = c
			if _, ok := names[key{c.Major, c.Minor}]; !ok && c.Name != "" {
				names[key{c.Major, c.Minor}] = c.Name
			}
		}
		for _, c := range endSnap.Block {
			k := key{c.Major, c.Minor}
			if s0, ok := start[k]; ok {
				lo, hi := trace.BlockCompletedIn(s0, c)
				kernel[k] = count{sub(c.Completed(), s0.Completed()), lo, hi}
				if _, ok := names[k]; !ok && c.Name != "" {
					names[k] = c.Name
				}
			}
		}
	}
	seen := map[key]bool{}
	var out []DeviceStats
	add := func(k key, d *devAcc) {
		if seen[k] {
			return
		}
		seen[k] = true
		ds := DeviceStats{Name: names[k], Major: k.major, Minor: k.minor}
		if ds.Name == "" {
			ds.Name = fmt.Sprintf("%d:%d", k.major, k.minor)
		}
		if d != nil {
			ds.Requests, ds.Errors = d.requests, d.errors
		}
		if n, ok := kernel[k]; ok {
			ds.KernelCompleted = &n.n
			if n.lo != n.hi {
				ds.KernelCompletedRange = &[2]uint64{n.lo, n.hi}
			}
		}
		out = append(out, ds)
	}
	for dev, d := range b.devs {
		add(key{dev >> 20, dev & (1<<20 - 1)}, d)
	}
	for k, n := range kernel {
		if n.hi > 0 {
			add(k, nil)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Major<<20|out[i].Minor < out[j].Major<<20|out[j].Minor
	})
	if out == nil {
		out = []DeviceStats{}
	}
	return out
}
