package model

import (
	"fmt"
	"math"
	"regexp"
	"slices"
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

// GovernorInfo is one governor as whatif --help lists it.
type GovernorInfo struct {
	Name    Governor
	Meaning string // one line
}

// governorTable is the governors ParsePolicy knows, in a stable order.
var governorTable = []GovernorInfo{
	{GovRecorded, "the kernel's actual choices, as recorded (recorded profile only; takes no modifiers)"},
	{GovMenu, "the menu governor: predicts the idle time from the next timer and recent stays"},
	{GovTEO, "the timer events oriented governor: the next timer, corrected by recent early wake-ups"},
	{GovLadder, "the ladder governor: steps one state deeper or shallower at a time"},
	{GovHaltpoll, "the haltpoll governor of KVM guests: polls for a window it grows and shrinks, then halts"},
	{GovOracle, "the least-energy state for each idle episode knowing its recorded length: a lower bound on energy (not on latency), not a governor"},
}

// GovernorTable lists the governors with their meanings.
func GovernorTable() []GovernorInfo { return append([]GovernorInfo(nil), governorTable...) }

// Governors lists the governor models in a stable order.
func Governors() []Governor {
	g := make([]Governor, len(governorTable))
	for i, gi := range governorTable {
		g[i] = gi.Name
	}
	return g
}

// PollRule says how long a polling state may spin before the cpuidle core
// ends it (dev->poll_limit_ns, drivers/cpuidle/cpuidle.c cpuidle_poll_time).
type PollRule int

// minPollNs is the shortest poll limit the replay models: a policy's
// fixed one, or a profile's first target residency under the
// first-residency rule.
const minPollNs = 1000

const (
	// PollKernel: the rule of the kernel release the policy models.
	PollKernel PollRule = iota
	// PollFirstResidency: target residency of the first enabled state
	// after POLL, TICK_NSEC if none (36fcb4292473, Linux 5.5–5.10 and
	// 5.4.y; 5.4.0's poll_limit_ns took the deepest state, 259231a04561).
	PollFirstResidency
	// PollMin10us: the first enabled state with target residency ≥ 10 µs,
	// capped at TICK_NSEC/16, which is also the default (7a25759eaa04,
	// Linux 5.11 and later).
	PollMin10us
	// PollTick16: always TICK_NSEC/16 (a37b969a61c1, Linux 4.17–5.3).
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
var NewestVersion = Version{7, 3, -1}

// OldestModelled and LatestModelled bound kernel=: the first release of the
// oldest rule modelled (the poll limit's CPUIDLE_POLL_MAX, 4.17, in
// kernelPollRule) and the newest release whose governors were read against
// the models: 7.3 (Debian's 7.3.4 source, whose drivers/cpuidle is 7.1's
// but for comments: the newest changes modelled are 7.1's, menu's
// e57c2bf2e89d and teo's 106a2662e655). Outside them the models would
// answer for a kernel they do not know.
var (
	OldestModelled = Version{4, 17, -1}
	LatestModelled = Version{7, 3, -1}
)

// StableDiffers says whether release v, given without a patch level or as
// N.M.0 (kernel=6.12, or Debian's uname -r 6.12.0-ABI: mainline 6.12.0),
// models governor g otherwise than
// the later stable releases of its series do: 6.12.y and 6.1.y took later
// menu changes, 6.12.y and 6.18.y one of teo's (menuFlagsFor,
// teo612ShallowerAlways, teoShallowerAlways).
func StableDiffers(g Governor, v Version) bool {
	if v.Patch > 0 {
		return false
	}
	latest := Version{v.Major, v.Minor, 1 << 20}
	switch g {
	case GovMenu:
		return menuFlagsFor(v) != menuFlagsFor(latest)
	case GovTEO:
		return teoForm612(v) && teo612ShallowerAlways(v) != teo612ShallowerAlways(latest) ||
			!teoForm612(v) && !v.AtLeast(6, 19) && teoShallowerAlways(v) != teoShallowerAlways(latest)
	}
	return false
}

// firstRelease is the first mainline release of the governors younger than
// OldestModelled: teo came with b26bf6ab716f (5.1), haltpoll with
// 2cffe9f6b96f (5.4). menu and ladder are older than OldestModelled, oracle
// and recorded are no kernel's.
var firstRelease = map[Governor]Version{
	GovTEO:      {5, 1, -1},
	GovHaltpoll: {5, 4, -1},
}

// lastMinor is each closed series' last mainline release (4.20, 5.19,
// 6.19), for kernel= to refuse a release that never was.
var lastMinor = map[int]int{4: 20, 5: 19, 6: 19}

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
	// Enable turns states on that the recorded table had disabled.
	Enable []string
	// Kernel selects the governor variant; nil: the recorded kernel's, else
	// NewestVersion.
	Kernel *Version
	// HaltPoll overrides haltpoll's module parameters; a nil field keeps
	// the trace's value, else the module's compiled default.
	HaltPoll HaltPollOverrides
}

// HaltPollOverrides are haltpoll's module parameters as the guest_halt_poll_*
// modifiers set them. In drivers/cpuidle/governors/haltpoll.c all four
// numbers are unsigned int (the two times in ns) and allow_shrink is a bool.
type HaltPollOverrides struct {
	GuestHaltPollNs, Grow, Shrink, GrowStart *uint64
	AllowShrink                              *bool
}

// String is the spec as given.
func (p Policy) String() string { return p.Spec }

// StateWanted says how the policy wants the state named name, index idx,
// of a running table: off (disable=, or past maxcstate=), on (enable=), or
// neither (as the machine has it). Names match case-insensitively, as
// the policy's parser takes them.
func (p Policy) StateWanted(name string, idx int) (off, on bool) {
	fold := func(n string) bool { return strings.EqualFold(n, name) }
	off = slices.ContainsFunc(p.Disable, fold) || p.MaxCState >= 0 && idx > p.MaxCState
	return off, slices.ContainsFunc(p.Enable, fold)
}

// Modifier is one policy modifier. ParsePolicy takes only the modifiers of
// modifierTable and whatif --help lists them from it, so the two cannot
// drift.
type Modifier struct {
	Name    string // before the '='
	Value   string // what may follow the '='
	Meaning string // one line
	Example string // a whole policy spec that parses
	// refuse says why the modifier does not apply to a governor; "" when
	// it does. nil: it applies to every governor but recorded.
	refuse func(Governor) string
	// set parses the value into p; its error names the value.
	set func(p *Policy, val string) error
}

// AppliesTo lists the governors the modifier applies to.
func (m Modifier) AppliesTo() []Governor {
	var gs []Governor
	for _, g := range Governors() {
		if g != GovRecorded && (m.refuse == nil || m.refuse(g) == "") {
			gs = append(gs, g)
		}
	}
	return gs
}

// Modifiers lists every policy modifier in the order whatif --help shows.
func Modifiers() []Modifier { return append([]Modifier(nil), modifierTable...) }

func onlyHaltpoll(g Governor) string {
	if g != GovHaltpoll {
		return "is one of haltpoll's module parameters (guest_halt_poll_*) and applies to the haltpoll governor only"
	}
	return ""
}

var modifierTable = []Modifier{
	{
		Name: "poll", Value: "first-residency|min10us|tick16|DURATION",
		Meaning: "how long POLL may spin: the 5.4-5.10 rule, the 5.11+ rule, the 4.17-5.3 rule (TICK_NSEC/16), or a fixed time",
		Example: "menu+poll=50us",
		refuse: func(g Governor) string {
			switch g {
			case GovOracle:
				return "oracle does not poll on a timer; it knows each period's length"
			case GovHaltpoll:
				return "haltpoll sets its own poll window (use guest_halt_poll_ns= and the other guest_halt_poll_* modifiers)"
			}
			return ""
		},
		set: func(p *Policy, val string) error {
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
					return fmt.Errorf("%q is not first-residency, min10us, tick16 or a duration (%v)", val, err)
				}
				if d == 0 {
					return fmt.Errorf("a zero poll time would never poll; disable=POLL says that")
				}
				// poll_idle() reads the clock once per
				// POLL_IDLE_RELAX_COUNT (200) cpu_relax() loops
				// (drivers/cpuidle/poll_state.c, v6.18): from under a
				// µs to some 10 µs by CPU. Shorter limits are not
				// modelled: a replay re-selecting every few ns of a
				// long period would take hours.
				if d < minPollNs {
					return fmt.Errorf("%s is below 1us: poll_idle() reads the clock only once per 200 cpu_relax() loops (under a µs to some 10 µs by CPU), and shorter limits are not modelled", val)
				}
				p.Poll, p.PollNs = PollFixed, d
			}
			return nil
		},
	},
	{
		Name: "margin", Value: "PCT",
		Meaning: "with the tick stopped and a short prediction, menu uses min(prediction x (1+PCT/100), next timer) instead of the next timer",
		Example: "menu+margin=25",
		refuse: func(g Governor) string {
			if g != GovMenu {
				return "only applies to menu (it changes menu's stopped-tick rule)"
			}
			return ""
		},
		set: func(p *Policy, val string) error {
			v, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%q is not a percentage", val)
			}
			if v < 0 || v > 10000 {
				return fmt.Errorf("%q must be between 0 and 10000", val)
			}
			p.HasMargin, p.MarginPct = true, v
			return nil
		},
	},
	{
		Name: "qos", Value: "DURATION",
		Meaning: "a global latency limit, as written to /dev/cpu_dma_latency",
		Example: "teo+qos=20us",
		set: func(p *Policy, val string) error {
			d, err := parseDuration(val)
			if err != nil {
				return fmt.Errorf("%q is not a duration (%v)", val, err)
			}
			// The limit any kernel can hold: an s32 of microseconds.
			if d%1000 != 0 {
				return fmt.Errorf("%q: /dev/cpu_dma_latency takes whole microseconds", val)
			}
			if d/1000 > math.MaxInt32 {
				return fmt.Errorf("%q: above the %d µs /dev/cpu_dma_latency holds", val, math.MaxInt32)
			}
			p.QoSNs = d
			return nil
		},
	},
	{
		Name: "blkqos", Value: "LIMIT/TIMEOUT",
		Meaning: "a latency limit of LIMIT on a CPU for TIMEOUT after it issues block IO",
		Example: "menu+blkqos=10us/3ms",
		set: func(p *Policy, val string) error {
			l, t, ok := strings.Cut(val, "/")
			if !ok {
				return fmt.Errorf("%q is not LIMIT/TIMEOUT (e.g. 10us/3ms)", val)
			}
			ld, err := parseDuration(l)
			if err != nil {
				return fmt.Errorf("limit %q is not a duration (%v)", l, err)
			}
			td, err := parseDuration(t)
			if err != nil {
				return fmt.Errorf("timeout %q is not a duration (%v)", t, err)
			}
			if td == 0 {
				return fmt.Errorf("timeout must be > 0")
			}
			if ld > td {
				return fmt.Errorf("the limit %s is longer than its timeout %s: LIMIT/TIMEOUT is the latency limit, then how long it holds after an issue (e.g. %s/%s)", l, t, t, l)
			}
			p.BlkQoSLimitNs, p.BlkQoSTimeoutNs = ld, td
			return nil
		},
	},
	{
		Name: "maxcstate", Value: "N",
		Meaning: "disable the states deeper than index N (intel_idle.max_cstate, with POLL at index 0); N beyond the profile's deepest index is refused",
		Example: "ladder+maxcstate=1",
		set: func(p *Policy, val string) error {
			// The profile's table bounds it, when the replay has one: a
			// bound here would name a limit the user's table does not have.
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a state index (a whole number, 0 for POLL)", val)
			}
			p.MaxCState = n
			return nil
		},
	},
	{
		Name: "disable", Value: "NAME[,NAME]...",
		Meaning: "disable these states by name, as writing 1 to their sysfs disable files",
		Example: "menu+disable=C6,C1E",
		set:     func(p *Policy, val string) error { return appendStateNames(&p.Disable, val) },
	},
	{
		Name: "enable", Value: "NAME[,NAME]...",
		Meaning: "enable these states by name, as writing 0 to their sysfs disable files (undoes a disable the trace recorded)",
		Example: "menu+enable=C6",
		set:     func(p *Policy, val string) error { return appendStateNames(&p.Enable, val) },
	},
	{
		Name: "kernel", Value: "VERSION",
		Meaning: "the governor as that kernel release has it, " + OldestModelled.String() + " to " + LatestModelled.String() + " (teo from 5.1: before 6.3 as 6.1's, 6.3–6.10 as 6.11's, noted; haltpoll from 5.4; default: the recorded kernel's, else " + NewestVersion.String() + ")",
		Example: "menu+kernel=6.12",
		refuse: func(g Governor) string {
			if g == GovOracle {
				return "oracle is no release's governor; it knows each period's length"
			}
			return ""
		},
		set: func(p *Policy, val string) error {
			v, err := ParseVersion(val)
			if err != nil {
				return err
			}
			if !v.AtLeast(OldestModelled.Major, OldestModelled.Minor) || v.AtLeast(LatestModelled.Major, LatestModelled.Minor+1) {
				return fmt.Errorf("%q is outside the releases modelled, %s to %s (the oldest with a modelled rule, and the newest whose governors were read against the models)", val, OldestModelled, LatestModelled)
			}
			if last, ok := lastMinor[v.Major]; ok && v.Minor > last {
				return fmt.Errorf("%q is no Linux release: %d.%d was the last of the %d series", val, v.Major, last, v.Major)
			}
			// A release without the governor has no form of it to model.
			// Only kernel= is held to this: a trace's own older release
			// (the default) still replays the oldest form modelled, since
			// asking what teo would have done there is a fair what-if.
			if first, ok := firstRelease[p.Governor]; ok && !v.AtLeast(first.Major, first.Minor) {
				return fmt.Errorf("%s first appeared in Linux %s", p.Governor, first)
			}
			p.Kernel = &v
			return nil
		},
	},
	{
		Name: "guest_halt_poll_ns", Value: "DURATION",
		Meaning: "haltpoll's largest poll window; halts within it grow the window, longer ones shrink it (default: the trace's, else 200us; 0: no polling)",
		Example: "haltpoll+guest_halt_poll_ns=400us",
		refuse:  onlyHaltpoll,
		set: func(p *Policy, val string) error {
			return setHaltpollNs(&p.HaltPoll.GuestHaltPollNs, val)
		},
	},
	{
		Name: "guest_halt_poll_grow", Value: "N",
		Meaning: "the factor haltpoll's window grows by (default: the trace's, else 2; 0: straight to grow_start)",
		Example: "haltpoll+guest_halt_poll_grow=4",
		refuse:  onlyHaltpoll,
		set: func(p *Policy, val string) error {
			return setHaltpollUint(&p.HaltPoll.Grow, val)
		},
	},
	{
		Name: "guest_halt_poll_shrink", Value: "N",
		Meaning: "the divisor haltpoll's window shrinks by (default: the trace's, else 2; 0: straight to 0)",
		Example: "haltpoll+guest_halt_poll_shrink=4",
		refuse:  onlyHaltpoll,
		set: func(p *Policy, val string) error {
			return setHaltpollUint(&p.HaltPoll.Shrink, val)
		},
	},
	{
		Name: "guest_halt_poll_grow_start", Value: "DURATION",
		Meaning: "the window a grow from 0 starts at; since 6.9 a shrink below it drops the window to 0 (default: the trace's, else 50us)",
		Example: "haltpoll+guest_halt_poll_grow_start=20us",
		refuse:  onlyHaltpoll,
		set: func(p *Policy, val string) error {
			return setHaltpollNs(&p.HaltPoll.GrowStart, val)
		},
	},
	{
		Name: "guest_halt_poll_allow_shrink", Value: "Y|N|1|0|true|false",
		Meaning: "whether a halt longer than guest_halt_poll_ns shrinks haltpoll's window (default: the trace's, else Y)",
		Example: "haltpoll+guest_halt_poll_allow_shrink=N",
		refuse:  onlyHaltpoll,
		set: func(p *Policy, val string) error {
			var b bool
			switch strings.ToLower(val) {
			case "y", "1", "true":
				b = true
			case "n", "0", "false":
			default:
				return fmt.Errorf("%q is not Y, N, 1, 0, true or false", val)
			}
			p.HaltPoll.AllowShrink = &b
			return nil
		},
	},
}

