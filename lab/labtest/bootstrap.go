//go:build lab

package labtest

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
)

// turnSamples is one sample kind of a pingpong file: per state, the clean
// samples of each turn, in the order taken. The turn is the unit of
// resampling: the host's load drifts over a run, so samples of one turn
// are alike and resampling them one by one would understate the noise.
type turnSamples map[int][][]float64

// readTurns reads a pingpong sample file (pingpong.txt: "STATE RTT
// TO_CHILD TO_PARENT CLEAN", io.txt: "STATE LATENCY CLEAN"), the sample in
// column col (0-based) of the lines whose last column is clean ("1"). A
// turn is a run of consecutive lines of one state.
func readTurns(path string, col int) (turnSamples, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ts := turnSamples{}
	prev := math.MinInt
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fs := strings.Fields(sc.Text())
		if len(fs) <= col {
			return nil, fmt.Errorf("%s:%d: %d columns, want more than %d", path, line, len(fs), col)
		}
		state, err := strconv.Atoi(fs[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: state %q: %v", path, line, fs[0], err)
		}
		v, err := strconv.ParseFloat(fs[col], 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: sample %q: %v", path, line, fs[col], err)
		}
		if state != prev {
			ts[state] = append(ts[state], nil)
			prev = state
		}
		if fs[len(fs)-1] == "1" {
			last := len(ts[state]) - 1
			ts[state][last] = append(ts[state][last], v)
		}
	}
	return ts, sc.Err()
}

// quantile is measure.sh's: linear between the order statistics at
// 1 + p·(n−1), 1-based. vs is sorted in place.
func quantile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	x := p * float64(len(vs)-1)
	i := int(x)
	if i+1 >= len(vs) {
		return vs[len(vs)-1]
	}
	return vs[i] + (x-float64(i))*(vs[i+1]-vs[i])
}

// bootstrapRounds resamples a run this many times: enough for a standard
// error to two digits.
const bootstrapRounds = 400

// diffSE is the standard error of quantile p of state's clean samples
// minus base's, from a bootstrap that resamples each state's turns with
// replacement (seeded, so a run's figure is reproducible).
func (ts turnSamples) diffSE(base, state int, p float64) float64 {
	rng := rand.New(rand.NewPCG(1, uint64(state)))
	resample := func(turns [][]float64) float64 {
		var pool []float64
		for range turns {
			pool = append(pool, turns[rng.IntN(len(turns))]...)
		}
		return quantile(pool, p)
	}
	if len(ts[base]) == 0 || len(ts[state]) == 0 {
		return math.NaN()
	}
	var sum, sum2 float64
	for range bootstrapRounds {
		d := resample(ts[state]) - resample(ts[base])
		sum += d
		sum2 += d * d
	}
	mean := sum / bootstrapRounds
	return math.Sqrt(math.Max(0, sum2/bootstrapRounds-mean*mean))
}
