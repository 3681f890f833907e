package analysis

import (
	"fmt"

	"github.com/idletrace/idletrace/pkg/trace"
)

// SleepLengthCheck holds each idle period's sleep length (NextTimerNs, what
// tick_nohz_get_sleep_length gave the governor) to the clock event
// device's programmed next event (NextEventNs): the device fires at the
// earliest timer, the tick included, so the earliest timer were the tick
// stopped is never before it. A recording whose sleep lengths lie before
// it misread the kernel's timers: idletrace before 2026-12-07 read every
// sleep length where the hrtimer opens a timerqueue_linked_node (Linux 7.2
// and 7.3: Debian's 7.2.12 headers and 7.3.4 source; 7.1 not checked) as a
// kernel pointer, some 35 hours in the past. menu and teo decide on
// the sleep length, so their replays on such a trace are wrong.
type SleepLengthCheck struct {
	Known, BeforeEvent uint64
	// WorstNs is the most negative NextTimerNs − NextEventNs (0: none).
	WorstNs int64
}

// SleepLengthSlackNs: a device may be programmed a little after the timer
// it serves (its minimum delta); 10 µs is several of them, under TCG too.
const SleepLengthSlackNs = 10_000

// Add counts p where it has both readings.
func (c *SleepLengthCheck) Add(p *trace.IdlePeriod) {
	if !p.NextTimerKnown || !p.NextEventKnown {
		return
	}
	c.Known++
	d := p.NextTimerNs - p.NextEventNs
	if d < -SleepLengthSlackNs {
		c.BeforeEvent++
	}
	c.WorstNs = min(c.WorstNs, d)
}

// Misread says whether more than 1 % of the sleep lengths lie before the
// next event (none did on any kernel the recorder is tested on).
func (c *SleepLengthCheck) Misread() bool { return c.BeforeEvent*100 > c.Known }

// Note is what a report says about a misread recording, "" for a sound one.
func (c *SleepLengthCheck) Note() string {
	if !c.Misread() {
		return ""
	}
	return fmt.Sprintf("%d of %d idle periods have a sleep length (next timer) over %d µs before the clock event device's next event (worst %.3f s): the recorder misread this kernel's timers (idletrace before 2026-12-07 on Linux 7.2 and later); menu's and teo's replays decide on the sleep length and are wrong here: record again with this release",
		c.BeforeEvent, c.Known, SleepLengthSlackNs/1000, float64(c.WorstNs)/1e9)
}
