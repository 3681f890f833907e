package model

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/idletrace/idletrace/pkg/trace"
)

// Governor names a governor model.
type Governor string

const (
	GovRecorded Governor = "recorded"
	GovMenu     Governor = "menu"
	GovTEO      Governor = "teo"
	GovLadder   Governor = "ladder"
	GovHaltpoll Governor = "haltpoll"
	GovOracle   Governor = "oracle"
)

// Governors lists the governor models in a stable order.
func Governors() []Governor {
	return []Governor{GovRecorded, GovMenu, GovTEO, GovLadder, GovHaltpoll, GovOracle}
}

// PollRule says how long a polling state may spin before the cpuidle core
// ends it (dev->poll_limit_ns, drivers/cpuidle/cpuidle.c cpuidle_poll_time).
type PollRule int

const (
	// PollKernel: the rule of the kernel release the policy models.
	PollKernel PollRule = iota
	// PollFirstResidency: target residency of the first enabled state
	// after POLL, TICK_NSEC if none (36fcb4292473, Linux 5.5–5.10).
	PollFirstResidency
	// PollMin10us: the first enabled state with target residency ≥ 10 µs,
	// capped at TICK_NSEC/16, which is also the default (7a25759eaa04,
	// Linux 5.11 and later).
	PollMin10us
	// PollTick16: always TICK_NSEC/16 (a37b969a61c1, Linux 4.17–5.4).
	PollTick16
	// PollFixed: a fixed time (Policy.PollNs).
	PollFixed
	// PollUnlimited: no time limit (before 4.17: POLL spun until a
	// reschedule; only a tick or an interrupt ended it).
	PollUnlimited
)

func (r PollRule) String() string {
	switch r {
	case PollFirstResidency:
		return "first-residency"
	case PollMin10us:
		return "min10us"
	case PollTick16:
		return "tick16"
	case PollFixed:
		return "fixed"
	case PollUnlimited:
		return "unlimited"
	}
	return "kernel"
}

// Version is a kernel release (major.minor.patch); Patch is -1 when the
// release was given without one ("6.18").
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string {
	if v.Patch < 0 {
		return fmt.Sprintf("%d.%d", v.Major, v.Minor)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// AtLeast compares major.minor only.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// Is reports whether v is the major.minor series.
func (v Version) Is(major, minor int) bool { return v.Major == major && v.Minor == minor }

// NewestVersion is the newest mainline release whose governor behaviour is
// modelled; used when neither kernel= nor the trace names one.
var NewestVersion = Version{7, 0, -1}

// ParseVersion accepts "6.18", "6.18.44", "v6.18", "6.18.44-fc-v657",
// "6.19-rc3" (taken as 6.19).
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(t, "-+_ "); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("%q is not a kernel release like 6.18 or 6.18.44", s)
	}
	var n [3]int
	n[2] = -1
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 1000 {
			return Version{}, fmt.Errorf("%q is not a kernel release like 6.18 or 6.18.44", s)
		}
		n[i] = v
	}
	if n[0] < 2 || n[0] > 99 {
		return Version{}, fmt.Errorf("%q is not a kernel release like 6.18 or 6.18.44", s)
	}
	return Version{n[0], n[1], n[2]}, nil
}

// RecordedVersion is the kernel release a trace was recorded on. A
// distribution's release name can hide the stable release (Debian's
// "6.1.0-57-cloud-amd64" is 6.1.192): when the release has no patch level
// or 0, a release of the same series named in uname -v ("... Debian
// 6.1.192-3 ...") gives it.
func RecordedVersion(meta *trace.Metadata) (Version, bool) {
	v, err := ParseVersion(meta.KernelRelease)
	if err != nil {
		return Version{}, false
	}
	if v.Patch <= 0 {
		for _, m := range versionInText.FindAllStringSubmatch(meta.KernelVersion, -1) {
			if w, err := ParseVersion(m[1]); err == nil && w.Major == v.Major && w.Minor == v.Minor && w.Patch > 0 {
				return w, true
			}
		}
	}
	return v, true
}

var versionInText = regexp.MustCompile(`\b(\d+\.\d+\.\d+)\b`)

// Policy is one parsed --policy spec: a governor and its modifiers.
type Policy struct {
	Spec     string
	Governor Governor

	Poll   PollRule
	PollNs int64 // PollFixed

	HasMargin bool
	MarginPct float64

	// QoSNs is a global latency limit in ns (as /dev/cpu_dma_latency); <0: none.
	QoSNs int64
	// BlkQoSLimitNs / BlkQoSTimeoutNs: a latency limit on a CPU for
	// BlkQoSTimeoutNs after it issued block IO; limit <0: none.
	BlkQoSLimitNs   int64
	BlkQoSTimeoutNs int64
	// MaxCState disables states with index > MaxCState (intel_idle.max_cstate
	// semantics with POLL at index 0); <0: none.
	MaxCState int
	Disable   []string
	// Kernel selects the governor variant; nil: the recorded kernel's, else
	// NewestVersion.
	Kernel *Version
}

// String is the spec as given.
func (p Policy) String() string { return p.Spec }

