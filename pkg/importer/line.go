package importer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// event is one parsed event line: where and when it ran, its name (without
// the category perf script puts before it) and its fields, the text after
// the name.
type event struct {
	cpu    uint32
	ns     uint64
	pid    int64 // the task's pid from the leading columns, -1 unknown
	name   string
	fields string
}

// errNotEvent is a line without the shape of an event line.
var errNotEvent = errors.New("not an event line (no \"[CPU] SECS.FRACTION: EVENT:\")")

// parseLine reads an event line by what it holds, not by column position:
// the event is the first token `NAME:` or `CATEGORY:NAME:` right after a
// timestamp token `SECS.FRACTION:`, and the CPU is the last `[NNN]`
// before that timestamp. What comes before the CPU is the task (perf
// script: `comm pid`; trace-cmd report and tracefs: `comm-pid`), and
// tracefs puts a flags column between the CPU and the timestamp.
func parseLine(line string) (event, error) {
	ev := event{pid: -1}
	// Walk the tokens, remembering the last [NNN] seen and the task's pid
	// in the token before it.
	cpuAt := -1 // where the CPU token starts
	lastTokStart, lastTokEnd := -1, -1
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= len(line) {
			break
		}
		start := i
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		tok := line[start:i]
		if cpu, ok := bracketNumber(tok); ok {
			ev.cpu, cpuAt = cpu, start
			ev.pid = pidOf(line, lastTokStart, lastTokEnd)
		} else if cpuAt >= 0 && len(tok) > 1 && tok[len(tok)-1] == ':' {
			if ns, ok := parseTimestamp(tok[:len(tok)-1]); ok {
				// The event's name follows.
				j := i
				for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
					j++
				}
				k := j
				for k < len(line) && line[k] != ' ' && line[k] != '\t' {
					k++
				}
				name, ok := eventName(line[j:k])
				if !ok {
					return ev, errNotEvent
				}
				ev.ns, ev.name = ns, name
				ev.fields = strings.TrimSpace(line[k:])
				return ev, nil
			}
		}
		lastTokStart, lastTokEnd = start, i
	}
	return ev, errNotEvent
}

// bracketNumber reads "[NNN]".
func bracketNumber(tok string) (uint32, bool) {
	if len(tok) < 3 || tok[0] != '[' || tok[len(tok)-1] != ']' {
		return 0, false
	}
	n, err := strconv.ParseUint(tok[1:len(tok)-1], 10, 32)
	return uint32(n), err == nil
}

// pidOf reads the task's pid from the token before the CPU: "comm-PID"
// (trace-cmd, tracefs) or "PID" alone (perf script's "comm PID").
func pidOf(line string, start, end int) int64 {
	if start < 0 {
		return -1
	}
	tok := line[start:end]
	if k := strings.LastIndexByte(tok, '-'); k >= 0 {
		tok = tok[k+1:]
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// parseTimestamp reads SECS.FRACTION into nanoseconds (microseconds, as
// the kernel and perf script print by default, or nanoseconds, as perf
// script --ns and idletrace export print; more digits are cut).
func parseTimestamp(s string) (uint64, bool) {
	dot := strings.IndexByte(s, '.')
	if dot <= 0 || dot == len(s)-1 {
		return 0, false
	}
	secs, err := strconv.ParseUint(s[:dot], 10, 64)
	if err != nil || secs > 1<<33 {
		return 0, false
	}
	frac := s[dot+1:]
	var ns uint64
	for d := 0; d < 9; d++ {
		ns *= 10
		if d < len(frac) {
			c := frac[d]
			if c < '0' || c > '9' {
				return 0, false
			}
			ns += uint64(c - '0')
		}
	}
	for _, c := range []byte(frac[min(len(frac), 9):]) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	return secs*1e9 + ns, true
}

// eventName reads "name:" or "category:name:".
func eventName(tok string) (string, bool) {
	if len(tok) < 2 || tok[len(tok)-1] != ':' {
		return "", false
	}
	tok = tok[:len(tok)-1]
	if k := strings.IndexByte(tok, ':'); k >= 0 {
		if !isIdent(tok[:k]) {
			return "", false
		}
		tok = tok[k+1:]
	}
	return tok, isIdent(tok)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// field finds key=value among space-separated fields.
func field(fields, key string) (string, bool) {
	for len(fields) > 0 {
		var f string
		if k := strings.IndexAny(fields, " \t"); k >= 0 {
			f, fields = fields[:k], strings.TrimLeft(fields[k+1:], " \t")
		} else {
			f, fields = fields, ""
		}
		if len(f) > len(key) && f[len(key)] == '=' && f[:len(key)] == key {
			return f[len(key)+1:], true
		}
	}
	return "", false
}

// uintField reads key=N.
func uintField(fields, key string) (uint64, error) {
	v, ok := field(fields, key)
	if !ok {
		return 0, fmt.Errorf("no %s= field", key)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a number", key, v)
	}
	return n, nil
}

// cpuIdle reads cpu_idle's "state=N cpu_id=M".
func cpuIdle(fields string) (state, cpu uint64, err error) {
	if state, err = uintField(fields, "state"); err != nil {
		return 0, 0, err
	}
	if cpu, err = uintField(fields, "cpu_id"); err != nil {
		return 0, 0, err
	}
	return state, cpu, nil
}
