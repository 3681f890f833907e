// Package tune changes the running kernel's cpuidle knobs as a what-if
// policy asks, and puts them back: the governor
// (/sys/devices/system/cpu/cpuidle/current_governor), the states' disable
// switches (/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable, by state
// name), a global latency limit (held open on /dev/cpu_dma_latency) and
// haltpoll's module parameters (/sys/module/haltpoll/parameters). What a
// running kernel cannot change (maxcstate=, kernel=, margin=, poll=,
// blkqos=, a governor it lacks) is refused before anything is changed.
package tune

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/idletrace/idletrace/pkg/host"
	"github.com/idletrace/idletrace/pkg/model"
	"github.com/idletrace/idletrace/pkg/trace"
)

// Refusal says why a policy cannot be applied to the running kernel. Its
// message is one line.
type Refusal struct{ msg string }

func (r *Refusal) Error() string { return r.msg }

func refusef(format string, a ...any) error { return &Refusal{fmt.Sprintf(format, a...)} }

// IsRefusal reports whether err is a Refusal.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// Write is one sysfs file to write, and what it held.
type Write struct {
	Path string // absolute, under the plan's root
	What string // for people: "governor", "cpu0 state C6 disable", "guest_halt_poll_ns"
	New  string
	Old  string
}

// Plan is what applying a policy changes. Writes whose file already holds
// the new value are left out: there is nothing to change or restore.
type Plan struct {
	Policy string
	Writes []Write // in the order they are applied (restored in reverse)
	// QoSUs is the global latency limit to hold on /dev/cpu_dma_latency;
	// nil: none.
	QoSUs   *int32
	qosPath string
}

// Empty reports whether applying the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Writes) == 0 && p.QoSUs == nil }

// Changes lists, one a line, what Apply will change.
func (p *Plan) Changes() []string {
	var out []string
	for _, w := range p.Writes {
		out = append(out, fmt.Sprintf("%s: %s (was %s)", w.What, w.New, w.Old))
	}
	if p.QoSUs != nil {
		out = append(out, fmt.Sprintf("cpu_dma_latency: %d µs, held open on %s", *p.QoSUs, p.qosPath))
	}
	return out
}

// HaltpollParams are the haltpoll module parameters by the policy modifiers'
// names, which are the parameters' own.
var haltpollParams = []string{"guest_halt_poll_ns", "guest_halt_poll_grow", "guest_halt_poll_shrink", "guest_halt_poll_grow_start", "guest_halt_poll_allow_shrink"}

func haltpollValues(h model.HaltPollOverrides) map[string]string {
	v := map[string]string{}
	num := func(name string, p *uint64) {
		if p != nil {
			v[name] = strconv.FormatUint(*p, 10)
		}
	}
	num("guest_halt_poll_ns", h.GuestHaltPollNs)
	num("guest_halt_poll_grow", h.Grow)
	num("guest_halt_poll_shrink", h.Shrink)
	num("guest_halt_poll_grow_start", h.GrowStart)
	if h.AllowShrink != nil {
		v["guest_halt_poll_allow_shrink"] = map[bool]string{true: "Y", false: "N"}[*h.AllowShrink]
	}
	return v
}

