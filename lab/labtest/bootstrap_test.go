//go:build lab

package labtest

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestDiffVerdict: the exit-latency bar, case by case (no VM).
func TestDiffVerdict(t *testing.T) {
	for _, c := range []struct {
		name                string
		got, want, se       float64
		upRel               float64
		tol                 float64
		resolved, wantsPass bool
	}{
		{"within 10 %", 160e3, 169e3, 2e3, 0, 16.9e3, true, true},
		{"past 10 %, precise", 190e3, 169e3, 2e3, 0, 16.9e3, true, false},
		{"noisy: 3 SE is the bar", 120e3, 131e3, 7e3, 0, 21e3, true, true},
		{"noisy, past 3 SE", 100e3, 131e3, 7e3, 0, 21e3, true, false},
		{"too noisy to judge", 10e3, 31e3, 7.2e3, 0, 0, false, false},
		{"under 20 µs", 8e3, 8e3, 0.1e3, 0, 0, false, false},
		{"no samples", 40e3, 40e3, math.NaN(), 0, 0, false, false},
		// CI's run at 019a5cc: seed 000's C6 wake-up 146.0 ± 4.5 µs for 131.
		{"over, within the after-spin share", 146e3, 131e3, 4.5e3, afterSpinRel, 13.5e3, true, true},
		{"over, past the after-spin share", 160e3, 131e3, 4.5e3, afterSpinRel, 13.5e3, true, false},
		{"under: no after-spin share", 116e3, 131e3, 4.5e3, afterSpinRel, 13.5e3, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tol, resolved, pass := diffVerdict(c.got, c.want, c.se, c.upRel)
			if math.Abs(tol-c.tol) > 1 || resolved != c.resolved || pass != c.wantsPass {
				t.Errorf("diffVerdict(%g, %g, %g, %g) = %g, %v, %v; want %g, %v, %v", c.got, c.want, c.se, c.upRel, tol, resolved, pass, c.tol, c.resolved, c.wantsPass)
			}
		})
	}
}

// TestTurnBootstrap: readTurns groups a pingpong file's clean samples by
// turn, and diffSE is zero where every turn is alike and grows with the
// turns' spread.
func TestTurnBootstrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "io.txt")
	// Two states in turns of two samples; state 2's turns alternate 100
	// and 300 around state 1's constant 50; one unclean sample (0) and one
	// a spin ran over (o) are left out.
	data := "1 50 1\n1 50 1\n2 100 1\n2 100 1\n1 50 1\n1 999 0\n2 300 1\n2 300 1\n1 50 1\n1 50 o\n2 100 1\n2 100 1\n1 50 1\n1 50 1\n2 300 1\n2 300 1\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := readTurns(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts[1]) != 4 || len(ts[2]) != 4 {
		t.Fatalf("turns: state 1 %d, state 2 %d; want 4 each", len(ts[1]), len(ts[2]))
	}
	var n1 int
	for _, turn := range ts[1] {
		n1 += len(turn)
	}
	if n1 != 6 {
		t.Errorf("state 1: %d clean samples, want 6", n1)
	}
	if se := ts.diffSE(1, 1, 0.5); se != 0 {
		t.Errorf("a constant state against itself: SE %g, want 0", se)
	}
	if se := ts.diffSE(1, 2, 0.5); se < 20 || se > 150 {
		t.Errorf("turns of 100 and 300: SE of the median's difference %g, want between 20 and 150", se)
	}
	if se := ts.diffSE(1, 3, 0.5); !math.IsNaN(se) {
		t.Errorf("a state without samples: SE %g, want NaN", se)
	}
	if _, err := readTurns(filepath.Join(t.TempDir(), "none"), 1); err == nil {
		t.Error("a missing file: no error")
	}
	bad := filepath.Join(t.TempDir(), "bad.txt")
	os.WriteFile(bad, []byte("x 1 1\n"), 0o644)
	if _, err := readTurns(bad, 1); err == nil {
		t.Error("a state that is not a number: no error")
	}
}

// TestQuantile: measure.sh's interpolation.
func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		vs   []float64
		p    float64
		want float64
	}{
		{[]float64{4, 1, 3, 2}, 0.5, 2.5},
		{[]float64{4, 1, 3, 2}, 0.25, 1.75},
		{[]float64{7}, 0.25, 7},
		{[]float64{1, 2}, 1, 2},
	} {
		if got := quantile(c.vs, c.p); got != c.want {
			t.Errorf("quantile(%v, %g) = %g, want %g", c.vs, c.p, got, c.want)
		}
	}
	if !math.IsNaN(quantile(nil, 0.5)) {
		t.Error("quantile of nothing is not NaN")
	}
}
