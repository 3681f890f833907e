package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/idletrace/idletrace/internal/testenv"
	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/trace"
)

// frameStart is how each refresh of top on a terminal begins: the cursor
// home, then the title.
const frameStart = home + "idletrace top ·"

// expectedStates is what top must name here: the cpuidle driver's states
// (as sysfs names them), or without a driver the default idle routine the
// cpu_idle tracepoint reports (HLT).
func expectedStates(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cpuidle/state*/name")
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSpace(string(b)))
	}
	if len(names) == 0 {
		return []string{analysis.NoDriverHLT}
	}
	return names
}

// ptyOutput collects what the child writes to its terminal.
type ptyOutput struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// runOnPTY starts idletrace with stdin and stdout on a pseudo-terminal of
// 50×200 (stderr apart, so the terminal holds only what top draws).
func runOnPTY(t *testing.T, args ...string) (*exec.Cmd, *os.File, *ptyOutput, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	out := &ptyOutput{done: make(chan struct{})}
	go func() {
		defer close(out.done)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			out.mu.Lock()
			out.buf.Write(b[:n])
			out.mu.Unlock()
			if err != nil { // EIO once the child has gone and all is read
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		ptmx.Close()
	})
	return cmd, ptmx, out, &errb
}

// waitExit waits for the child and everything it wrote; exit status.
func waitExit(t *testing.T, cmd *exec.Cmd, out *ptyOutput, limit time.Duration) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(limit):
		cmd.Process.Kill()
		t.Fatalf("still running after %v; terminal:\n%q", limit, out.String())
	}
	select {
	case <-out.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal was not closed after the exit")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

var (
	ansiSeq    = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")
	tempStatus = regexp.MustCompile(`trace: (\S+) \(temporary`)
)

// lastFrame is the last refresh as text lines, without escape sequences.
func lastFrame(term string) []string {
	i := strings.LastIndex(term, frameStart)
	if i < 0 {
		return nil
	}
	f := term[i:]
	if j := strings.Index(f, leaveScreen); j >= 0 {
		f = f[:j]
	}
	f = strings.ReplaceAll(ansiSeq.ReplaceAllString(f, ""), "\r", "")
	return strings.Split(f, "\n")
}

// checkFrame: a row per recorded CPU in both per-CPU tables, and every
// state named.
func checkFrame(t *testing.T, lines []string, cpus []int, states []string) {
	t.Helper()
	text := strings.Join(lines, "\n")
	for _, c := range cpus {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d\s+\d`, c))
		if n := len(row.FindAllString(text, -1)); n != 2 {
			t.Errorf("%d rows for CPU %d, want 2 (states, wake causes):\n%s", n, c, text)
		}
	}
	for _, st := range states {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(st) + `\s`).MatchString(text) {
			t.Errorf("no row for state %q:\n%s", st, text)
		}
	}
}

// TestTopTerminal runs idletrace top on a pseudo-terminal and ends it each
// way it can end: its duration, SIGINT, SIGTERM, SIGHUP, the q and Ctrl-C
// keys, a full disk, and -o FILE to keep the trace. Each time it must have
// drawn a row per recorded CPU and every state at least twice, exit 0 (1
// with the error's line for the full disk), and leave the terminal as it
// found it: leaving the alternate screen and showing the cursor are the
// last bytes written, stdin's mode is restored, and the temporary trace is
// gone (or, with -o, opens with idletrace stats).
func TestTopTerminal(t *testing.T) {
	testenv.RequireRecorder(t)
	states := expectedStates(t)
	online, err := host.Local.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(t.TempDir(), "kept.trace")
	// A small disk, filled while top writes to it: the error path.
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	defer exec.Command("umount", small).Run()
	fill := func(*exec.Cmd, *os.File) {
		f, err := os.Create(filepath.Join(small, "filler"))
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for buf := make([]byte, 64<<10); ; {
			if _, err := f.Write(buf); err != nil {
				return // the disk is full
			}
		}
	}
	cases := []struct {
		name string
		args []string
		cpus []int
		stop func(cmd *exec.Cmd, ptmx *os.File) // after the second frame; nil: runs to -d
		keep string
		// failure: the exit status is 1 and stderr's last line says this.
		failure string
		reason  string // the stop reason the summary gives, where checked
	}{
		{name: "duration", args: []string{"-d", "3s"}, cpus: online, reason: "duration"},
		{name: "SIGINT", cpus: online, stop: func(cmd *exec.Cmd, _ *os.File) { cmd.Process.Signal(syscall.SIGINT) }},
		{name: "SIGTERM", cpus: online, stop: func(cmd *exec.Cmd, _ *os.File) { cmd.Process.Signal(syscall.SIGTERM) }},
		{name: "SIGHUP", cpus: online, stop: func(cmd *exec.Cmd, _ *os.File) { cmd.Process.Signal(syscall.SIGHUP) }},
		{name: "q key", cpus: online, stop: func(_ *exec.Cmd, ptmx *os.File) { ptmx.Write([]byte("q")) }, reason: "quit"},
		{name: "Ctrl-C key", cpus: online, stop: func(_ *exec.Cmd, ptmx *os.File) { ptmx.Write([]byte{3}) }},
		{name: "one CPU, trace kept", args: []string{"-d", "3s", "--cpus", "0", "-o", kept}, cpus: []int{0}, keep: kept},
		{name: "disk full", args: []string{"--no-io", "-o", filepath.Join(small, "t.trace")}, cpus: online, stop: fill, failure: "no space left on device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, ptmx, out, errb := runOnPTY(t, append([]string{"top"}, tc.args...)...)
			before, err := pty.GetsizeFull(ptmx) // the pty works: a sanity check
			if err != nil || before.Cols != 200 {
				t.Fatalf("pty size %+v, %v", before, err)
			}
			if tc.stop != nil {
				deadline := time.Now().Add(30 * time.Second)
				for strings.Count(out.String(), frameStart) < 2 {
					if time.Now().After(deadline) {
						t.Fatalf("no second frame after 30 s; terminal:\n%q\nstderr: %s", out.String(), errb.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
				// While it runs, keys come one at a time without echo (this also
				// shows that the check after the exit reads the child's mode).
				if attrs, err := termios(ptmx); err != nil || attrs.Lflag&(unix.ICANON|unix.ECHO) != 0 {
					t.Errorf("while top runs: lflag %#x, %v; want ICANON and ECHO off", attrs.Lflag, err)
				}
				tc.stop(cmd, ptmx)
			}
			code := waitExit(t, cmd, out, 60*time.Second)
			term := out.String()
			stderr := strings.Split(strings.TrimSpace(errb.String()), "\n")
			summary := strings.Join(strings.Fields(errb.String()), " ") // the summary wraps at 80 columns
			if tc.reason != "" && !strings.Contains(summary, "s ("+tc.reason+"): ") {
				t.Errorf("the summary does not give the stop reason (%s): %s", tc.reason, errb.String())
			}
			switch {
			case tc.failure != "" && (code != 1 || !strings.HasPrefix(stderr[len(stderr)-1], "idletrace top: ") || !strings.Contains(stderr[len(stderr)-1], tc.failure)):
				t.Errorf("exit %d, want 1 and %q on stderr's last line; stderr: %s", code, tc.failure, errb.String())
			case tc.failure == "" && code != 0:
				t.Errorf("exit %d, want 0; stderr: %s", code, errb.String())
			}
			if !strings.HasPrefix(term, enterScreen) {
				t.Errorf("the alternate screen and hidden cursor are not the first thing written: %q", term[:min(len(term), 80)])
			}
			if !strings.HasSuffix(term, leaveScreen) {
				t.Errorf("the last bytes written are %q, want the alternate screen left and the cursor shown (%q)", term[max(0, len(term)-120):], leaveScreen)
			}
			if n := strings.Count(term, frameStart); n < 2 {
				t.Errorf("%d frames drawn, want at least 2:\n%q", n, term)
			}
			frame := lastFrame(term)
			checkFrame(t, frame, tc.cpus, states)
			switch {
			case tc.failure != "":
			case tc.keep == "":
				m := tempStatus.FindStringSubmatch(strings.Join(frame, "\n"))
				if m == nil {
					t.Fatalf("the frame does not say where the temporary trace is:\n%s", strings.Join(frame, "\n"))
				}
				if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
					t.Errorf("temporary trace %s still there after exit (%v)", m[1], err)
				}
				if !strings.Contains(summary, "temporary trace removed") {
					t.Errorf("stderr %q", errb.String())
				}
			default:
				r := runBin(t, "stats", tc.keep)
				if r.code != 0 || !strings.Contains(r.stdout, "idletrace stats") {
					t.Errorf("idletrace stats on the kept trace: exit %d, %s%s", r.code, r.stdout, r.stderr)
				}
				if !strings.Contains(summary, "kept in "+tc.keep) {
					t.Errorf("stderr %q", errb.String())
				}
			}
			t.Logf("%d frames; stderr: %s", strings.Count(term, frameStart), strings.TrimSpace(errb.String()))
			// stdin's mode is back: canonical, echoing.
			attrs, err := termios(ptmx)
			if err != nil {
				t.Fatal(err)
			}
			if attrs.Lflag&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
				t.Errorf("terminal left without ICANON/ECHO: lflag %#x", attrs.Lflag)
			}
		})
	}
}

func termios(f *os.File) (*unix.Termios, error) {
	return unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
}

// TestTopPipe: with stdout not a terminal, top prints one plain-text
// snapshot a second, without escape sequences, each with a row per CPU.
func TestTopPipe(t *testing.T) {
	testenv.RequireRecorder(t)
	states := expectedStates(t)
	online, err := host.Local.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		cpus []int
	}{
		{"all CPUs", nil, online},
		{"one CPU", []string{"--cpus", "0"}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, append([]string{"top", "-d", "3s"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "\x1b") {
				t.Errorf("escape sequences in piped output: %q", r.stdout)
			}
			snaps := strings.Split(r.stdout, "idletrace top ·")[1:]
			if len(snaps) < 2 {
				t.Fatalf("%d snapshots in 3 s, want at least 2:\n%s", len(snaps), r.stdout)
			}
			for _, s := range snaps {
				checkFrame(t, strings.Split(s, "\n"), tc.cpus, states)
			}
			if len(tc.cpus) == 1 && regexp.MustCompile(`(?m)^\s*1\s+\d`).MatchString(r.stdout) {
				t.Errorf("--cpus 0 shows CPU 1:\n%s", r.stdout)
			}
			if !strings.Contains(strings.Join(strings.Fields(r.stderr), " "), "temporary trace removed") {
				t.Errorf("stderr %q", r.stderr)
			}
			// Piped, every line fits 80 columns: snapshots and the summary
			// (trial 11 item 14); the loss counts real losses only.
			for _, l := range strings.Split(r.stdout+r.stderr, "\n") {
				if n := utf8.RuneCountInString(l); n > 80 {
					t.Errorf("a %d-column line: %q", n, l)
				}
			}
			if strings.Contains(r.stdout, "events lost") {
				t.Errorf("the old loss wording: %s", r.stdout)
			}
		})
	}
}

// TestTopPipeClosed: when the reader of its output leaves (| head), top
// stops, removes its temporary trace and exits 0, instead of dying of
// SIGPIPE with the trace left behind.
func TestTopPipeClosed(t *testing.T) {
	testenv.RequireRecorder(t)
	cmd := exec.Command(binPath, "top")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var first []byte
	for buf := make([]byte, 4096); !bytes.Contains(first, []byte("(temporary")); {
		n, err := stdout.Read(buf)
		if err != nil {
			t.Fatalf("reading the first snapshot: %v; stderr %s", err, errb.String())
		}
		first = append(first, buf[:n]...)
	}
	stdout.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit %v, want 0; stderr %s", err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("top goes on after its reader left")
	}
	m := tempStatus.FindSubmatch(first)
	if m == nil {
		t.Fatalf("the snapshot does not say where the temporary trace is:\n%s", first)
	}
	if _, err := os.Stat(string(m[1])); !os.IsNotExist(err) {
		t.Errorf("temporary trace %s still there (%v)", m[1], err)
	}
}

// TestTopNotRoot: without privileges top fails as record does, with the
// same one line, before touching the terminal.
func TestTopNotRoot(t *testing.T) {
	run := func(args ...string) (int, string) {
		cmd := exec.Command(binPath, args...)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v: want a failure, got %v (stderr %q)", args, err, errb.String())
		}
		return ee.ExitCode(), errb.String()
	}
	rc, rerr := run("record", "-o", filepath.Join(os.TempDir(), "idletrace-nobody-top.trace"), "-d", "1s")
	tc, terr := run("top", "-d", "1s")
	if tc != rc || tc == 0 {
		t.Errorf("top exit %d, record exit %d", tc, rc)
	}
	want := strings.TrimPrefix(rerr, "idletrace record: ")
	if terr != "idletrace top: "+want || strings.Count(terr, "\n") != 1 || !strings.Contains(terr, "sudo") {
		t.Errorf("top says %q, record %q", terr, rerr)
	}
}

// TestTopUsage: --help says where the trace goes; usage errors exit 2.
func TestTopUsage(t *testing.T) {
	r := runBin(t, "top", "--help")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "temporary file, removed at exit") || !strings.Contains(r.stdout+r.stderr, "Usage: idletrace top ") {
		t.Errorf("top --help: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"top", "-d", "0s"}, {"top", "--cpus", "4095"}, {"top", "stray"}, {"top", "-d", "soon"}} {
		if r := runBin(t, args...); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

// syncBuffer is a bytes.Buffer a child process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestTopPMQoS: top follows the kernel's latency constraints as they
// change: a resume latency written to CPU 0 while it runs shows in a later
// snapshot, and once the old value is back, the last snapshot shows the
// start's value again and counts both changes.
func TestTopPMQoS(t *testing.T) {
	testenv.OwnMachine(t) // changes a kernel knob
	sysfs := testenv.CPUResumeLatency(t, 0)
	old, err := os.ReadFile(sysfs)
	if err != nil {
		t.Fatal(err)
	}
	// "n/a" (0 µs): the kernel's constraint is the least of its requests
	// (this file's and any a driver holds), so only 0 is sure to move it,
	// unless it is 0 already.
	value, shown := "n/a", trace.PMQoSCPUPollOnly
	if strings.TrimSpace(string(old)) == "n/a" {
		value, shown = "37", "37 µs"
	}
	cmd := exec.Command(binPath, "top", "-d", "5s")
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Piped, prose wraps at 80 columns: read the text with its line breaks
	// as spaces.
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	waitFor := func(what string, within time.Duration) bool {
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(flat(out.String()), what) {
				return true
			}
		}
		return false
	}
	started := waitFor("idletrace top ·", 10*time.Second)
	if started {
		if err := os.WriteFile(sysfs, []byte(value), 0); err != nil {
			t.Error(err)
		}
		if !waitFor("resume latency cpu0 "+shown, 3*time.Second) {
			t.Errorf("no snapshot within 3 s shows CPU 0's resume latency of %s", shown)
		}
		if err := os.WriteFile(sysfs, old, 0); err != nil {
			t.Error(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("top: %v: %s", err, errb.String())
	}
	if !started {
		t.Fatalf("no snapshot in 10 s:\n%s", out.String())
	}
	snaps := strings.Split(flat(out.String()), "idletrace top ·")
	qos := regexp.MustCompile(`PM QoS(?: \(no effect: no cpuidle driver\))?: (.*?); (\d+) changes? since start, \d+ in the last interval`)
	line := func(snap string) (limits, changes string) {
		m := qos.FindStringSubmatch(snap)
		if m == nil {
			t.Fatalf("no PM QoS line in a snapshot:\n%s", snap)
		}
		return m[1], m[2]
	}
	startLimits, _ := line(snaps[1])
	lastLimits, lastChanges := line(snaps[len(snaps)-1])
	if lastLimits != startLimits {
		t.Errorf("the last snapshot's limits %q, want the start's back (%q)", lastLimits, startLimits)
	}
	// At least the write and the restoration (another process may change
	// the global limit meanwhile).
	if n, _ := strconv.Atoi(lastChanges); n < 2 {
		t.Errorf("the last snapshot counts %s changes, want at least 2 (the write and the restoration)", lastChanges)
	}
}