// PlanFor works out, against the sysfs and /dev under root ("/" for the
// running kernel), what applying pol changes. Its error is a *Refusal
// when pol asks for what the running kernel cannot change.
func PlanFor(pol model.Policy, root string) (*Plan, error) {
	pl := &Plan{Policy: pol.Spec}
	switch {
	case pol.Governor == model.GovOracle:
		return nil, refusef("policy %q: oracle knows each period's length in advance; no kernel runs it", pol.Spec)
	case pol.Kernel != nil:
		return nil, refusef("policy %q: kernel= models another kernel release's governor; the running kernel cannot be changed to it at run time", pol.Spec)
	case pol.MaxCState >= 0:
		return nil, refusef("policy %q: maxcstate= is a boot parameter (intel_idle.max_cstate); disable= turns states off at run time", pol.Spec)
	case pol.HasMargin:
		return nil, refusef("policy %q: margin= changes menu's code; only a kernel built with it (the lab kernel) has it", pol.Spec)
	case pol.Poll != model.PollKernel:
		return nil, refusef("policy %q: poll= changes the cpuidle core's poll rule, which is compiled into the kernel", pol.Spec)
	case pol.BlkQoSLimitNs >= 0:
		return nil, refusef("policy %q: blkqos= models a block-IO latency limit that no kernel knob sets", pol.Spec)
	}
	cpuidle := filepath.Join(root, "sys/devices/system/cpu/cpuidle")
	noDriver := host.Root(root).CPUIdleDriver() == trace.CPUIdleDriverNone

	// Governor.
	if pol.Governor != model.GovRecorded {
		gov := string(pol.Governor)
		if noDriver {
			return nil, refusef("policy %q: the running kernel has no cpuidle driver, so no governor runs and no policy can be applied "+
				"(whatif predicts it on a recording; a KVM guest gets a driver with cpuidle_haltpoll.force=1)", pol.Spec)
		}
		avail, err := host.ReadTrimmed(filepath.Join(cpuidle, "available_governors"))
		if err != nil {
			return nil, refusef("policy %q: cannot read the kernel's cpuidle governors: %v", pol.Spec, err)
		}
		found := false
		for _, g := range strings.Fields(avail) {
			found = found || g == gov
		}
		if !found {
			return nil, refusef("policy %q: the running kernel has no %s governor (available: %s)", pol.Spec, gov, strings.Join(strings.Fields(avail), ", "))
		}
		path := filepath.Join(cpuidle, "current_governor")
		cur, err := host.ReadTrimmed(path)
		if err != nil {
			return nil, refusef("policy %q: the kernel's governor cannot be switched at run time (%s: %v)", pol.Spec, path, err)
		}
		if cur != gov {
			pl.Writes = append(pl.Writes, Write{Path: path, What: "governor", New: gov, Old: cur})
		}
	}

	// disable= and enable= by state name, on every CPU that has the state.
	for _, m := range []struct {
		key   string
		names []string
		value string
	}{{"disable", pol.Disable, "1"}, {"enable", pol.Enable, "0"}} {
		if len(m.names) == 0 {
			continue
		}
		if noDriver {
			return nil, refusef("policy %q: %s= needs a cpuidle driver; the running kernel has none, so it has no states to %s", pol.Spec, m.key, m.key)
		}
		writes, err := stateWrites(pol, root, m.key, m.names, m.value)
		if err != nil {
			return nil, err
		}
		pl.Writes = append(pl.Writes, writes...)
	}

	// haltpoll's module parameters.
	vals := haltpollValues(pol.HaltPoll)
	for _, name := range haltpollParams {
		v, ok := vals[name]
		if !ok {
			continue
		}
		path := filepath.Join(root, "sys/module/haltpoll/parameters", name)
		cur, err := host.ReadTrimmed(path)
		if err != nil {
			return nil, refusef("policy %q: %s: the running kernel has no haltpoll parameter %s", pol.Spec, name, path)
		}
		if cur != v {
			pl.Writes = append(pl.Writes, Write{Path: path, What: name, New: v, Old: cur})
		}
	}

	// qos= as a request held on /dev/cpu_dma_latency.
	if pol.QoSNs >= 0 {
		us := pol.QoSNs / 1000 // ParsePolicy took whole µs that fit an s32
		pl.qosPath = filepath.Join(root, "dev/cpu_dma_latency")
		if _, err := os.Stat(pl.qosPath); err != nil {
			return nil, refusef("policy %q: qos=: the running kernel has no %s", pol.Spec, pl.qosPath)
		}
		v := int32(us)
		pl.QoSUs = &v
	}
	return pl, nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// stateDirLess orders .../cpuN/cpuidle/stateK by N, then K.
func stateDirLess(a, b string) bool {
	num := func(s, prefix string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(s), prefix))
		return n
	}
	ca, cb := num(filepath.Dir(filepath.Dir(a)), "cpu"), num(filepath.Dir(filepath.Dir(b)), "cpu")
	if ca != cb {
		return ca < cb
	}
	return num(a, "state") < num(b, "state")
}