// setHaltpollNs parses one of haltpoll's times: an unsigned int of ns in
// the kernel, given here as a duration.
// appendStateNames appends the comma-separated state names of val.
func appendStateNames(dst *[]string, val string) error {
	for _, name := range strings.Split(val, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return fmt.Errorf("empty state name in %q", val)
		}
		*dst = append(*dst, name)
	}
	return nil
}

func setHaltpollNs(dst **uint64, val string) error {
	if _, err := strconv.ParseUint(val, 10, 64); err == nil && val != "0" {
		return fmt.Errorf("%q needs a unit: the module parameter is in ns, so %sns", val, val)
	}
	d, err := parseDuration(val)
	if err != nil {
		return fmt.Errorf("%q is not a duration (%v)", val, err)
	}
	if d > math.MaxUint32 {
		return fmt.Errorf("%q is above %dns, the most the module parameter (an unsigned int) holds", val, uint64(math.MaxUint32))
	}
	v := uint64(d)
	*dst = &v
	return nil
}

// setHaltpollUint parses one of haltpoll's factors, an unsigned int.
func setHaltpollUint(dst **uint64, val string) error {
	v, err := strconv.ParseUint(val, 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not an unsigned int (0 to %d)", val, uint64(math.MaxUint32))
	}
	*dst = &v
	return nil
}

