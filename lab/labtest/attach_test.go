//go:build lab

package labtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pokeScript arms a kprobe on x86's text_poke_bp_batch (Linux 6.12: every
// patch by the int3 protocol, jump labels' and static calls' alike, ends
// there) in a trace instance of its own, empties that instance's buffer
// (arming the kprobe patches text too), records twice (two attaches, two
// detaches) and leaves the hits, with their call stacks, in /out/pokes.
const pokeScript = "cd /sys/kernel/tracing && echo 'p:idletrace_poke text_poke_bp_batch' >>kprobe_events && mkdir instances/pokes && " +
	"echo 1 >instances/pokes/options/stacktrace && echo 1 >instances/pokes/events/kprobes/idletrace_poke/enable && " +
	": >instances/pokes/trace && cd /work && " +
	"idletrace record -q -d 1s -o /out/a.trace && idletrace record -q -d 1s -o /out/b.trace && " +
	"cat /sys/kernel/tracing/instances/pokes/trace >/out/pokes"

// TestLabAttachPatchesNoText holds pinTracepoints to what it is for: with
// the recorder's tracepoints enabled at boot, recording patches no kernel
// text, so multi-threaded TCG's cross-vCPU patching race (the experiments'
// int3 Oops) cannot happen. Without the pin the same kprobe counts the
// patches attaching makes, which shows it sees them. Single-threaded TCG:
// the count does not depend on it.
func TestLabAttachPatchesNoText(t *testing.T) {
	root, in := labKernelInput(t, "lab/workloads/experiment.sh")
	for _, c := range []struct {
		name   string
		pinned bool
	}{{"pinned", true}, {"not pinned", false}} {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.pinned {
				env = append(env, appendEnv(pinTracepoints()))
			}
			out := runLabCPUs(t, root, in, "lab", "icx", "menu", 2, pokeScript, env...)
			b, err := os.ReadFile(filepath.Join(out, "pokes"))
			if err != nil {
				t.Fatal(err)
			}
			hits := strings.Count(string(b), "idletrace_poke:")
			t.Logf("text_poke_bp_batch calls across two recordings: %d", hits)
			switch {
			case c.pinned && hits > 0:
				t.Errorf("%d text patches while recording with the tracepoints pinned; the first:\n%s", hits, firstHit(string(b)))
			case !c.pinned && hits == 0:
				t.Error("no text patch counted without the pin: the kprobe does not see what the pinned case rules out")
			}
		})
	}
}

// firstHit is the first kprobe hit of a trace instance's text and its stack.
func firstHit(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		if len(lines) > 0 && strings.Contains(l, "idletrace_poke:") {
			break
		}
		lines = append(lines, l)
		if len(lines) == 24 {
			break
		}
	}
	return strings.Join(lines, "\n")
}
