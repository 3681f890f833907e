package tune

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/host"
)

// TestRunningKernel applies haltpoll's window and a latency limit to this
// machine's kernel, reads them back while in force, and finds everything
// as it was after Restore.
func TestRunningKernel(t *testing.T) {
	testenv.OwnMachine(t)
	drv, _ := host.ReadTrimmed("/sys/devices/system/cpu/cpuidle/current_driver")
	if drv == "" || drv == "none" {
		t.Skip("the kernel has no cpuidle driver: no governor or state to change")
	}
	avail, _ := host.ReadTrimmed("/sys/devices/system/cpu/cpuidle/available_governors")
	if !strings.Contains(" "+avail+" ", " haltpoll ") {
		t.Skipf("the kernel has no haltpoll cpuidle governor (available: %s)", avail)
	}
	const param = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"
	gov0, _ := host.ReadTrimmed("/sys/devices/system/cpu/cpuidle/current_governor")
	ns0, err := host.ReadTrimmed(param)
	if err != nil {
		// The governor's own parameters (drivers/cpuidle/governors/haltpoll.c).
		t.Fatalf("the haltpoll governor is available but its module parameters are not: %v", err)
	}
	want := "123000"
	spec := "haltpoll+guest_halt_poll_ns=123us+qos=20us"
	if ns0 == want {
		want, spec = "124000", "haltpoll+guest_halt_poll_ns=124us+qos=20us"
	}
	pl, err := PlanFor(mustPolicy(t, spec), "/")
	if err != nil {
		t.Fatal(err)
	}
	a, err := pl.Apply(func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	defer a.Restore()
	if got, _ := host.ReadTrimmed(param); got != want {
		t.Errorf("guest_halt_poll_ns %s while applied, want %s", got, want)
	}
	if got, _ := host.ReadTrimmed("/sys/devices/system/cpu/cpuidle/current_governor"); got != "haltpoll" {
		t.Errorf("governor %s while applied", got)
	}
	if us := qosNow(t); us != 20 {
		t.Errorf("cpu_dma_latency reads %d µs while the limit is held, want 20", us)
	}
	if err := a.Restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := host.ReadTrimmed(param); got != ns0 {
		t.Errorf("guest_halt_poll_ns %s after Restore, want %s", got, ns0)
	}
	if got, _ := host.ReadTrimmed("/sys/devices/system/cpu/cpuidle/current_governor"); got != gov0 {
		t.Errorf("governor %s after Restore, want %s", got, gov0)
	}
	if us := qosNow(t); us == 20 {
		t.Errorf("cpu_dma_latency still reads 20 µs after Restore")
	}
}

// qosNow reads the global CPU latency limit in force.
func qosNow(t *testing.T) int32 {
	t.Helper()
	f, err := os.Open("/dev/cpu_dma_latency")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return int32(binary.LittleEndian.Uint32(b[:]))
}