// Applied is a plan in force. Restore puts everything back; it is safe to
// call more than once and from another goroutine (a signal handler).
type Applied struct {
	mu       sync.Mutex
	done     []Write // applied, in order
	qos      *os.File
	restored bool
	log      func(string)
}

// Apply makes the plan's changes, logging each to log (may be nil). When a
// change fails, what was already changed is put back and the error says
// which failed.
func (p *Plan) Apply(log func(string)) (*Applied, error) {
	if log == nil {
		log = func(string) {}
	}
	a := &Applied{log: log}
	for _, w := range p.Writes {
		if err := os.WriteFile(w.Path, []byte(w.New), 0); err != nil {
			rerr := a.Restore()
			return nil, errors.Join(fmt.Errorf("setting %s to %s: %w", w.What, w.New, err), rerr)
		}
		a.mu.Lock()
		a.done = append(a.done, w)
		a.mu.Unlock()
		log(fmt.Sprintf("set %s to %s (was %s)", w.What, w.New, w.Old))
	}
	if p.QoSUs != nil {
		f, err := os.OpenFile(p.qosPath, os.O_WRONLY, 0)
		if err == nil {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(*p.QoSUs))
			if _, err = f.Write(b[:]); err != nil {
				f.Close()
			}
		}
		if err != nil {
			rerr := a.Restore()
			return nil, errors.Join(fmt.Errorf("holding a %d µs latency limit on %s: %w", *p.QoSUs, p.qosPath, err), rerr)
		}
		a.mu.Lock()
		a.qos = f
		a.mu.Unlock()
		log(fmt.Sprintf("holding a %d µs latency limit on %s", *p.QoSUs, p.qosPath))
	}
	return a, nil
}

// Restore puts back every change, the last first, and releases the latency
// limit. It goes on past a failure and returns every failure joined.
func (a *Applied) Restore() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.restored {
		return nil
	}
	a.restored = true
	var errs []error
	if a.qos != nil {
		if err := a.qos.Close(); err != nil {
			errs = append(errs, fmt.Errorf("releasing the latency limit: %w", err))
		} else {
			a.log("released the latency limit")
		}
		a.qos = nil
	}
	for i := len(a.done) - 1; i >= 0; i-- {
		w := a.done[i]
		if err := os.WriteFile(w.Path, []byte(w.Old), 0); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s to %s: %w", w.What, w.Old, err))
			continue
		}
		a.log(fmt.Sprintf("restored %s to %s", w.What, w.Old))
	}
	a.done = nil
	return errors.Join(errs...)
}

// stateWrites plans writing value to the sysfs disable file of each named
// state on every CPU that has it (key names the modifier in errors).
func stateWrites(pol model.Policy, root, key string, want []string, value string) ([]Write, error) {
	dirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*"))
	sort.Slice(dirs, func(i, j int) bool { return stateDirLess(dirs[i], dirs[j]) })
	var writes []Write
	var names []string
	for _, w := range want {
		found := false
		for _, d := range dirs {
			name, err := host.ReadTrimmed(filepath.Join(d, "name"))
			if err != nil {
				continue
			}
			if !containsFold(names, name) {
				names = append(names, name)
			}
			if !strings.EqualFold(name, w) {
				continue
			}
			found = true
			path := filepath.Join(d, "disable")
			cur, err := host.ReadTrimmed(path)
			if err != nil {
				return nil, refusef("policy %q: %v", pol.Spec, err)
			}
			if cur != value {
				cpu := filepath.Base(filepath.Dir(filepath.Dir(d)))
				writes = append(writes, Write{Path: path, What: fmt.Sprintf("%s state %s disable", cpu, name), New: value, Old: cur})
			}
		}
		if !found {
			return nil, refusef("policy %q: %s=: the running kernel has no state %q (states: %s)", pol.Spec, key, w, strings.Join(names, ", "))
		}
	}
	return writes, nil
}