// ParsePolicy parses GOVERNOR[+MODIFIER]... (see DESIGN.md, "Policies").
// Errors are one line naming the bad part:
// `policy "menu+margin=x": margin: "x" is not a percentage`.
func ParsePolicy(spec string) (Policy, error) {
	p := Policy{Spec: spec, QoSNs: -1, BlkQoSLimitNs: -1, MaxCState: -1}
	fail := func(part, format string, a ...any) (Policy, error) {
		if part == "" {
			return Policy{}, fmt.Errorf("policy %q: %s", spec, fmt.Sprintf(format, a...))
		}
		return Policy{}, fmt.Errorf("policy %q: %s: %s", spec, part, fmt.Sprintf(format, a...))
	}
	if strings.TrimSpace(spec) == "" {
		return fail("", "empty; expected GOVERNOR[+MODIFIER]... with GOVERNOR one of %s", govList())
	}
	parts := strings.Split(spec, "+")
	gov := Governor(strings.ToLower(strings.TrimSpace(parts[0])))
	known := false
	for _, g := range Governors() {
		if g == gov {
			known = true
		}
	}
	if !known {
		return fail("", "unknown governor %q (known: %s)", parts[0], govList())
	}
	p.Governor = gov
	seen := map[string]bool{}
	for _, m := range parts[1:] {
		key, val, hasVal := strings.Cut(m, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		if key == "" {
			return fail("", "empty modifier (two '+' in a row or a trailing '+')")
		}
		if !hasVal || val == "" {
			if isModifier(key) {
				return fail(key, "needs a value (%s=...)", key)
			}
			return fail("", "unknown modifier %q (known: poll, margin, qos, blkqos, maxcstate, disable, kernel)", m)
		}
		if seen[key] {
			return fail(key, "given twice")
		}
		seen[key] = true
		if gov == GovRecorded {
			return fail(key, "the recorded policy is the kernel's actual choices and takes no modifiers")
		}
		switch key {
		case "poll":
			switch gov {
			case GovOracle:
				return fail(key, "oracle does not poll on a timer; it knows each period's length")
			case GovHaltpoll:
				return fail(key, "haltpoll sets its own poll window (guest_halt_poll_* from the trace)")
			}
			switch strings.ToLower(val) {
			case "first-residency":
				p.Poll = PollFirstResidency
			case "min10us":
				p.Poll = PollMin10us
			case "tick16":
				p.Poll = PollTick16
			default:
				d, err := parseDuration(val)
				if err != nil {
					return fail(key, "%q is not first-residency, min10us, tick16 or a duration (%v)", val, err)
				}
				if d == 0 {
					return fail(key, "a zero poll time would never poll; disable=POLL says that")
				}
				p.Poll, p.PollNs = PollFixed, d
			}
		case "margin":
			if gov != GovMenu {
				return fail(key, "only applies to menu (it changes menu's stopped-tick rule)")
			}
			v, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fail(key, "%q is not a percentage", val)
			}
			if v < 0 || v > 10000 {
				return fail(key, "%q must be between 0 and 10000", val)
			}
			p.HasMargin, p.MarginPct = true, v
		case "qos":
			d, err := parseDuration(val)
			if err != nil {
				return fail(key, "%q is not a duration (%v)", val, err)
			}
			p.QoSNs = d
		case "blkqos":
			l, t, ok := strings.Cut(val, "/")
			if !ok {
				return fail(key, "%q is not LIMIT/TIMEOUT (e.g. 10us/3ms)", val)
			}
			ld, err := parseDuration(l)
			if err != nil {
				return fail(key, "limit %q is not a duration (%v)", l, err)
			}
			td, err := parseDuration(t)
			if err != nil {
				return fail(key, "timeout %q is not a duration (%v)", t, err)
			}
			if td == 0 {
				return fail(key, "timeout must be > 0")
			}
			p.BlkQoSLimitNs, p.BlkQoSTimeoutNs = ld, td
		case "maxcstate":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n >= MaxStates {
				return fail(key, "%q is not a state index between 0 and %d", val, MaxStates-1)
			}
			p.MaxCState = n
		case "disable":
			for _, name := range strings.Split(val, ",") {
				name = strings.TrimSpace(name)
				if name == "" {
					return fail(key, "empty state name in %q", val)
				}
				p.Disable = append(p.Disable, name)
			}
		case "kernel":
			v, err := ParseVersion(val)
			if err != nil {
				return fail(key, "%v", err)
			}
			p.Kernel = &v
		default:
			return fail("", "unknown modifier %q (known: poll, margin, qos, blkqos, maxcstate, disable, kernel)", key)
		}
	}
	return p, nil
}

func isModifier(k string) bool {
	switch k {
	case "poll", "margin", "qos", "blkqos", "maxcstate", "disable", "kernel":
		return true
	}
	return false
}

func govList() string {
	var s []string
	for _, g := range Governors() {
		s = append(s, string(g))
	}
	return strings.Join(s, ", ")
}

// parseDuration accepts Go durations with units ns, us/µs, ms, s ("10us",
// "3ms", "1.5ms") and "0"; negative values are refused.
func parseDuration(s string) (int64, error) {
	if s == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("needs a unit, e.g. %sus", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("use a number with ns, us, ms or s")
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	return int64(d), nil
}
