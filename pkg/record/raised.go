package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/pkg/trace"
)

// raisedCounter counts one tracepoint as the kernel raises it, on every CPU,
// with perf counting events: the referee for how many times the recorder's
// program on it should have run. Counting events take no samples, so they
// cost one increment per event.
type raisedCounter struct{ fds []int }

// tracepointID reads the tracepoint's perf id from tracefs.
func tracepointID(group, name string) (uint64, error) {
	dir, err := tracefsDir()
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "events", group, name, "id"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// openRaisedCounter opens a counting perf event on the tracepoint on each CPU.
func openRaisedCounter(group, name string, cpus []int) (*raisedCounter, error) {
	id, err := tracepointID(group, name)
	if err != nil {
		return nil, err
	}
	c := &raisedCounter{}
	for _, cpu := range cpus {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id, Size: uint32(unix.PERF_ATTR_SIZE_VER0)}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("perf counting event on %s:%s, CPU %d: %w", group, name, cpu, err)
		}
		c.fds = append(c.fds, fd)
	}
	return c, nil
}

// openBlockCounters counts block_rq_issue and block_rq_complete on every
// CPU; both nil when either cannot be counted.
func openBlockCounters(cpus []int) (issue, complete *raisedCounter) {
	issue, err := openRaisedCounter("block", "block_rq_issue", cpus)
	if err != nil {
		return nil, nil
	}
	if complete, err = openRaisedCounter("block", "block_rq_complete", cpus); err != nil {
		issue.close()
		return nil, nil
	}
	return issue, complete
}

// read sums the counts over the CPUs.
func (c *raisedCounter) read() (uint64, error) {
	var sum uint64
	for _, fd := range c.fds {
		n, err := readPerfCount(fd)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// readPerfCount reads a counting perf event's value (no read_format: one
// u64).
func readPerfCount(fd int) (uint64, error) {
	var buf [8]byte
	if n, err := unix.Read(fd, buf[:]); err != nil || n != len(buf) {
		return 0, errors.Join(errors.New("reading a perf counter"), err)
	}
	return binary.NativeEndian.Uint64(buf[:]), nil
}

func (c *raisedCounter) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// undeliveredReason names what kept raised block events from the programs,
// where it is known: the kernel's recursion guard (counted per program), or
// a kernel rule.
func undeliveredReason(progs []trace.ProgStat) string {
	var why []string
	var misses uint64
	for _, p := range progs {
		if strings.Contains(p.Name, "block_rq_") {
			misses += p.Misses
		}
	}
	if misses > 0 {
		why = append(why, fmt.Sprintf("the kernel's recursion guard skipped %d runs of the block programs (an event nested in another on the same CPU)", misses))
	}
	if b, err := os.ReadFile(machine.Path("proc/sys/kernel/init_private")); err == nil && strings.TrimSpace(string(b)) == "1" {
		why = append(why, "kernel.init_private=1: this kernel runs no BPF program while a thread of PID 1 is the current task, so events raised in its context (IO completions interrupting it) are not delivered")
	}
	return strings.Join(why, "; ")
}
