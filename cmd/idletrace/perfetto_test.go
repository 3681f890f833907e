package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// cpuIdleTotals walks a Perfetto trace's packets (Trace.packet 1 →
// TracePacket.ftrace_events 1 → FtraceEventBundle.event 2 → FtraceEvent
// timestamp 1, cpu_idle 13 → CpuIdleFtraceEvent state 1, cpu_id 2) and
// adds up per CPU the cpu_idle entries and the time from each to its exit.
// (pkg/export's test decodes every message of the file against the whole
// layout; this one reads what the comparison with stats needs.)
func cpuIdleTotals(t *testing.T, data []byte) map[int][2]uint64 {
	t.Helper()
	fields := func(b []byte, each func(num protowire.Number, v uint64, sub []byte)) {
		for len(b) > 0 {
			num, wt, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("bad tag: %v", protowire.ParseError(n))
			}
			b = b[n:]
			var v uint64
			var sub []byte
			switch wt {
			case protowire.VarintType:
				v, n = protowire.ConsumeVarint(b)
			case protowire.Fixed64Type:
				v, n = protowire.ConsumeFixed64(b)
			case protowire.BytesType:
				sub, n = protowire.ConsumeBytes(b)
			default:
				t.Fatalf("field %d: wire type %d the writer never uses", num, wt)
			}
			if n < 0 {
				t.Fatalf("field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			each(num, v, sub)
		}
	}
	totals := map[int][2]uint64{}
	entry := map[int]uint64{}
	fields(data, func(num protowire.Number, _ uint64, packet []byte) {
		if num != 1 {
			t.Fatalf("Trace field %d", num)
		}
		fields(packet, func(num protowire.Number, _ uint64, bundle []byte) {
			if num != 1 {
				return
			}
			fields(bundle, func(num protowire.Number, _ uint64, ev []byte) {
				if num != 2 {
					return
				}
				var ns uint64
				var state, cpu uint64
				fields(ev, func(num protowire.Number, v uint64, idle []byte) {
					switch num {
					case 1:
						ns = v
					case 13:
						fields(idle, func(num protowire.Number, v uint64, _ []byte) {
							if num == 1 {
								state = v
							} else if num == 2 {
								cpu = v
							}
						})
					}
				})
				c := int(cpu)
				if state == 1<<32-1 {
					totals[c] = [2]uint64{totals[c][0] + 1, totals[c][1] + ns - entry[c]}
				} else {
					entry[c] = ns
				}
			})
		})
	})
	return totals
}

// TestExportPerfetto: --format perfetto writes to -o FILE, into -o DIR as
// TRACE-NAME.pftrace, or to stdout, with a one-line summary; refuses an
// existing file without --force and --table; leaves no partial file; and
// with --stats-window its cpu_idle events give stats' usage and time per
// CPU.
func TestExportPerfetto(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.pftrace")
	r := runBin(t, "export", bundledTrace, "--format", "perfetto", "-o", file, "--stats-window")
	want := "idletrace export: 78422 idle periods, 58723 IO requests and 69939 wake-request flows as 481374 Perfetto events to " + file + "\n"
	if r.code != 0 || r.stderr != want || r.stdout != "" {
		t.Fatalf("exit %d, stderr %q, stdout %.80q; want exit 0 and stderr %q", r.code, r.stderr, r.stdout, want)
	}
	data, _ := os.ReadFile(file)
	got := cpuIdleTotals(t, data)

	s := runBin(t, "stats", bundledTrace, "--format", "json")
	var st struct {
		CPUs []struct {
			CPU    int `json:"cpu"`
			States []struct {
				Usage  uint64 `json:"usage"`
				TimeNs uint64 `json:"time_ns"`
			} `json:"states"`
		} `json:"cpus"`
	}
	if err := json.Unmarshal([]byte(s.stdout), &st); err != nil || s.code != 0 {
		t.Fatalf("stats: %v, %s", err, s.stderr)
	}
	wantTotals := map[int][2]uint64{}
	for _, c := range st.CPUs {
		for _, x := range c.States {
			wantTotals[c.CPU] = [2]uint64{wantTotals[c.CPU][0] + x.Usage, wantTotals[c.CPU][1] + x.TimeNs}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(wantTotals) {
		t.Errorf("per CPU (cpu_idle entries, ns to their exits): %v; stats (usage, time_ns): %v", got, wantTotals)
	}
	t.Logf("per CPU: %v; stats %v", got, wantTotals)

	if r := runBin(t, "export", bundledTrace, "--format", "perfetto", "-o", file); r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("again without --force: exit %d, %q", r.code, r.stderr)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "perfetto", "-o", file, "--force", "-q", "--cpus", "1", "--from", "1s"); r.code != 0 || r.stderr != "" {
		t.Errorf("--force -q: exit %d, %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(file); bytes.Equal(data, after) || cpuIdleTotals(t, after)[0][0] != 0 {
		t.Errorf("--force --cpus 1 --from 1s: %s holds CPU 0's periods or is unchanged", file)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "perfetto", "-o", dir, "-q", "--stats-window"); r.code != 0 {
		t.Errorf("-o DIR: exit %d, %q", r.code, r.stderr)
	} else if named, _ := os.ReadFile(filepath.Join(dir, "demo.pftrace")); !bytes.Equal(named, data) {
		t.Errorf("-o DIR: %s/demo.pftrace is not the export", dir)
	}
	if r := runBin(t, "export", bundledTrace, "--format", "perfetto", "--stats-window", "-q"); r.code != 0 || r.stderr != "" || r.stdout != string(data) {
		t.Errorf("to stdout: exit %d, stderr %q, %d bytes (the file: %d)", r.code, r.stderr, len(r.stdout), len(data))
	}
	if r := runBin(t, "export", bundledTrace, "--format", "perfetto", "--table", "idle_periods"); r.code != 2 || !strings.Contains(r.stderr, "--table") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("--table: exit %d, %q", r.code, r.stderr)
	}
	cmd, _, out, errb := runOnPTY(t, "export", bundledTrace, "--format", "perfetto")
	if code := waitExit(t, cmd, out, 30*time.Second); code != 2 || !strings.Contains(errb.String(), "-o FILE") || out.String() != "" {
		t.Errorf("to a terminal: exit %d, stderr %q, %d bytes on the terminal", code, errb.String(), len(out.String()))
	}
	for _, bad := range [][]byte{[]byte("IDLETRC\x00garbage"), nil, []byte("not a trace at all")} {
		cut := writeFile(t, "cut.trace", bad)
		gone := filepath.Join(dir, "cut.pftrace")
		if r := runBin(t, "export", cut, "--format", "perfetto", "-o", gone); r.code != 1 || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "panic") {
			t.Errorf("a broken trace %q: exit %d, %q", bad, r.code, r.stderr)
		}
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("a failed export left %s", gone)
		}
	}
}