func lookupModifier(name string) (Modifier, bool) {
	for _, m := range modifierTable {
		if m.Name == name {
			return m, true
		}
	}
	return Modifier{}, false
}

func modList() string {
	s := make([]string, len(modifierTable))
	for i, m := range modifierTable {
		s[i] = m.Name
	}
	return strings.Join(s, ", ")
}

// ParsePolicy parses GOVERNOR[+MODIFIER]... (see docs/DESIGN.md, "Policies";
// the modifiers are modifierTable's). Errors are one-line *PolicyError
// naming the bad part:
// `policy "menu+margin=x": margin: "x" is not a percentage`.
func ParsePolicy(spec string) (Policy, error) {
	p := Policy{Spec: spec, QoSNs: -1, BlkQoSLimitNs: -1, MaxCState: -1}
	fail := func(part, format string, a ...any) (Policy, error) {
		if part == "" {
			return Policy{}, policyErrorf("policy %q: %s", spec, fmt.Sprintf(format, a...))
		}
		return Policy{}, policyErrorf("policy %q: %s: %s", spec, part, fmt.Sprintf(format, a...))
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
		mod, ok := lookupModifier(key)
		if !ok {
			return fail("", "unknown modifier %q (known: %s)", key, modList())
		}
		if !hasVal || val == "" {
			return fail(key, "needs a value (%s=%s)", key, mod.Value)
		}
		if seen[key] {
			return fail(key, "given twice")
		}
		seen[key] = true
		if gov == GovRecorded {
			return fail(key, "the recorded policy is the kernel's actual choices and takes no modifiers")
		}
		if mod.refuse != nil {
			if why := mod.refuse(gov); why != "" {
				return fail(key, "%s", why)
			}
		}
		if err := mod.set(&p, val); err != nil {
			return fail(key, "%v", err)
		}
	}
	return p, nil
}

// PolicyHelp is the policy syntax, the governors and every modifier with
// its meaning and an example, as whatif --help prints it.
func PolicyHelp() string {
	var b strings.Builder
	b.WriteString("Policies: --policy GOVERNOR[+MODIFIER]... (repeatable)\n\nGovernors:\n")
	for _, g := range governorTable {
		fmt.Fprintf(&b, "  %-10s %s\n", g.Name, g.Meaning)
	}
	b.WriteString("\nModifiers (NAME=VALUE, joined to the governor with '+'; DURATION as 10us, 3ms, 200000ns or 0):\n")
	for _, m := range modifierTable {
		var gs []string
		for _, g := range m.AppliesTo() {
			gs = append(gs, string(g))
		}
		applies := "all but recorded"
		if len(gs) < len(governorTable)-1 {
			applies = strings.Join(gs, ", ")
		}
		fmt.Fprintf(&b, "  %s=%s  (%s)\n      %s\n      e.g. --policy %s\n", m.Name, m.Value, applies, m.Meaning, m.Example)
	}
	return b.String()
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
