package importer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/idletrace/idletrace/pkg/trace"
)

// blockRq is one block_rq_issue or block_rq_complete line's fields, in
// include/trace/events/block.h's forms (block_rq and block_rq_completion):
//
//	issue:    "%d,%d %s %u (%s) %llu + %u [%s]"            (dev, rwbs, bytes, cmd, sector, sectors, comm)
//	          "%d,%d %s %u (%s) %llu + %u %s,%u,%u [%s]"   (the I/O priority's class,level,hint before comm, 6.10 on)
//	complete: "%d,%d %s (%s) %llu + %u [%d]"                (errno last)
//	          "%d,%d %s (%s) %llu + %u %s,%u,%u [%d]"
//
// The I/O priority is read past, not kept (the trace has no field for it).
type blockRq struct {
	dev      uint32 // major<<20 | minor
	cmdFlags uint32
	bytes    uint32
	sector   uint64
	sectors  uint32
	last     string // the bracketed last field: comm (issue) or errno (complete)
}

func parseBlockRq(fields string, issue bool) (blockRq, error) {
	var b blockRq
	s := fields
	tok := func() string {
		s = strings.TrimLeft(s, " \t")
		k := strings.IndexAny(s, " \t")
		if k < 0 {
			t := s
			s = ""
			return t
		}
		t := s[:k]
		s = s[k:]
		return t
	}
	dev := tok()
	comma := strings.IndexByte(dev, ',')
	if comma < 0 {
		return b, fmt.Errorf("device %q is not MAJOR,MINOR", dev)
	}
	maj, err1 := strconv.ParseUint(dev[:comma], 10, 12)
	minr, err2 := strconv.ParseUint(dev[comma+1:], 10, 20)
	if err1 != nil || err2 != nil {
		return b, fmt.Errorf("device %q is not MAJOR,MINOR", dev)
	}
	b.dev = uint32(maj)<<20 | uint32(minr)
	rwbs := tok()
	flags, ok := parseRWBS(rwbs)
	if !ok {
		return b, fmt.Errorf("rwbs %q is not blk_fill_rwbs' form", rwbs)
	}
	b.cmdFlags = flags
	if issue {
		t := tok()
		n, err := strconv.ParseUint(t, 10, 32)
		if err != nil {
			return b, fmt.Errorf("bytes %q is not a number", t)
		}
		b.bytes = uint32(n)
	}
	// The command, in parentheses, may hold spaces (a passthrough
	// request's bytes).
	s = strings.TrimLeft(s, " \t")
	if !strings.HasPrefix(s, "(") {
		return b, fmt.Errorf("no (command) after the rwbs")
	}
	end := strings.IndexByte(s, ')')
	if end < 0 {
		return b, fmt.Errorf("unclosed (command)")
	}
	s = s[end+1:]
	t := tok()
	sector, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return b, fmt.Errorf("sector %q is not a number", t)
	}
	b.sector = sector
	if t = tok(); t != "+" {
		return b, fmt.Errorf("no \"+ SECTORS\" after the sector")
	}
	t = tok()
	n, err := strconv.ParseUint(t, 10, 32)
	if err != nil {
		return b, fmt.Errorf("sectors %q is not a number", t)
	}
	b.sectors = uint32(n)
	// Then the I/O priority (class,level,hint) where the kernel prints
	// it, and the bracketed last field.
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '[')
	if open < 0 || !strings.HasSuffix(s, "]") {
		return b, fmt.Errorf("no [%s] at the end", map[bool]string{true: "comm", false: "errno"}[issue])
	}
	if prio := strings.TrimSpace(s[:open]); prio != "" && strings.Count(prio, ",") != 2 {
		return b, fmt.Errorf("%q before the last field is not an I/O priority (class,level,hint)", prio)
	}
	b.last = s[open+1 : len(s)-1]
	if !issue {
		if _, err := strconv.ParseInt(b.last, 10, 32); err != nil {
			return b, fmt.Errorf("errno %q is not a number", b.last)
		}
	}
	return b, nil
}

// reqOpOther stands for an operation rwbs does not name.
const reqOpOther = 0xff

// parseRWBS turns blk_fill_rwbs' spelling back into cmd_flags: F for a
// preflush, the operation (R, W, D, DE, F; N for any other, kept as an
// unknown op), then F FUA, A read-ahead, S sync, M metadata.
func parseRWBS(s string) (uint32, bool) {
	var f uint32
	if strings.HasPrefix(s, "F") && len(s) > 1 && strings.ContainsAny(s[1:2], "RWDFN") {
		f |= trace.ReqPreflush
		s = s[1:]
	}
	switch {
	case strings.HasPrefix(s, "DE"):
		f |= trace.OpSecureErase
		s = s[2:]
	case strings.HasPrefix(s, "R"):
		f |= trace.OpRead
		s = s[1:]
	case strings.HasPrefix(s, "W"):
		f |= trace.OpWrite
		s = s[1:]
	case strings.HasPrefix(s, "D"):
		f |= trace.OpDiscard
		s = s[1:]
	case strings.HasPrefix(s, "F"):
		f |= trace.OpFlush
		s = s[1:]
	case strings.HasPrefix(s, "N"):
		f |= reqOpOther
		s = s[1:]
	default:
		return 0, false
	}
	for _, c := range []byte(s) {
		switch c {
		case 'F':
			f |= trace.ReqFUA
		case 'A':
			f |= trace.ReqRahead
		case 'S':
			f |= trace.ReqSync
		case 'M':
			f |= trace.ReqMeta
		default:
			return 0, false
		}
	}
	return f, true
}
