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
// tail is still under the policy); a second signal has the recording's
// command killed at once and still leaves the knob to the experiment (a
// new user's Ctrl-C twice restored it under the recording, which kept
// 1.25 s of POLL and then the old settings). Only an experiment stuck past
// the guard's grace has the guard restore, and say it cut a recording.
func TestKnobGuardSignal(t *testing.T) {
	for _, tc := range []struct {
		name            string
		experimentAfter time.Duration // when the experiment restores; 0: never
		secondSignal    bool
		recording       bool          // a recording under way (setRecording)
		wantHeldUntil   time.Duration // the knob keeps the policy's value at least this long
		wantEarly       bool          // restoredEarly
	}{
		{"the experiment restores", 300 * time.Millisecond, false, true, 250 * time.Millisecond, false},
		{"second signal: the command killed, the knob still the experiment's", 300 * time.Millisecond, true, true, 250 * time.Millisecond, false},
		{"stuck experiment: the guard restores after its grace, under the recording", 0, false, true, 550 * time.Millisecond, true},
		{"stuck between recordings: restored, no recording cut", 0, true, false, 550 * time.Millisecond, false},
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
			g.setRecording(tc.recording)
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
			if tc.secondSignal {
				select {
				case <-g.kill:
				case <-time.After(5 * time.Second):
					t.Fatal("a second signal did not have the command killed")
				}
			}
			if tc.experimentAfter > 0 {
				time.AfterFunc(tc.experimentAfter, func() { g.setRecording(false); g.restore() })
			}
			for value() != "0" {
				if time.Since(start) > 5*time.Second {
					t.Fatal("the knob was never restored")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if !tc.secondSignal { // checked once the guard has done all it does for one signal
				select {
				case <-g.kill:
					t.Error("one signal had the command killed, not stopped")
				default:
				}
			}
			if held := time.Since(start); held < tc.wantHeldUntil {
				t.Errorf("restored after %v, before the experiment's recording could stop (want at least %v)", held, tc.wantHeldUntil)
			}
			if tc.experimentAfter > 0 && time.Since(start) >= g.grace {
				t.Errorf("restored after %v: the guard waited out its grace, not for the experiment", time.Since(start))
			}
			if g.restoredEarly() != tc.wantEarly {
				t.Errorf("restoredEarly() = %v, want %v", g.restoredEarly(), tc.wantEarly)
			}
			if err := g.stopped(); err == nil {
				t.Error("stopped() = nil after a signal")
			}
		})
	}
}
