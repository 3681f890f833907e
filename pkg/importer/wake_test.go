package importer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/trace"
)

// wl is one line of a synthetic capture: CPU, time in µs after 1 s, event, fields.
type wl struct {
	cpu    int
	us     float64
	name   string
	fields string
}

var category = map[string]string{"cpu_idle": "power", "irq_handler_entry": "irq", "hrtimer_expire_entry": "timer"}

// captureText writes lines in perf script's, tracefs' (Ftrace: with the
// flags column) or trace-cmd report's shape.
func captureText(format string, header string, lines []wl) string {
	var b strings.Builder
	b.WriteString(header)
	for _, l := range lines {
		ns := uint64(1e9 + l.us*1000)
		ts := fmt.Sprintf("%d.%09d", ns/1e9, ns%1e9)
		if format == PerfScript {
			cat := category[l.name]
			if cat == "" {
				cat = "irq_vectors"
			}
			fmt.Fprintf(&b, "%16s %5d [%03d] %s: %s:%s: %s\n", "swapper", 0, l.cpu, ts, cat, l.name, l.fields)
		} else if format == "trace-cmd" {
			// trace-cmd report without the latency columns.
			fmt.Fprintf(&b, "%16s-%-5d [%03d] %s: %s: %s\n", "<idle>", 0, l.cpu, ts, l.name, l.fields)
		} else {
			fmt.Fprintf(&b, "%16s-%-7d [%03d] d.h1. %s: %s: %s\n", "<idle>", 0, l.cpu, ts, l.name, l.fields)
		}
	}
	return b.String()
}

// preamble puts one of each event of the set on CPU 1 (not idle) before
// the test's lines, so that the capture holds the set; drop leaves some out.
func preamble(drop ...string) []wl {
	var out []wl
	for _, n := range []string{"irq_handler_entry", "local_timer_entry", "local_timer_exit", "reschedule_entry", "call_function_entry", "call_function_single_entry", "hrtimer_expire_entry"} {
		f := "vector=236"
		switch n {
		case "irq_handler_entry":
			f = "irq=1 name=i8042"
		case "hrtimer_expire_entry":
			f = "hrtimer=0xffff888627d206f8 function=hrtimer_wakeup now=1"
		}
		keep := true
		for _, d := range drop {
			keep = keep && d != n
		}
		if keep {
			out = append(out, wl{1, 0.5, n, f})
		}
	}
	return out
}

func entry(us float64, state int) wl {
	return wl{0, us, "cpu_idle", fmt.Sprintf("state=%d cpu_id=0", state)}
}
func exit(us float64) wl { return wl{0, us, "cpu_idle", "state=4294967295 cpu_id=0"} }
func irq(us float64, n int) wl {
	return wl{0, us, "irq_handler_entry", fmt.Sprintf("irq=%d name=virtio%d", n, n)}
}
func ev(us float64, name string) wl { return wl{0, us, name, "vector=236"} }
func hrt(us float64, fn string) wl {
	return wl{0, us, "hrtimer_expire_entry", "hrtimer=0xffff888627c206f8 function=" + fn + " now=1000"}
}

type cause struct {
	c   trace.WakeCause
	irq int32
}

