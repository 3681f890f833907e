package trace

import (
	"fmt"
	"strconv"
	"strings"
)

// IOFilter selects the block requests an IO figure covers: by the issuing
// process, device, operation and size. The zero value selects every
// request.
type IOFilter struct {
	Spec string // as given, for reports

	comm               string
	pid                uint32 // a process (tgid) or a thread (tid)
	devs               []uint32
	op                 int // -1: any
	minBytes, maxBytes uint32
}

// ioOps are the request operations a filter can name (REQ_OP_*).
var ioOps = map[string]int{"read": OpRead, "write": OpWrite, "flush": OpFlush, "discard": OpDiscard, "write_zeroes": 9}

// OpName is the name of a request operation (REQ_OP_*) as a filter spells
// it (read, write, flush, discard, write_zeroes), else "op" and its number.
func OpName(op uint8) string {
	for name, v := range ioOps {
		if v == int(op) {
			return name
		}
	}
	return "op" + strconv.Itoa(int(op))
}

// IOFilterHelp says how a filter is written.
const IOFilterHelp = "comm=NAME, pid=N (process or thread), dev=NAME|MAJ:MIN, op=read|write|flush|discard|write_zeroes, size=N[k|m] or N-M; comma-separated, all must hold (e.g. comm=fio,op=read,size=4k)"

// ParseIOFilter reads a filter such as "comm=fio,op=read,size=4k-64k".
// Device names are those the trace's metadata lists.
func ParseIOFilter(spec string, meta *Metadata) (IOFilter, error) {
	f := IOFilter{Spec: spec, op: -1, maxBytes: ^uint32(0)}
	if strings.TrimSpace(spec) == "" {
		return IOFilter{op: -1, maxBytes: ^uint32(0)}, nil
	}
	fail := func(part, format string, a ...any) (IOFilter, error) {
		return IOFilter{}, fmt.Errorf("IO filter %q: %s: %s", spec, part, fmt.Sprintf(format, a...))
	}
	// Every key takes one value (dev= names one device) and the parts are
	// ANDed, so a repeat would either select nothing or, as each part
	// overwrote the last, silently drop all but the last value.
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return fail(part, "want KEY=VALUE (%s)", IOFilterHelp)
		}
		if seen[k] {
			return fail(part, "%s given twice (all parts must hold: give one)", k)
		}
		seen[k] = true
		switch k {
		case "comm":
			if len(v) > 15 {
				return fail(part, "task names are at most 15 characters (TASK_COMM_LEN)")
			}
			f.comm = v
		case "pid":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return fail(part, "not a process id")
			}
			f.pid = uint32(n)
		case "dev":
			devs, err := devicesNamed(v, meta)
			if err != nil {
				return fail(part, "%v", err)
			}
			f.devs = devs
		case "op":
			op, ok := ioOps[v]
			if !ok {
				return fail(part, "unknown operation (read, write, flush, discard, write_zeroes)")
			}
			f.op = op
		case "size":
			lo, hi, cut := strings.Cut(v, "-")
			a, err := parseBytes(lo)
			if err != nil {
				return fail(part, "%v", err)
			}
			b := a
			if cut {
				if b, err = parseBytes(hi); err != nil {
					return fail(part, "%v", err)
				}
			}
			if b < a {
				return fail(part, "the range ends before it starts")
			}
			f.minBytes, f.maxBytes = a, b
		default:
			return fail(part, "unknown key %q (%s)", k, IOFilterHelp)
		}
	}
	return f, nil
}

func parseBytes(s string) (uint32, error) {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n*mult > 1<<32-1 {
		return 0, fmt.Errorf("%q is not a size in bytes (N, Nk or Nm)", s)
	}
	return uint32(n * mult), nil
}

// devicesNamed resolves a device name (as /sys/block lists it) or MAJ:MIN.
func devicesNamed(v string, meta *Metadata) ([]uint32, error) {
	if maj, min, ok := strings.Cut(v, ":"); ok {
		a, err1 := strconv.ParseUint(maj, 10, 12)
		b, err2 := strconv.ParseUint(min, 10, 20)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not MAJOR:MINOR", v)
		}
		return []uint32{uint32(a)<<20 | uint32(b)}, nil
	}
	var names []string
	if meta != nil {
		for _, d := range meta.BlockDevices {
			if d.Name == v {
				return []uint32{d.Dev()}, nil
			}
			names = append(names, d.Name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no device %q: the trace lists no block devices (use MAJOR:MINOR)", v)
	}
	return nil, fmt.Errorf("no device %q in the trace (it has %s)", v, strings.Join(names, ", "))
}

// Empty says whether the filter selects every request.
func (f *IOFilter) Empty() bool { return f.Spec == "" }

// Match says whether the filter selects b.
func (f *IOFilter) Match(b *BlockIO) bool {
	if f.Spec == "" {
		return true
	}
	if f.comm != "" && b.Comm != f.comm ||
		f.pid != 0 && b.Tgid != f.pid && b.Tid != f.pid ||
		f.op >= 0 && int(b.Op) != f.op ||
		b.Bytes < f.minBytes || b.Bytes > f.maxBytes {
		return false
	}
	if len(f.devs) > 0 {
		for _, d := range f.devs {
			if b.Dev == d {
				return true
			}
		}
		return false
	}
	return true
}

// NeedsTask says whether the filter selects by process, which traces
// recorded before the task was recorded cannot answer.
func (f *IOFilter) NeedsTask() bool { return f.comm != "" || f.pid != 0 }
