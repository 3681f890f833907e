package analysis

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/tracetest"
	"github.com/idletrace/idletrace/pkg/trace"
)

// TestRenderStatsIORecorded: a trace recorded without block IO says so
// where a trace with IO counts its requests, never "0 block IO requests".
func TestRenderStatsIORecorded(t *testing.T) {
	for _, tc := range []struct {
		blockIO     bool
		want, avoid []string
	}{
		{false, []string{"10 idle periods, block IO not recorded.", "Block IO was not recorded"}, []string{"0 block IO requests", "No block IO request"}},
		{true, []string{"10 idle periods, 0 block IO requests.", "No block IO request completed in the window."}, []string{"not recorded ("}},
	} {
		meta := &trace.Metadata{KernelRelease: "6.12.0", HZ: 250, NumCPUs: 1, RecordedCPUs: []int{0}}
		meta.Inputs.BlockIO = tc.blockIO
		r := tracetest.Build(t, meta, tracetest.Periods(10, 1, 1, 1e6, 5e5), nil)
		s, err := FilteredStatsEachWake(r, trace.IOFilter{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := RenderStats(&out, s, "text"); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("block IO recorded %v: the report lacks %q:\n%s", tc.blockIO, w, out.String())
			}
		}
		for _, a := range tc.avoid {
			if strings.Contains(out.String(), a) {
				t.Errorf("block IO recorded %v: the report says %q", tc.blockIO, a)
			}
		}
		r.Close()
	}
}
