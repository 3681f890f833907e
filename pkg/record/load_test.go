package record

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/bpf"
)

// loadPlanned against a fake loader that refuses some programs by name:
// the method each probe ends with, the loads tried after a refusal,
// whether the maps are to be made again, and the error (and loadError's
// fix) when a probe's last method is refused.
func TestLoadPlanned(t *testing.T) {
	errRefused := &ebpf.VerifierError{Cause: unix.EACCES, Log: []string{"R1 invalid mem access 'scalar'"}}
	// A kernel before 6.6: tp_btf for everything but the IPI sends, which
	// go to fentry.
	pre66 := func() *attachPlan {
		plan := &attachPlan{method: map[string]string{}, reason: map[string]string{}}
		for _, p := range probes {
			plan.method[p.name()] = AttachTPBTF
		}
		plan.method["ipi:ipi_send_cpu"] = AttachFentry
		plan.method["ipi:ipi_send_cpumask"] = AttachFentry
		return plan
	}
	classic := func() *attachPlan {
		plan := &attachPlan{method: map[string]string{}, reason: map[string]string{}}
		for _, p := range probes {
			plan.method[p.name()] = AttachTracepoint
		}
		return plan
	}
	cases := []struct {
		name    string
		plan    func() *attachPlan
		refuse  []string
		changed map[string]string // the probes whose method changes ("" for missing)
		calls   []string          // consecutive loads (a call's programs joined by +), from the first refused
		remake  bool
		err     string // the error, "" for none
		fix     string // in loadError's fix
	}{
		{name: "everything loads", plan: pre66},
		{
			name:    "tp_btf refused, classic loads",
			plan:    pre66,
			refuse:  []string{bpf.IdletraceProgBtfCpuIdle},
			changed: map[string]string{"power:cpu_idle": AttachTracepoint},
			calls:   []string{bpf.IdletraceProgBtfCpuIdle, bpf.IdletraceProgTpCpuIdle, bpf.IdletraceProgBtfBlockRqIssue},
		},
		{
			name:    "tick_stop falls back: its flag stays",
			plan:    pre66,
			refuse:  []string{bpf.IdletraceProgBtfTickStop},
			changed: map[string]string{"timer:tick_stop": AttachTracepoint},
			calls:   []string{bpf.IdletraceProgBtfTickStop, bpf.IdletraceProgTpTickStop, bpf.IdletraceProgBtfSchedWakeIdleWithoutIpi},
		},
		{
			name:    "an fentry program refused: the probe goes missing, the maps are made again",
			plan:    pre66,
			refuse:  []string{bpf.IdletraceProgFentrySendCallFuncSingleIpi},
			changed: map[string]string{"ipi:ipi_send_cpu": ""},
			calls: []string{
				bpf.IdletraceProgFentrySmpSendReschedule + "+" + bpf.IdletraceProgFentrySendCallFuncSingleIpi,
				bpf.IdletraceProgFentrySendCallFuncIpi,
			},
			remake: true,
		},
		{
			name:   "neither of cpu_idle's programs loads",
			plan:   pre66,
			refuse: []string{bpf.IdletraceProgBtfCpuIdle, bpf.IdletraceProgTpCpuIdle},
			calls:  []string{bpf.IdletraceProgBtfCpuIdle, bpf.IdletraceProgTpCpuIdle},
			err:    "tracepoint power:cpu_idle: tp_btf refused (" + errRefused.Error() + "), then tracepoint: " + errRefused.Error(),
			fix:    "record on another kernel",
		},
		{
			name:    "a classic block program refused: the recording goes on without block IO, every block probe missing",
			plan:    classic,
			refuse:  []string{bpf.IdletraceProgTpBlockRqComplete},
			calls:   []string{bpf.IdletraceProgTpBlockRqComplete, bpf.IdletraceProgTpIrqHandlerEntry},
			changed: map[string]string{"block:block_rq_issue": "", "block:block_rq_complete": "", "block:block_rq_requeue": ""},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := c.plan()
			want := maps.Clone(plan.method)
			for name, m := range c.changed {
				if m == "" {
					delete(want, name)
				} else {
					want[name] = m
				}
			}
			var calls []string
			loaded := map[string]int{}
			load := func(names []string) error {
				calls = append(calls, strings.Join(names, "+"))
				for _, n := range names {
					if slices.Contains(c.refuse, n) {
						return errRefused
					}
				}
				for _, n := range names {
					loaded[n]++
				}
				return nil
			}
			remake, err := loadPlanned(plan, load)
			if len(c.refuse) > 0 {
				i := slices.Index(calls, c.calls[0])
				if i < 0 || len(calls) < i+len(c.calls) || !slices.Equal(calls[i:i+len(c.calls)], c.calls) {
					t.Errorf("loads %v, want %v in a row", calls, c.calls)
				}
			}
			if c.err != "" {
				var pe *probeLoadError
				if !errors.As(err, &pe) || err.Error() != c.err || !errors.Is(err, errRefused) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				var fe *FeatureError
				if lerr := loadError(err); !errors.As(lerr, &fe) || !strings.Contains(fe.Fix, c.fix) || !strings.Contains(fe.Problem, c.err) {
					t.Errorf("loadError: %v, want a fix with %q", lerr, c.fix)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if remake != c.remake {
				t.Errorf("remake %v, want %v", remake, c.remake)
			}
			if !maps.Equal(plan.method, want) {
				t.Errorf("methods %v, want %v", plan.method, want)
			}
			for name, m := range c.changed {
				if m == "" && !strings.Contains(plan.reason[name], errRefused.Error()) {
					t.Errorf("%s missing for %q, want the loader's error", name, plan.reason[name])
				}
			}
			// Every probe still planned has its programs loaded, once.
			for _, p := range probes {
				for _, n := range plan.programs(p) {
					if loaded[n] != 1 {
						t.Errorf("%s loaded %d times", n, loaded[n])
					}
				}
			}
		})
	}
}
