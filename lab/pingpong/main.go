// Command pingpong measures wake-up latency across CPUs.
//
// By default two processes, each pinned to its own CPU, pass a message back
// and forth through two pipes, so that every message wakes a task on a CPU
// that went idle waiting for it. The echoing child answers with the
// CLOCK_MONOTONIC time at which its read returned, so that each round trip
// gives two task wake-ups, each from the write to the woken reader's return:
// parent to child and child to parent (the guest's CPUs share one TSC).
//
// With -io FILE it measures IO completions instead: one process, every
// thread pinned to -io-cpu, reads 4 KiB blocks of FILE (O_DIRECT, one at a
// time, at random offsets), each read timed from the system call to its
// return, as fio's clat of psync reads.
//
// With -states LIST it measures each cpuidle state in LIST in turn, -turn
// samples at a time, cycling until each has -n: a turn enables its state
// alone on every CPU (cpuidle sysfs "disable"), so that the states share the
// host's and the guest's conditions as they drift. Around every sample it
// reads every CPU's usage counters and marks the sample clean when the stays
// that ended are exactly those the sample needs, in the turn's state: one on
// each of the two CPUs for a round trip (each woke from idle once, for the
// message), one on -io-cpu for a read (woken by the completion), and none
// anywhere else: a tick or any other wake-up during the sample, or a stay
// begun in the previous turn's state, makes it unclean. In the lab it also
// reads the emulated driver's count of exit-latency spins that ran over
// (lab/idle_emu's "overran": the host held up the CPU that was paying), and
// a sample during which one did is marked "o", not clean. The states'
// disable switches are put back as they were at the end. With -waker-state
// W the writer's CPU A keeps state W alone and only the child's wake-ups
// (A's write to B's read) are the turn's samples: the state's exit latency
// is then paid once per sample, by the woken CPU, as for a read's
// completion, and not also by a waker that has just left the same state.
//
//	pingpong [-n N] [-warmup N] [-cpus A,B] [-gap DURATION] [-states S,S... [-turn K] [-waker-state W]] [-o FILE]
//	pingpong -io FILE [-io-cpu C] [-io-jitter DURATION] [-n N] [-warmup N] [-states S,S... [-turn K]] [-o FILE]
//
// -o writes every measured sample, one a line, times in ns: "STATE RTT
// TO_CHILD TO_PARENT CLEAN" for round trips, "STATE LATENCY CLEAN" for reads;
// CLEAN is 1 (clean), 0 (other stays) or o (a spin ran over); STATE and CLEAN
// are "-" without -states. Standard output gets one line of statistics per
// state.
//
// The lab's exit-latency check (lab/labtest) uses -states; the lab's
// workloads (lab/workloads) the plain ping-pong. Blocking pipe reads and
// writes, disk reads and sysfs accesses are raw system calls on one locked
// thread per process, so that the Go runtime's poller and monitor stay out
// of the path.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nanotime is the runtime's CLOCK_MONOTONIC (vDSO), the clock of time.Now's
// monotonic reading, but absolute: comparable between the two processes.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

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

// readMsg and writeMsg are raw system calls: the runtime does not see them,
// so its monitor thread (sysmon) does not take the P back from a blocked call
// every 20 us, which would add timer wake-ups on both CPUs. A message is 8
// bytes (one pipe write, so one read takes it whole).
func readMsg(fd int, b *[8]byte) {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == unix.EINTR {
			continue
		}
		if n != uintptr(len(b)) {
			if errno == 0 && n == 0 {
				os.Exit(0) // the other side closed: done
			}
			if errno == 0 {
				must(fmt.Errorf("short read: %d bytes", n))
			}
			must(errno)
		}
		return
	}
}

func writeMsg(fd int, b *[8]byte) {
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			must(errno)
		}
		return
	}
}

// child answers every message on fd 3 with the time its read returned, on fd
// 4, on its CPU.
func child(cpu int) {
	pin(cpu)
	var b [8]byte
	for {
		readMsg(3, &b)
		*(*int64)(unsafe.Pointer(&b[0])) = nanotime()
		writeMsg(4, &b)
	}
}

// idle is every CPU's cpuidle states: usage counters and disable switches.
type idle struct {
	cpus    []int   // CPU numbers
	nstates int     // states per CPU (the same on every CPU)
	usage   [][]int // fds, [cpu][state]
	disable [][]int
	was     [][]byte    // the disable switches as found
	overran int         // idle_emu's count of overrun exit-latency spins, or -1
	pinned  map[int]int // CPU -> the state it keeps alone, whatever the turn's (-waker-state)
	buf     [32]byte
}

