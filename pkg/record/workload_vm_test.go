package record_test

// The referee's workload inside the kernel-matrix VMs (scripts/kernel-matrix.sh),
// where neither fio nor perf exists: the same two loads in pure Go. Threads
// pinned to CPUs 0 and 1 ping-pong a byte through two pipes (remote wake-ups
// of an idle CPU, as perf bench sched pipe does), while another thread does
// 4 KiB O_DIRECT random reads of a file (block IO completions, as fio
// --direct=1 --rw=randread --ioengine=psync does).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	vmDataBytes   = 32 << 20
	vmBlockBytes  = 4096
	vmWorkloadFor = 3 * time.Second
	// The reads go on past vmWorkloadFor until vmMinReads are done (the
	// referee needs 500 that waited; a TCG-slow 6.1 VM did only 472 in 3 s),
	// but never past vmReadsCap.
	vmMinReads = 1000
	vmReadsCap = 20 * time.Second
)

// inMatrixVM: the matrix VM says so with IDLETRACE_VM=1, and only there is a
// missing fio or perf replaced by the Go workload. Everywhere else the
// referee keeps using (and installing) fio and perf.
func inMatrixVM() bool {
	if os.Getenv("IDLETRACE_VM") != "1" {
		return false
	}
	_, errFio := exec.LookPath("fio")
	_, errPerf := exec.LookPath("perf")
	return errFio != nil || errPerf != nil
}

// recordVMWorkload is recordWorkload with the Go workload: it records while
// the workload runs (started after the start snapshot, finished before the
// end snapshot) and returns the number of O_DIRECT reads it completed.
func recordVMWorkload(t *testing.T) (path string, view readerView, disk string, dev uint32) {
	t.Helper()
	if runtime.NumCPU() < 2 {
		t.Fatalf("the referee workload needs CPUs 0 and 1; this VM has %d CPU", runtime.NumCPU())
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "direct.dat")
	if err := writeDataFile(data, vmDataBytes); err != nil {
		t.Fatal(err)
	}
	var rounds uint64
	path, disk, dev, sum := recordWhile(t, dir, data, func() (err error) {
		if view, err = directRandomReads(data, vmDataBytes, vmWorkloadFor, vmMinReads, vmReadsCap); err != nil {
			return fmt.Errorf("O_DIRECT reads: %v", err)
		}
		return nil
	}, func() (err error) {
		if rounds, err = pipePingPong(0, 1, vmWorkloadFor); err != nil {
			return fmt.Errorf("pipe ping-pong: %v", err)
		}
		return nil
	})
	t.Logf("VM workload: %d O_DIRECT 4 KiB reads, %d pipe round trips between CPUs 0 and 1", view.reads, rounds)
	t.Logf("recorded %d idle periods, %d IO requests; %s", sum.IdlePeriods, sum.BlockIOs, sum.Loss)
	return path, view, disk, dev
}

// keepCopy copies a test's trace to dst (the matrix VM's results disk); a
// failure only loses the copy.
func keepCopy(t *testing.T, src, dst string) {
	if b, err := os.ReadFile(src); err != nil || os.WriteFile(dst, b, 0o644) != nil {
		t.Logf("could not keep a copy of the trace in %s", dst)
	}
}

