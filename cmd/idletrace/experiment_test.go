package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/idletrace/idletrace/pkg/tune"
)

// TestKnobGuardSignal: a signal cancels the recording at once but leaves
// the knob to the experiment, which restores as the recording returns (its
// tail is still under the policy); the guard restores itself when the
// experiment has not within its grace, or at a second signal.
func TestKnobGuardSignal(t *testing.T) {
	for _, tc := range []struct {
		name            string
		experimentAfter time.Duration // when the experiment restores; 0: never
		secondSignal    bool
		wantHeldUntil   time.Duration // the knob keeps the policy's value at least this long
	}{
		{"the experiment restores", 300 * time.Millisecond, false, 250 * time.Millisecond},
		{"stuck experiment: the guard restores after its grace", 0, false, 550 * time.Millisecond},
		{"second signal: at once", 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			knob := filepath.Join(t.TempDir(), "guest_halt_poll_ns")
			if err := os.WriteFile(knob, []byte("0"), 0o644); err != nil {
				t.Fatal(err)
			}
			plan := &tune.Plan{Writes: []tune.Write{{Path: knob, What: "guest_halt_poll_ns", New: "200000", Old: "0"}}}
			ctx, cancel := context.WithCancel(context.Background())
			g := newKnobGuard(cancel, func(string) {})
			defer g.close()
			g.grace = 600 * time.Millisecond
			a, err := plan.Apply(nil)
			if err != nil {
				t.Fatal(err)
			}
			g.set(a)
			value := func() string {
				b, err := os.ReadFile(knob)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			start := time.Now()
			g.sigs <- syscall.SIGTERM
			if tc.secondSignal {
				g.sigs <- syscall.SIGINT
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the signal did not cancel the recording")
			}
			if tc.experimentAfter > 0 {
				time.AfterFunc(tc.experimentAfter, func() { g.restore() })
			}
			for value() != "0" {
				if time.Since(start) > 5*time.Second {
					t.Fatal("the knob was never restored")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if held := time.Since(start); held < tc.wantHeldUntil {
				t.Errorf("restored after %v, before the experiment's recording could stop (want at least %v)", held, tc.wantHeldUntil)
			}
			if tc.experimentAfter > 0 && time.Since(start) >= g.grace {
				t.Errorf("restored after %v: the guard waited out its grace, not for the experiment", time.Since(start))
			}
			if tc.secondSignal && time.Since(start) > g.grace/2 {
				t.Errorf("a second signal restored only after %v", time.Since(start))
			}
			if err := g.stopped(); err == nil {
				t.Error("stopped() = nil after a signal")
			}
		})
	}
}