// emuOverran is the lab's emulated driver's count of exit-latency spins that
// ran over (lab/idle_emu): the host held the CPU that was paying.
const emuOverran = "/sys/module/idle_emu/parameters/overran"

func openIdle() *idle {
	d := &idle{overran: -1}
	if fd, err := unix.Open(emuOverran, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		d.overran = fd
	}
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle")
	if len(dirs) == 0 {
		must(fmt.Errorf("no cpuidle in sysfs"))
	}
	sort.Slice(dirs, func(i, j int) bool { return cpuOf(dirs[i]) < cpuOf(dirs[j]) })
	for _, dir := range dirs {
		states, _ := filepath.Glob(dir + "/state[0-9]*")
		if d.nstates == 0 {
			d.nstates = len(states)
		}
		if len(states) != d.nstates {
			must(fmt.Errorf("%s: %d states, CPU %d has %d", dir, len(states), d.cpus[0], d.nstates))
		}
		var us, ds []int
		var was [][]byte
		for s := 0; s < d.nstates; s++ {
			p := dir + "/state" + strconv.Itoa(s) + "/"
			fd, err := unix.Open(p+"usage", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			must(err)
			us = append(us, fd)
			fd, err = unix.Open(p+"disable", unix.O_RDWR|unix.O_CLOEXEC, 0)
			must(err)
			ds = append(ds, fd)
			b, err := os.ReadFile(p + "disable")
			must(err)
			was = append(was, b)
		}
		d.cpus = append(d.cpus, cpuOf(dir))
		d.usage, d.disable, d.was = append(d.usage, us), append(d.disable, ds), append(d.was, was...)
	}
	return d
}

func cpuOf(dir string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(dir)), "cpu"))
	must(err)
	return n
}

// counters: a row per CPU (its states' usage), then one for idle_emu's
// overrun count.
func (d *idle) counters() [][]int64 {
	v := make([][]int64, len(d.cpus)+1)
	for i := range d.cpus {
		v[i] = make([]int64, d.nstates)
	}
	v[len(d.cpus)] = make([]int64, 1)
	return v
}

func (d *idle) readNum(fd int) int64 {
	n, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&d.buf[0])), uintptr(len(d.buf)), 0, 0, 0)
	if errno != 0 {
		must(errno)
	}
	x, err := strconv.ParseInt(strings.TrimSpace(string(d.buf[:n])), 10, 64)
	must(err)
	return x
}

// read fills v with the counters now.
func (d *idle) read(v [][]int64) {
	for c, fds := range d.usage {
		for s, fd := range fds {
			v[c][s] = d.readNum(fd)
		}
	}
	if d.overran >= 0 {
		v[len(d.cpus)][0] = d.readNum(d.overran)
	}
}

