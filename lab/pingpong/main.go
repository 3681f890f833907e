// Command pingpong measures task wake-up latency across CPUs: two processes,
// each pinned to its own CPU, pass one byte back and forth through two pipes,
// so that every message wakes a task on a CPU that went idle waiting for it.
// It prints the round trips' statistics; one wake-up is half a round trip.
//
//	pingpong [-n ROUNDS] [-warmup N] [-cpus A,B] [-gap DURATION]
//
// The lab's exit-latency check (lab/labtest) runs it with one idle state
// enabled at a time. Blocking pipe reads and writes are raw system calls on
// one locked thread per process, so the Go runtime's poller stays out of the
// path.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func pin(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fmt.Fprintf(os.Stderr, "pingpong: pinning to CPU %d: %v\n", cpu, err)
		os.Exit(1)
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

// readByte and writeByte are raw system calls: the runtime does not see them,
// so its monitor thread (sysmon) does not take the P back from a blocked call
// every 20 us, which would add timer wake-ups on both CPUs.
func readByte(fd int, b []byte) {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1)
		if errno == unix.EINTR {
			continue
		}
		if n != 1 {
			if errno == 0 {
				os.Exit(0) // the other side closed: done
			}
			must(errno)
		}
		return
	}
}

func writeByte(fd int, b []byte) {
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			must(errno)
		}
		return
	}
}

// child echoes every byte from fd 3 to fd 4, on its CPU.
func child(cpu int) {
	pin(cpu)
	b := make([]byte, 1)
	for {
		readByte(3, b)
		writeByte(4, b)
	}
}

func main() {
	n := flag.Int("n", 2000, "round trips measured")
	warm := flag.Int("warmup", 100, "round trips first, not measured")
	cpus := flag.String("cpus", "0,1", "the two CPUs: this process's, the echoing child's")
	gap := flag.Duration("gap", 0, "sleep between round trips (0: none)")
	childCPU := flag.Int("child", -1, "internal: run as the echoing child on this CPU")
	flag.Parse()
	// No asynchronous preemption (a signal every 10 ms at a goroutine that
	// sits in a raw system call) and no garbage collector.
	if !strings.Contains(os.Getenv("GODEBUG"), "asyncpreemptoff=1") {
		self, err := os.Executable()
		must(err)
		env := []string{"GODEBUG=asyncpreemptoff=1," + os.Getenv("GODEBUG")}
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "GODEBUG=") {
				env = append(env, e)
			}
		}
		must(unix.Exec(self, os.Args, env))
	}
	debug.SetGCPercent(-1)
	runtime.GOMAXPROCS(1)
	if *childCPU >= 0 {
		child(*childCPU)
		return
	}
	parts := strings.Split(*cpus, ",")
	if len(parts) != 2 {
		must(fmt.Errorf("-cpus wants two CPUs, A,B"))
	}
	a, err := strconv.Atoi(parts[0])
	must(err)
	b, err := strconv.Atoi(parts[1])
	must(err)

	var toChild, fromChild [2]int
	must(unix.Pipe2(toChild[:], unix.O_CLOEXEC))
	must(unix.Pipe2(fromChild[:], unix.O_CLOEXEC))
	self, err := os.Executable()
	must(err)
	cmd := exec.Command(self, "-child", strconv.Itoa(b))
	r, w := os.NewFile(uintptr(toChild[0]), "r"), os.NewFile(uintptr(fromChild[1]), "w")
	cmd.ExtraFiles = []*os.File{r, w}
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	r.Close()
	w.Close()

	pin(a)
	buf := []byte{'x'}
	rtt := make([]int64, 0, *n)
	for i := 0; i < *warm+*n; i++ {
		if *gap > 0 {
			time.Sleep(*gap)
		}
		t0 := time.Now()
		writeByte(toChild[1], buf)
		readByte(fromChild[0], buf)
		if i >= *warm {
			rtt = append(rtt, int64(time.Since(t0)))
		}
	}
	unix.Close(toChild[1])
	_ = cmd.Wait()

	sort.Slice(rtt, func(i, j int) bool { return rtt[i] < rtt[j] })
	var sum int64
	for _, v := range rtt {
		sum += v
	}
	q := func(p float64) int64 { return rtt[int(p*float64(len(rtt)-1))] }
	fmt.Printf("rounds=%d rtt_mean_ns=%d rtt_p10_ns=%d rtt_p50_ns=%d rtt_p90_ns=%d rtt_p99_ns=%d\n",
		len(rtt), sum/int64(len(rtt)), q(0.1), q(0.5), q(0.9), q(0.99))
}
