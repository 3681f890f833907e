package iowake

import "testing"

// TestQueueIsFIFO holds the ring buffer to a slice through growth,
// wrap-around and the emptying that gives back a large buffer.
func TestQueueIsFIFO(t *testing.T) {
	for _, tc := range []struct {
		name      string
		push, pop int // per round
		rounds    int
		wantCap   int // the buffer's length after the last round
	}{
		{"wraps without growing", 10, 10, 50, 16},
		{"grows while wrapping", 7, 5, 40, 128},
		{"a burst past keepCap is given back", keepCap + 1, keepCap + 1, 2, 0},
		{"a burst within keepCap is kept", keepCap / 2, keepCap / 2, 3, keepCap / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q queue[int]
			var want []int
			next := 0
			for r := 0; r < tc.rounds; r++ {
				for i := 0; i < tc.push; i++ {
					q.push(next)
					want = append(want, next)
					next++
				}
				for i := 0; i < tc.pop && len(want) > 0; i++ {
					if q.len() != len(want) {
						t.Fatalf("round %d: len %d, want %d", r, q.len(), len(want))
					}
					if got := q.front(); got != want[0] {
						t.Fatalf("round %d: front %d, want %d", r, got, want[0])
					}
					q.pop()
					want = want[1:]
				}
			}
			if q.len() != len(want) {
				t.Fatalf("len %d at the end, want %d", q.len(), len(want))
			}
			if len(q.buf) != tc.wantCap {
				t.Errorf("buffer of %d slots at the end, want %d", len(q.buf), tc.wantCap)
			}
		})
	}
}