func (d *idle) write(fd int, s string) {
	b := []byte(s)
	_, _, errno := unix.RawSyscall6(unix.SYS_PWRITE64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	if errno != 0 {
		must(fmt.Errorf("cpuidle disable: %v", errno))
	}
}

// only enables state alone on every CPU but a pinned one, which keeps its
// own: first the states wanted, then every other disabled, so that no CPU is
// left without a state in between.
func (d *idle) only(state int) {
	want := func(c int) int {
		if s, ok := d.pinned[d.cpus[c]]; ok {
			return s
		}
		return state
	}
	for c := range d.cpus {
		d.write(d.disable[c][want(c)], "0")
	}
	for c := range d.cpus {
		for s, fd := range d.disable[c] {
			if s != want(c) {
				d.write(fd, "1")
			}
		}
	}
}

func (d *idle) restore() {
	for c := range d.cpus {
		for s, fd := range d.disable[c] {
			d.write(fd, strings.TrimSpace(string(d.was[c*d.nstates+s])))
		}
	}
}

// clean: between before and after, exactly one stay ended on each CPU of
// stays, in the state stays gives it, and none on any other CPU: "1"; else
// "0". "o" when the stays are right but an exit-latency spin ran over
// (idle_emu's "overran").
func (d *idle) clean(before, after [][]int64, stays map[int]int) string {
	for c, cpu := range d.cpus {
		var all int64
		for s := range after[c] {
			all += after[c][s] - before[c][s]
		}
		state, ok := stays[cpu]
		if !ok {
			if all != 0 {
				return "0"
			}
			continue
		}
		if all != 1 || after[c][state]-before[c][state] != 1 {
			return "0"
		}
	}
	if o := len(d.cpus); after[o][0] != before[o][0] {
		return "o"
	}
	return "1"
}

// turns hands out the states, turn samples at a time, cycling (each cycle
// starts one state further on) until every state has had n.
type turns struct {
	states  []int
	n, turn int
	done    []int // samples per state so far
	i, left int   // current state's index, samples left in its turn
	cycle   int
}

func (t *turns) next() (state, index int, ok bool) {
	for t.left <= 0 {
		if t.i < 0 || (t.i+1)%len(t.states) == t.cycle%len(t.states) {
			if t.i >= 0 {
				t.cycle++
			}
			t.i = t.cycle % len(t.states)
		} else {
			t.i = (t.i + 1) % len(t.states)
		}
		all := true
		for _, k := range t.done {
			all = all && k >= t.n
		}
		if all {
			return 0, 0, false
		}
		t.left = max(0, min(t.turn, t.n-t.done[t.i]))
	}
	t.left--
	t.done[t.i]++
	return t.states[t.i], t.i, true
}

func summary(name string, v []int64) string {
	if len(v) == 0 {
		return name + "_n=0"
	}
	v = append([]int64(nil), v...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	var sum int64
	for _, x := range v {
		sum += x
	}
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	q := func(p float64) int64 { return v[int(p*float64(len(v)-1))] }
	return fmt.Sprintf("%s_n=%d %s_mean_ns=%d %s_p10_ns=%d %s_p50_ns=%d %s_p90_ns=%d",
		name, len(v), name, sum/int64(len(v)), name, q(0.1), name, med, name, q(0.9))
}

// sampler runs warm unmeasured samples, then the measured ones: all in the
// current setting without states, else in turns. sample gets the turn's
// state (-1 without states) and whether to keep the result.
func sampler(d *idle, states []int, n, warm, turn int, sample func(state int, keep bool)) {
	for i := 0; i < warm; i++ {
		sample(-1, false)
	}
	if d == nil {
		for i := 0; i < n; i++ {
			sample(-1, true)
		}
		return
	}
	defer d.restore()
	t := &turns{states: states, n: n, turn: turn, done: make([]int, len(states)), i: -1}
	cur := -1
	for {
		s, _, ok := t.next()
		if !ok {
			return
		}
		if s != cur {
			d.only(s)
			cur = s
		}
		sample(s, true)
	}
}

type perState struct {
	names []int
	all   map[int][]int64
	clean map[int][]int64
}

func newPerState(states []int) *perState {
	return &perState{names: states, all: map[int][]int64{}, clean: map[int][]int64{}}
}

func (p *perState) print(count, what string, d *idle) {
	if d == nil {
		fmt.Printf("%s=%d %s\n", count, len(p.all[-1]), summary(what, p.all[-1]))
		return
	}
	for _, s := range p.names {
		fmt.Printf("state=%d %s=%d %s %s\n", s, count, len(p.all[s]), summary(what, p.all[s]), summary("clean_"+what, p.clean[s]))
	}
}

func label(d *idle, state int) string {
	if d == nil {
		return "-"
	}
	return strconv.Itoa(state)
}

func main() {
	n := flag.Int("n", 2000, "round trips (or reads) measured, per state with -states")
	warm := flag.Int("warmup", 100, "round trips (or reads) first, not measured")
	cpus := flag.String("cpus", "0,1", "the two CPUs: this process's, the echoing child's")
	gap := flag.Duration("gap", 0, "sleep between round trips (0: none)")
	statesFlag := flag.String("states", "", "cpuidle states to measure in turns, each enabled alone (comma-separated indices)")
	turn := flag.Int("turn", 50, "with -states, samples per turn")
	wakerState := flag.Int("waker-state", -1, "with -states (round trips), the writer's CPU keeps this state alone and only the child's wake-ups are the turn's samples (default: both CPUs take the turn's state, both directions are samples)")
	raw := flag.String("o", "", "also write every measured sample to this file, one a line, in order")
	ioFile := flag.String("io", "", "measure 4 KiB O_DIRECT reads of this file or device instead of round trips")
	ioCPU := flag.Int("io-cpu", 1, "with -io, the CPU the reads run on")
	ioJitter := flag.Duration("io-jitter", 0, "with -io, spin a random time in [0, this) before each read (the CPU stays busy: no idle stay)")
	childCPU := flag.Int("child", -1, "internal: run as the echoing child on this CPU")
	flag.Parse()
	if *ioFile != "" {
		// Every thread on the reading CPU, the runtime's too (inherited
		// through the exec below), so that no other CPU wakes for us.
		var set unix.CPUSet
		set.Set(*ioCPU)
		must(unix.SchedSetaffinity(0, &set))
	}
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
	var d *idle
	var states []int
	if *statesFlag != "" {
		for _, f := range strings.Split(*statesFlag, ",") {
			s, err := strconv.Atoi(f)
			must(err)
			states = append(states, s)
		}
		d = openIdle()
		for _, s := range states {
			if s < 0 || s >= d.nstates {
				must(fmt.Errorf("-states: no state %d (the CPUs have %d)", s, d.nstates))
			}
		}
		if *wakerState >= d.nstates {
			must(fmt.Errorf("-waker-state: no state %d (the CPUs have %d)", *wakerState, d.nstates))
		}
	}
	if *wakerState >= 0 && (d == nil || *ioFile != "") {
		must(fmt.Errorf("-waker-state needs -states and round trips (not -io)"))
	}
	if *turn < 1 {
		must(fmt.Errorf("-turn must be at least 1"))
	}
	var out strings.Builder
	if *ioFile != "" {
		ioMain(*ioFile, *ioCPU, *n, *warm, *turn, *ioJitter, d, states, &out)
	} else {
		pingMain(*cpus, *n, *warm, *turn, *gap, *wakerState, d, states, &out)
	}
	if *raw != "" {
		must(os.WriteFile(*raw, []byte(out.String()), 0o644))
	}
}

func pingMain(cpus string, n, warm, turn int, gap time.Duration, wakerState int, d *idle, states []int, out *strings.Builder) {
	parts := strings.Split(cpus, ",")
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
	if wakerState >= 0 {
		d.pinned = map[int]int{a: wakerState}
	}
	var buf [8]byte
	var before, after [][]int64
	if d != nil {
		before, after = d.counters(), d.counters()
	}
	var rtt []int64
	wake := newPerState(states)
	sampler(d, states, n, warm, turn, func(state int, keep bool) {
		if gap > 0 {
			time.Sleep(gap)
		}
		if d != nil {
			d.read(before)
		}
		t0 := nanotime()
		writeMsg(toChild[1], &buf)
		readMsg(fromChild[0], &buf)
		t1 := nanotime()
		if !keep {
			return
		}
		clean := "-"
		if d != nil {
			d.read(after)
			aState := state
			if wakerState >= 0 {
				aState = wakerState
			}
			clean = d.clean(before, after, map[int]int{a: aState, b: state})
		}
		tc := *(*int64)(unsafe.Pointer(&buf[0]))
		rtt = append(rtt, t1-t0)
		samples := []int64{tc - t0, t1 - tc}
		if wakerState >= 0 {
			samples = samples[:1] // the writer's wake-ups are from its own state
		}
		wake.all[state] = append(wake.all[state], samples...)
		if clean == "1" {
			wake.clean[state] = append(wake.clean[state], samples...)
		}
		fmt.Fprintf(out, "%s %d %d %d %s\n", label(d, state), t1-t0, tc-t0, t1-tc, clean)
	})
	unix.Close(toChild[1])
	_ = cmd.Wait()
	if d == nil {
		fmt.Printf("rounds=%d %s %s\n", len(rtt), summary("rtt", rtt), summary("wake", wake.all[-1]))
		return
	}
	wake.print("wakes", "wake", d)
}

func ioMain(path string, cpu, n, warm, turn int, jitter time.Duration, d *idle, states []int, out *strings.Builder) {
	pin(cpu)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	must(err)
	size, err := unix.Seek(fd, 0, 2)
	must(err)
	const bs = 4096
	if size > 64<<20 {
		size = 64 << 20
	}
	blocks := size / bs
	if blocks < 1 {
		must(fmt.Errorf("%s: smaller than one block", path))
	}
	buf, err := unix.Mmap(-1, 0, bs, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	must(err)
	var before, after [][]int64
	if d != nil {
		before, after = d.counters(), d.counters()
	}
	rng := rand.New(rand.NewSource(1))
	lat := newPerState(states)
	sampler(d, states, n, warm, turn, func(state int, keep bool) {
		off := rng.Int63n(blocks) * bs
		if jitter > 0 {
			// A read's issue time, against the emulated device's timers,
			// would otherwise follow from the state's exit latency.
			for end := nanotime() + rng.Int63n(int64(jitter)); nanotime() < end; {
			}
		}
		if d != nil {
			d.read(before)
		}
		t0 := nanotime()
		k, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), bs, uintptr(off), 0, 0)
		t1 := nanotime()
		if errno != 0 {
			must(errno)
		}
		if k != bs {
			must(fmt.Errorf("%s: short read at %d: %d bytes", path, off, k))
		}
		if !keep {
			return
		}
		clean := "-"
		if d != nil {
			d.read(after)
			clean = d.clean(before, after, map[int]int{cpu: state})
		}
		lat.all[state] = append(lat.all[state], t1-t0)
		if clean == "1" {
			lat.clean[state] = append(lat.clean[state], t1-t0)
		}
		fmt.Fprintf(out, "%s %d %s\n", label(d, state), t1-t0, clean)
	})
	lat.print("reads", "io", d)
}