func TestImportWakeCauses(t *testing.T) {
	const (
		unknown = trace.WakeUnknown
		timer   = trace.WakeTimer
		tick    = trace.WakeTick
		resched = trace.WakeIPIResched
		call    = trace.WakeIPICall
	)
	tests := []struct {
		name   string
		header string // before the lines
		drop   []string
		events []string // Options.Events
		lines  []wl
		want   []cause // CPU 0's periods in exit order
		wakes  string  // Probes["wake causes"] prefix
		ticks  string  // Probes["tick wake-ups"] prefix
	}{
		{name: "HLT: the handler before the exit", lines: []wl{entry(10, 1), irq(20, 36), exit(21)},
			want: []cause{{trace.WakeIRQ, 36}}, wakes: "imported", ticks: "imported"},
		{name: "the first event while idle wins", lines: []wl{entry(10, 1), ev(20, "local_timer_entry"), ev(21, "reschedule_entry"), ev(22, "local_timer_exit"), exit(23)},
			want: []cause{{timer, -1}}},
		{name: "MWAIT: the handler after the exit, within 50 µs", lines: []wl{entry(10, 1), exit(20), ev(40, "reschedule_entry")},
			want: []cause{{resched, -1}}},
		{name: "MWAIT: exactly 50 µs after", lines: []wl{entry(10, 1), exit(20), ev(70, "call_function_single_entry")},
			want: []cause{{call, -1}}},
		{name: "MWAIT: 51 µs after is too late", lines: []wl{entry(10, 1), exit(20), irq(71, 5), entry(80, 1), irq(90, 7), exit(95)},
			want: []cause{{unknown, -1}, {trace.WakeIRQ, 7}}},
		{name: "the next entry ends the wait", lines: []wl{entry(10, 1), exit(20), entry(25, 1), irq(30, 9), exit(35)},
			want: []cause{{unknown, -1}, {trace.WakeIRQ, 9}}},
		{name: "pending: only the first event", lines: []wl{entry(10, 1), exit(20), ev(25, "call_function_entry"), irq(26, 3)},
			want: []cause{{call, -1}}},
		{name: "tick while idle (tick_nohz_handler)", lines: []wl{entry(10, 1), ev(20, "local_timer_entry"), hrt(21, "tick_nohz_handler"), ev(22, "local_timer_exit"), exit(23)},
			want: []cause{{tick, -1}}},
		{name: "another hrtimer while idle stays timer", lines: []wl{entry(10, 1), ev(20, "local_timer_entry"), hrt(21, "hrtimer_wakeup"), ev(22, "local_timer_exit"), exit(23)},
			want: []cause{{timer, -1}}},
		{name: "pending tick until local_timer_exit (tick_sched_timer)", lines: []wl{entry(10, 1), exit(20), ev(25, "local_timer_entry"), hrt(26, "hrtimer_wakeup"), hrt(27, "tick_sched_timer"), ev(28, "local_timer_exit")},
			want: []cause{{tick, -1}}},
		{name: "pending timer: a tick after local_timer_exit is not its", lines: []wl{entry(10, 1), exit(20), ev(25, "local_timer_entry"), ev(28, "local_timer_exit"), hrt(29, "tick_nohz_handler")},
			want: []cause{{timer, -1}}},
		{name: "pending timer: another event before its exit changes nothing", lines: []wl{entry(10, 1), exit(20), ev(25, "local_timer_entry"), irq(26, 4), ev(28, "local_timer_exit")},
			want: []cause{{timer, -1}}},
		{name: "polling (state 0, no table): the last event wins", lines: []wl{entry(10, 0), irq(12, 5), ev(14, "local_timer_entry"), ev(15, "local_timer_exit"), ev(16, "reschedule_entry"), exit(17)},
			want: []cause{{resched, -1}}},
		{name: "polling: the last is the tick", lines: []wl{entry(10, 0), irq(12, 5), ev(14, "local_timer_entry"), hrt(15, "tick_nohz_handler"), ev(16, "local_timer_exit"), exit(17)},
			want: []cause{{tick, -1}}},
		{name: "polling: nothing, then an event within 50 µs", lines: []wl{entry(10, 0), exit(17), irq(20, 11)},
			want: []cause{{trace.WakeIRQ, 11}}},
		{name: "IRQ numbers per period", lines: []wl{entry(10, 1), irq(11, 0), exit(12), entry(20, 1), irq(21, 1023), exit(22), entry(30, 2), exit(31), irq(32, 47)},
			want: []cause{{trace.WakeIRQ, 0}, {trace.WakeIRQ, 1023}, {trace.WakeIRQ, 47}}},
		{name: "without hrtimer_expire_entry every timer is timer", drop: []string{"hrtimer_expire_entry"},
			lines: []wl{entry(10, 1), ev(20, "local_timer_entry"), ev(22, "local_timer_exit"), exit(23)},
			want:  []cause{{timer, -1}}, wakes: "imported", ticks: "missing: the capture lacks hrtimer_expire_entry"},
		{name: "hrtimer functions as addresses: timer", drop: []string{"hrtimer_expire_entry"},
			lines: []wl{entry(10, 1), ev(20, "local_timer_entry"), hrt(21, "0xffffffff8123a4b0"), ev(22, "local_timer_exit"), exit(23)},
			want:  []cause{{timer, -1}}, wakes: "imported", ticks: "missing: hrtimer_expire_entry shows no function names"},
		{name: "lacking reschedule_entry and call_function_entry: unknown", drop: []string{"reschedule_entry", "call_function_entry"},
			lines: []wl{entry(10, 1), irq(20, 36), exit(21), entry(30, 1), exit(31), ev(32, "local_timer_entry")},
			want:  []cause{{unknown, -1}, {unknown, -1}}, wakes: "missing: the capture lacks reschedule_entry, call_function_entry", ticks: "missing"},
		{name: "perf script --header lists an event that never fired", drop: []string{"call_function_entry"},
			header: "# event : name = irq_vectors:call_function_entry, , id = { 439, 440 }, type = 2\n",
			lines:  []wl{entry(10, 1), irq(20, 36), exit(21)},
			want:   []cause{{trace.WakeIRQ, 36}}, wakes: "imported"},
		{name: "idletrace's export lists its events", drop: []string{"call_function_entry", "local_timer_exit", "hrtimer_expire_entry"},
			header: idletraceEventsHeader + " power:cpu_idle irq_vectors:call_function_entry\n",
			lines:  []wl{entry(10, 1), ev(20, "local_timer_entry"), exit(21)},
			want:   []cause{{timer, -1}}, wakes: "imported", ticks: "missing: the capture lacks hrtimer_expire_entry, local_timer_exit"},
		{name: "--events names what never fired (trace-cmd record -e)", drop: []string{"reschedule_entry", "call_function_entry"},
			events: []string{"irq_vectors:reschedule_entry", "call_function_entry"},
			lines:  []wl{entry(10, 1), irq(20, 36), exit(21)},
			want:   []cause{{trace.WakeIRQ, 36}}, wakes: "imported", ticks: "imported"},
		{name: "--events naming one of them still lacks the other", drop: []string{"reschedule_entry", "call_function_entry"},
			events: []string{"reschedule_entry"},
			lines:  []wl{entry(10, 1), irq(20, 36), exit(21)},
			want:   []cause{{unknown, -1}}, wakes: "missing: the capture lacks call_function_entry"},
	}
	for _, format := range []string{PerfScript, Ftrace, "trace-cmd"} {
		for _, tc := range tests {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				text := captureText(format, tc.header, append(preamble(tc.drop...), tc.lines...))
				r, sum, err := importString(t, text, Options{Events: tc.events})
				if err != nil {
					t.Fatalf("%v\n%s", err, text)
				}
				if want := strings.Replace(format, "trace-cmd", Ftrace, 1); sum.Format != want {
					t.Errorf("format %s", sum.Format)
				}
				var got []cause
				if err := r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
					if p.CPU == 0 {
						got = append(got, cause{p.WakeCause, p.WakeIRQ})
					}
					return nil
				}}); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("causes %v, want %v\n%s", got, tc.want, text)
				}
				m := r.Meta
				if tc.wakes != "" && !strings.HasPrefix(m.Probes["wake causes"], tc.wakes) {
					t.Errorf("Probes[wake causes] = %q, want %q…", m.Probes["wake causes"], tc.wakes)
				}
				if tc.ticks != "" && !strings.HasPrefix(m.Probes["tick wake-ups"], tc.ticks) {
					t.Errorf("Probes[tick wake-ups] = %q, want %q…", m.Probes["tick wake-ups"], tc.ticks)
				}
				if m.Inputs.WakeCauses != strings.HasPrefix(m.Probes["wake causes"], "imported") {
					t.Errorf("Inputs.WakeCauses %v with %q", m.Inputs.WakeCauses, m.Probes["wake causes"])
				}
				if m.Inputs.TickWakeups != strings.HasPrefix(m.Probes["tick wake-ups"], "imported") {
					t.Errorf("Inputs.TickWakeups %v with %q", m.Inputs.TickWakeups, m.Probes["tick wake-ups"])
				}
			})
		}
	}
}

// A profile's table says which states poll: with one, state 0 that does
// not poll takes the first event; state 1 named POLL the last.
func TestImportWakePollingTable(t *testing.T) {
	states := []trace.StateInfo{{Index: 0, Name: "WFI"}, {Index: 1, Name: "POLL"}}
	lines := append(preamble(), entry(10, 0), irq(11, 1), irq(12, 2), exit(13), entry(20, 1), irq(21, 3), irq(22, 4), exit(23))
	r, _, err := importString(t, captureText(Ftrace, "", lines), Options{States: states})
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	r.Scan(trace.Visitor{Idle: func(p *trace.IdlePeriod) error {
		if p.CPU == 0 {
			got = append(got, p.WakeIRQ)
		}
		return nil
	}})
	if fmt.Sprint(got) != "[1 4]" {
		t.Errorf("IRQs %v, want [1 4] (first in WFI, last in POLL)", got)
	}
}
