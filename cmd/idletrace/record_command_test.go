package main

import (
	"encoding/json"
	"fmt"
	"github.com/idletrace/idletrace/pkg/record"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idletrace/idletrace/internal/testenv"
)

// sleepers lists the live processes running `sleep ARG`.
func sleepers(arg string) []string {
	want := "sleep\x00" + arg + "\x00"
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || string(b) != want {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && strings.Contains(string(st), ") Z ") {
			continue // exited, waiting to be reaped by its new parent
		}
		pids = append(pids, filepath.Base(d))
	}
	return pids
}

// TestRecordCommandEnd: record -- COMMAND stops COMMAND (its whole process
// group) when the duration ends, says how COMMAND ended, stores it in the
// trace, and exits with COMMAND's status when it failed on its own
// (trial 11 items 2 and 4).
func TestRecordCommandEnd(t *testing.T) {
	testenv.RequireRecorder(t)
	dir := t.TempDir()
	// Unique arguments, to find this test's sleeps among the machine's.
	arg := func(i int) string { return fmt.Sprintf("%d", 3000+os.Getpid()%1000*10+i) }
	cases := []struct {
		name    string
		args    []string
		code    int
		say     string // in the summary, and in info's "command end"
		stopped string // end.command_stopped
		signal  int    // end.command_signal, 0 for none
		exit    int    // end.command_exit_code
		sleep   string // a sleep that must not outlive the recording
	}{
		{"stopped at the duration", []string{"-d", "1s", "--", "sleep", arg(1)}, 0,
			"sleep stopped by SIGTERM at the end of the duration", "duration", 15, 143, arg(1)},
		{"its children too", []string{"-d", "1s", "--", "sh", "-c", "sleep " + arg(2) + "; true"}, 0,
			"sh stopped by SIGTERM at the end of the duration", "duration", 15, 143, arg(2)},
		{"SIGKILL after the grace period", []string{"-d", "1s", "--", "sh", "-c", "trap '' TERM; sleep " + arg(3) + "; true"}, 0,
			"sh killed by SIGKILL at the end of the duration (SIGTERM did not stop it)", "duration", 9, 137, arg(3)},
		{"failed", []string{"--", "sh", "-c", "exit 3"}, 3, "sh exited with status 3", "", 0, 3, ""},
		{"killed on its own", []string{"--", "sh", "-c", "kill -TERM $$"}, 143, "sh killed by SIGTERM (signal 15)", "", 15, 143, ""},
		{"succeeded", []string{"--", "true"}, 0, "true exited with status 0", "", 0, 0, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("c%d.trace", i))
			start := time.Now()
			r := runBin(t, append([]string{"record", "-q", "-o", path}, tc.args...)...)
			took := time.Since(start)
			if r.code != tc.code {
				t.Errorf("exit status %d, want %d (stderr %q)", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "idletrace record: "+tc.say+"\n") {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.say)
			}
			if tc.sleep != "" {
				if left := sleepers(tc.sleep); len(left) > 0 {
					t.Errorf("sleep %s left running: pids %v", tc.sleep, left)
				}
				if took > 6*time.Second {
					t.Errorf("record took %v: the command was not stopped at the duration's end", took)
				}
			}
			info := runBin(t, "info", path)
			if !strings.Contains(info.stdout, tc.say) {
				t.Errorf("info does not say %q:\n%s", tc.say, info.stdout)
			}
			js := runBin(t, "info", path, "--format", "json")
			var v struct {
				End struct {
					ExitCode *int   `json:"command_exit_code"`
					Signal   *int   `json:"command_signal"`
					Stopped  string `json:"command_stopped"`
				} `json:"end"`
			}
			if err := json.Unmarshal([]byte(js.stdout), &v); err != nil {
				t.Fatal(err)
			}
			if v.End.ExitCode == nil || *v.End.ExitCode != tc.exit || v.End.Stopped != tc.stopped ||
				(tc.signal == 0) != (v.End.Signal == nil) || (v.End.Signal != nil && *v.End.Signal != tc.signal) {
				t.Errorf("end: exit %v signal %v stopped %q; want %d, %d, %q", v.End.ExitCode, v.End.Signal, v.End.Stopped, tc.exit, tc.signal, tc.stopped)
			}
		})
	}
}

// TestRecordCommandNotStarted: a command that cannot start leaves no trace
// file, one line on stderr and a shell's status (127 not found, 126 not
// executable), also with --force over an earlier trace.
func TestRecordCommandNotStarted(t *testing.T) {
	dir := t.TempDir()
	notExec := writeFile(t, "not-executable", []byte("#!/bin/sh\n"))
	earlier := writeFile(t, "earlier.trace", []byte("an earlier trace"))
	cases := []struct {
		name string
		args []string
		out  string
		code int
		want string
	}{
		{"not found", []string{"--", "/nonexistent/cmd"}, filepath.Join(dir, "a.trace"), 127, "starting /nonexistent/cmd"},
		{"not in PATH", []string{"--", "idletrace-no-such-command"}, filepath.Join(dir, "b.trace"), 127, "idletrace-no-such-command"},
		{"not executable", []string{"--", notExec}, filepath.Join(dir, "c.trace"), 126, "permission denied"},
		{"with --force", []string{"--force", "--", "/nonexistent/cmd"}, earlier, 127, "starting /nonexistent/cmd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, append([]string{"record", "-q", "-o", tc.out}, tc.args...)...)
			if r.code != tc.code || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q (want one line naming %q)", r.code, tc.code, r.stderr, tc.want)
			}
			if tc.out == earlier {
				if b, _ := os.ReadFile(earlier); string(b) != "an earlier trace" {
					t.Errorf("the earlier trace was overwritten")
				}
			} else if _, err := os.Stat(tc.out); err == nil {
				t.Errorf("%s was left behind", tc.out)
			}
		})
	}
}