// writeDataFile writes size bytes of non-zero data and syncs them, so that
// later O_DIRECT reads hit allocated blocks.
func writeDataFile(path string, size int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for off := 0; off < size; off += len(buf) {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// directRandomReads reads random 4 KiB blocks of path with O_DIRECT, one at a
// time, for at least d and minReads reads, but no longer than limit; the
// buffer is page-aligned (mmap), as O_DIRECT requires.
func directRandomReads(path string, size int, d time.Duration, minReads int, limit time.Duration) (view readerView, err error) {
	// One OS thread, so that the reads are issued by the task named below.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	comm, err := os.ReadFile("/proc/thread-self/comm")
	if err != nil {
		return view, err
	}
	view.comm = strings.TrimSpace(string(comm))
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return view, fmt.Errorf("open %s with O_DIRECT: %w", path, err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, vmBlockBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return view, err
	}
	defer unix.Munmap(buf)
	blocks := size / vmBlockBytes
	var lats []uint64
	// The thread's voluntary context switches bound the reads that waited,
	// as fio's rusage does on the host.
	var ru0, ru1 unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru0); err != nil {
		return view, err
	}
	start := time.Now()
	for {
		if since := time.Since(start); since >= limit || since >= d && len(lats) >= minReads {
			break
		}
		off := int64(rand.IntN(blocks)) * vmBlockBytes
		t0 := time.Now()
		got, err := unix.Pread(fd, buf, off)
		lats = append(lats, uint64(time.Since(t0)))
		if err != nil {
			return view, fmt.Errorf("pread at %d: %w", off, err)
		}
		if got != vmBlockBytes {
			return view, fmt.Errorf("pread at %d: %d bytes", off, got)
		}
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru1); err != nil {
		return view, err
	}
	view.sleeps, view.otherSleeps = uint64(ru1.Nvcsw-ru0.Nvcsw), 100
	slices.Sort(lats)
	view.reads = uint64(len(lats))
	if len(lats) > 0 {
		view.p50, view.p99 = lats[len(lats)/2], lats[len(lats)*99/100]
		view.quantile = func(q float64) uint64 { return lats[min(int(math.Ceil(q*float64(len(lats)-1))), len(lats)-1)] }
	}
	return view, nil
}

// pinThread locks the calling goroutine to its OS thread and pins that
// thread to cpu. The caller leaves it locked: a goroutine that ends
// locked takes its thread with it, so a pinned thread never goes back to
// run the test binary's other goroutines.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	return nil
}

// pipePingPong runs two OS threads pinned to CPUs a and b that pass one byte
// back and forth through two blocking pipes for the given time: every
// hand-over wakes the other thread on the other CPU. It returns the round
// trips done.
func pipePingPong(a, b int, d time.Duration) (uint64, error) {
	var ping, pong [2]int
	if err := unix.Pipe2(ping[:], unix.O_CLOEXEC); err != nil {
		return 0, err
	}
	if err := unix.Pipe2(pong[:], unix.O_CLOEXEC); err != nil {
		unix.Close(ping[0])
		unix.Close(ping[1])
		return 0, err
	}
	defer func() {
		for _, fd := range []int{ping[0], ping[1], pong[0], pong[1]} {
			unix.Close(fd)
		}
	}()
	const abort = 0xff
	var errA, errB error
	var rounds uint64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // echo on b until the stop byte
		defer wg.Done()
		if errB = pinThread(b); errB != nil {
			unix.Write(pong[1], []byte{abort}) // unblocks a
			return
		}
		var c [1]byte
		for {
			if _, errB = unix.Read(ping[0], c[:]); errB != nil {
				return
			}
			if _, errB = unix.Write(pong[1], c[:]); errB != nil || c[0] == 0 {
				return
			}
		}
	}()
	go func() { // drive from a
		defer wg.Done()
		if errA = pinThread(a); errA != nil {
			unix.Write(ping[1], []byte{0})
			return
		}
		c := [1]byte{1}
		deadline := time.Now().Add(d)
		for {
			if !time.Now().Before(deadline) {
				c[0] = 0
			}
			if _, errA = unix.Write(ping[1], c[:]); errA != nil {
				return
			}
			var r [1]byte
			n, err := unix.Read(pong[0], r[:])
			if err != nil || n != 1 {
				errA = fmt.Errorf("reading the echo: n=%d: %v", n, err)
				return
			}
			if r[0] == abort {
				return // b could not pin itself: errB says why
			}
			if c[0] == 0 {
				return
			}
			rounds++
		}
	}()
	wg.Wait()
	if errA != nil {
		return rounds, errA
	}
	return rounds, errB
}
