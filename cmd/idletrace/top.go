package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/idletrace/idletrace/pkg/analysis"
	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/record"
	"github.com/idletrace/idletrace/pkg/trace"
)

// The terminal sequences top uses: the alternate screen and the cursor
// (xterm's, which every terminal emulator in use understands), home, and
// erase to the end of the line and of the screen.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l"
	leaveScreen = "\x1b[?1049l\x1b[?25h"
	home        = "\x1b[H"
	eraseLine   = "\x1b[K"
	eraseBelow  = "\x1b[J"
)

const topRefresh = time.Second

func runTop(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("top", stderr)
	out := fs.StringP("output", "o", "", "keep the trace in this file (default: a temporary file, removed at exit)")
	dur := fs.DurationP("duration", "d", 0, "stop after this long (default: until q, Ctrl-C or SIGTERM)")
	cpus := fs.String("cpus", "", "record and show these CPUs only (e.g. 0-3,8)")
	force := fs.Bool("force", false, "overwrite an existing -o file")
	noIO := fs.Bool("no-io", false, "do not record block IO")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *dur < 0 || (*dur == 0 && fs.Changed("duration")) {
		return usagef("--duration %v: must be positive (leave it out to run until q, Ctrl-C or SIGTERM)", *dur)
	}
	opts := record.Options{Output: *out, Force: *force, Duration: *dur, NoIO: *noIO, ToolVersion: version}
	if opts.CPUs, err = cpuList(*cpus); err != nil {
		return err
	}
	if *out == "" {
		dir, err := os.MkdirTemp("", "idletrace-top-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		opts.Output = filepath.Join(dir, "top.trace")
	} else if err := checkOutput(*out, "", *force); err != nil {
		return err
	}

	// SIGHUP too: when the terminal goes away, the trace is still finalised
	// (and the temporary one removed).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	quit := func() { cancel(record.StopReason("quit")) }                // q
	readerLeft := func() { cancel(record.StopReason("output closed")) } // | head

	var screen *topScreen
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		screen = &topScreen{out: f}
	} else {
		// Piped into a reader that leaves (| head): the write fails with
		// EPIPE instead of SIGPIPE killing top before it cleans up.
		sigpipe := make(chan os.Signal, 1)
		signal.Notify(sigpipe, syscall.SIGPIPE)
		defer signal.Stop(sigpipe)
	}
	var warnMu sync.Mutex
	var warnings []string
	opts.Warn = func(msg string) {
		if screen == nil {
			fmt.Fprintln(stderr, "idletrace top: warning:", msg)
			return
		}
		warnMu.Lock()
		warnings = append(warnings, msg)
		warnMu.Unlock()
	}

	// Started runs on the recorder's goroutine before any record reaches
	// Live, so live needs no lock; the channel hands top to this goroutine.
	var top *analysis.Top
	var live trace.Visitor
	started := make(chan struct{})
	opts.Started = func(meta *trace.Metadata) {
		top = analysis.NewTop(meta, host.MonotonicNs())
		live = top.Visitor()
		close(started)
	}
	opts.Live = &trace.Visitor{
		Idle:    func(p *trace.IdlePeriod) error { return live.Idle(p) },
		BlockIO: func(b *trace.BlockIO) error { return live.BlockIO(b) },
		Loss:    func(l *trace.Loss) error { return live.Loss(l) },
		PMQoS:   func(q *trace.PMQoSChange) error { return live.PMQoS(q) },
	}
	done := make(chan recordResult, 1)
	go func() {
		// A panic here (the live view runs on the recorder's goroutine) is
		// reported as an error once the terminal is restored. Record's own
		// defers have detached the programs and closed the file by then.
		defer func() {
			if p := recover(); p != nil {
				done <- recordResult{err: fmt.Errorf("internal error: %v", p), stack: debug.Stack()}
			}
		}()
		sum, err := record.Record(ctx, opts)
		done <- recordResult{sum: sum, err: err}
	}()

	status := "trace: " + opts.Output
	if *out == "" {
		status += " (temporary: removed at exit; -o FILE keeps it)"
	}
	var res recordResult
	select {
	case res = <-done: // failed before recording: the terminal is untouched
		if res.err != nil {
			stderr.Write(res.stack)
			return res.err
		}
	case <-started:
		if screen != nil {
			status += " · q or Ctrl-C: quit"
			if err := screen.enter(quit); err != nil {
				quit()
				<-done
				return err
			}
			defer screen.leave() // also on a panic; leave is idempotent
			screen.show([]string{"idletrace top: recording; the first figures come in a second"})
		}
		res = topLoop(top, screen, stdout, status, readerLeft, done, func() []string {
			warnMu.Lock()
			defer warnMu.Unlock()
			return append([]string(nil), warnings...)
		})
	}
	if screen != nil {
		screen.leave()
	}
	if res.stack != nil {
		stderr.Write(res.stack)
	}
	for _, w := range warnings {
		if screen != nil {
			fmt.Fprintln(stderr, "idletrace top: warning:", w)
		}
	}
	if sum := res.sum; sum != nil {
		kept := "kept in " + opts.Output
		if *out == "" {
			kept = "temporary trace removed"
		}
		analysis.RenderTopEnd(stderr, analysis.TopEnd{ElapsedSec: sum.Elapsed.Seconds(), StopReason: sum.StopReason,
			IdlePeriods: sum.IdlePeriods, BlockIOs: sum.BlockIOs, Loss: sum.Loss, Kept: kept})
	}
	return res.err
}

