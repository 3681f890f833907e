package record

import (
	"strings"
	"testing"

	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/trace"
)

// These tests read the fixture tree of pkg/host (machine) and need no
// root. They change machine, so none of them runs in parallel.

const fixture host.Root = "../host/testdata/sysroot"

// fixtureRoot points machine at root for the test.
func fixtureRoot(t *testing.T, root host.Root) {
	t.Helper()
	old := machine
	machine = root
	t.Cleanup(func() { machine = old })
}

func TestPollingMask(t *testing.T) {
	m := fixture.Metadata([]int{0, 1}, []int{0, 1, 2, 3})
	if got := pollingMask(m); got != 1 {
		t.Errorf("polling mask %b, want state 0", got)
	}
	m = host.Root(t.TempDir()).Metadata([]int{0}, []int{0})
	if got := pollingMask(m); got != 1 {
		t.Errorf("polling mask without a driver %b, want 1 (cpu_idle_poll as state 0)", got)
	}
}

func TestUndeliveredReason(t *testing.T) {
	fixtureRoot(t, fixture) // proc/sys/kernel/init_private is 1
	why := undeliveredReason([]trace.ProgStat{{Name: "btf_block_rq_complete", Misses: 3}, {Name: "btf_cpu_idle", Misses: 9}})
	if !strings.Contains(why, "skipped 3 runs") || !strings.Contains(why, "kernel.init_private=1") {
		t.Errorf("reason %q", why)
	}
	fixtureRoot(t, host.Root(t.TempDir()))
	if why := undeliveredReason([]trace.ProgStat{{Name: "btf_cpu_idle", Misses: 9}}); why != "" {
		t.Errorf("no block misses and no init_private, yet %q", why)
	}
}