// recordSleeper starts `idletrace record -o path -- command...`, whose
// command runs `sleep arg`, and returns once that sleep runs, with the
// recorder's stderr and a deadline 10 s after the start.
func recordSleeper(t *testing.T, path, arg string, command ...string) (*exec.Cmd, *strings.Builder, time.Time) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"record", "-q", "-o", path, "--"}, command...)...)
	errb := &strings.Builder{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sleepers(arg)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return cmd, errb, deadline
}

// TestRecordSignalStopsCommand: SIGTERM to idletrace stops COMMAND as the
// duration's end does (exit 0: the recording stopped as asked), and
// SIGKILL to idletrace takes COMMAND with it.
func TestRecordSignalStopsCommand(t *testing.T) {
	testenv.RequireRecorder(t)
	dir := t.TempDir()
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			arg := fmt.Sprintf("%d", 5000+os.Getpid()%1000*10+i)
			cmd, errb, deadline := recordSleeper(t, filepath.Join(dir, fmt.Sprintf("s%d.trace", i)), arg, "sleep", arg)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if sig == syscall.SIGTERM {
				if err != nil {
					t.Errorf("record on SIGTERM: %v (stderr %q)", err, errb.String())
				}
				if want := "sleep stopped by SIGTERM when the recording was interrupted"; !strings.Contains(errb.String(), want) {
					t.Errorf("stderr %q does not say %q", errb.String(), want)
				}
			}
			for time.Now().Before(deadline) && len(sleepers(arg)) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if left := sleepers(arg); len(left) > 0 {
				t.Errorf("sleep %s outlived idletrace (%v): pids %v", arg, sig, left)
				for _, p := range left {
					exec.Command("kill", "-9", p).Run()
				}
			}
		})
	}
	// A second SIGINT kills a command that ignores SIGTERM at once,
	// rather than after record.CommandGrace.
	t.Run("second SIGINT", func(t *testing.T) {
		arg := fmt.Sprintf("%d", 5000+os.Getpid()%1000*10+7)
		cmd, errb, _ := recordSleeper(t, filepath.Join(dir, "twice.trace"), arg, "sh", "-c", "trap '' TERM; sleep "+arg+"; true")
		first := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		time.Sleep(300 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("record: %v (stderr %q)", err, errb.String())
		}
		if took := time.Since(first); took >= record.CommandGrace {
			t.Errorf("record took %v after the first SIGINT: the second did not kill the command at once (grace %v)", took, record.CommandGrace)
		}
		if want := "sh killed by SIGKILL when the recording was interrupted"; !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q does not say %q", errb.String(), want)
		}
		for _, p := range sleepers(arg) {
			exec.Command("kill", "-9", p).Run()
		}
	})
}

// TestRecordDevNull: -o /dev/null --force records and exits 0 (a device
// has nothing to sync; fsync gave EINVAL and exit 1), and leaves the
// device as it was.
func TestRecordDevNull(t *testing.T) {
	testenv.RequireRecorder(t)
	r := runBin(t, "record", "-q", "-o", os.DevNull, "--force", "-d", "1s")
	if r.code != 0 {
		t.Errorf("record -o %s: exit %d, stderr %q", os.DevNull, r.code, r.stderr)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("%s is no longer a character device: %v %v", os.DevNull, fi, err)
	}
}

// TestRecordToStdout: -o - streams the trace to standard output (a pipe
// here), COMMAND's own output goes to stderr rather than into it, and the
// summary counts the bytes written (a pipe's size is 0).
func TestRecordToStdout(t *testing.T) {
	testenv.RequireRecorder(t)
	r := runBin(t, "record", "-q", "-o", "-", "-d", "5s", "--", "sh", "-c", "echo from-the-command; sleep 0.5")
	if r.code != 0 {
		t.Fatalf("record -o -: exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "from-the-command") || !strings.Contains(r.stderr, "from-the-command") {
		t.Errorf("COMMAND's output went into the trace, or nowhere: stderr %q", r.stderr)
	}
	path := writeFile(t, "s.trace", []byte(r.stdout))
	if info := runBin(t, "info", path); info.code != 0 || !strings.Contains(info.stdout, "from-the-command") {
		t.Errorf("the streamed trace: info exit %d, %s%s", info.code, info.stdout, info.stderr)
	}
	if want := humanBytes(int64(len(r.stdout))); !strings.Contains(r.stderr, want) {
		t.Errorf("the summary does not count the %d bytes streamed (%s): %q", len(r.stdout), want, r.stderr)
	}
	if _, err := os.Stat("-"); err == nil {
		t.Errorf("record -o - made a file named -")
	}
}