type recordResult struct {
	sum   *record.Summary
	err   error
	stack []byte // of a panic
}

// topLoop draws a frame every second until the recording ends.
func topLoop(top *analysis.Top, screen *topScreen, stdout io.Writer, status string, readerLeft func(), done <-chan recordResult, warnings func() []string) recordResult {
	tick := time.NewTicker(topRefresh)
	defer tick.Stop()
	winch := make(chan os.Signal, 1)
	if screen != nil {
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
	}
	var last *analysis.TopFrame
	draw := func() {
		view := analysis.TopView{Status: status, Warnings: warnings()}
		if screen == nil {
			var b strings.Builder
			analysis.RenderTop(&b, last, view)
			if _, err := fmt.Fprintln(stdout, b.String()); err != nil { // a blank line between snapshots
				readerLeft() // nobody reads: stop, and clean up
			}
			return
		}
		view.Width, view.Height = screen.size()
		var b strings.Builder
		analysis.RenderTop(&b, last, view)
		screen.show(strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"))
	}
	for {
		select {
		case r := <-done:
			return r
		case <-tick.C:
			last = top.Frame(host.MonotonicNs())
			draw()
		case <-winch:
			if last != nil {
				draw()
			}
		}
	}
}

// topScreen is the terminal while top draws on it: the alternate screen
// without a cursor and, when stdin is the terminal too, keys read one at
// a time without echo (Ctrl-C still raises SIGINT). leave puts it all back.
type topScreen struct {
	out   *os.File
	mu    sync.Mutex
	on    bool
	in    int         // stdin's descriptor when its mode was changed
	saved *term.State // stdin's mode before
}

func (s *topScreen) enter(quit func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := int(os.Stdin.Fd())
	if term.IsTerminal(in) {
		saved, err := term.GetState(in)
		if err != nil {
			return err
		}
		t, err := unix.IoctlGetTermios(in, unix.TCGETS)
		if err != nil {
			return err
		}
		t.Lflag &^= unix.ICANON | unix.ECHO
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		if err := unix.IoctlSetTermios(in, unix.TCSETS, t); err != nil {
			return err
		}
		s.in, s.saved = in, saved
		go func() {
			var b [1]byte
			for {
				n, err := os.Stdin.Read(b[:])
				if err != nil {
					return
				}
				if n == 1 && (b[0] == 'q' || b[0] == 'Q' || b[0] == 3) {
					quit()
					return
				}
			}
		}()
	}
	s.on = true
	_, err := io.WriteString(s.out, enterScreen)
	return err
}

func (s *topScreen) size() (width, height int) {
	w, h, err := term.GetSize(int(s.out.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// show draws lines from the top left, each erasing the rest of its line,
// and erases what the previous frame left below.
func (s *topScreen) show(lines []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	var b strings.Builder
	b.WriteString(home)
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
		b.WriteString(eraseLine)
	}
	b.WriteString(eraseBelow)
	io.WriteString(s.out, b.String())
}

// leave restores the screen, the cursor and stdin's mode; the restoring
// sequences are the last thing top writes to the terminal.
func (s *topScreen) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	s.on = false
	if s.saved != nil {
		term.Restore(s.in, s.saved)
		s.saved = nil
	}
	io.WriteString(s.out, leaveScreen)
}
