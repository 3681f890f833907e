package trace

import (
	"strings"
	"testing"
)

func TestIOFilter(t *testing.T) {
	meta := &Metadata{BlockDevices: []BlockDevice{{Name: "vda", Major: 254, Minor: 0}, {Name: "nvme0n1", Major: 259, Minor: 1}}}
	fio4k := &BlockIO{Dev: 254 << 20, Op: OpRead, Bytes: 4096, Tid: 101, Tgid: 100, Comm: "fio"}
	kw := &BlockIO{Dev: 259<<20 | 1, Op: OpWrite, Bytes: 65536, Tid: 54, Tgid: 54, Comm: "kworker/0:1H"}
	for _, tc := range []struct {
		spec         string
		fio, kworker bool
	}{
		{"", true, true},
		{"comm=fio", true, false},
		{"pid=100", true, false}, // the process
		{"pid=101", true, false}, // the thread
		{"pid=54", false, true},
		{"dev=vda", true, false},
		{"dev=259:1", false, true},
		{"op=write", false, true},
		{"size=4k", true, false},
		{"size=8k-64k", false, true},
		{"size=1-1m,op=read", true, false},
		{"comm=fio,dev=nvme0n1", false, false},
	} {
		f, err := ParseIOFilter(tc.spec, meta)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if f.Match(fio4k) != tc.fio || f.Match(kw) != tc.kworker {
			t.Errorf("%q: fio %v kworker %v, want %v %v", tc.spec, f.Match(fio4k), f.Match(kw), tc.fio, tc.kworker)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"comm", "KEY=VALUE"},
		{"colour=red", `unknown key "colour"`},
		{"pid=x", "not a process id"},
		{"dev=sdz", "it has vda, nvme0n1"},
		{"dev=1:x", "MAJOR:MINOR"},
		{"op=trim", "unknown operation"},
		{"size=64k-4k", "ends before it starts"},
		{"size=lots", "not a size"},
		{"comm=averyveryverylongname", "at most 15"},
		// Parts are ANDed: a key given twice was the last value alone.
		{"op=read,op=write", `IO filter "op=read,op=write": op=write: op given twice (all parts must hold: give one)`},
		{"comm=fio,comm=python3", `comm=python3: comm given twice`},
		{"pid=100,op=read,pid=54", `pid=54: pid given twice`},
		{"dev=vda,dev=nvme0n1", `dev=nvme0n1: dev given twice`},
		{"size=4k,size=8k-64k", `size=8k-64k: size given twice`},
		{"op=read,op=read", `op=read: op given twice`},
	} {
		_, err := ParseIOFilter(tc.spec, meta)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "IO filter ") {
			t.Errorf("%q: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestOpName(t *testing.T) {
	for op, want := range map[uint8]string{OpRead: "read", OpWrite: "write", OpFlush: "flush", OpDiscard: "discard", 9: "write_zeroes", 5: "op5"} {
		if got := OpName(op); got != want {
			t.Errorf("OpName(%d) = %q, want %q", op, got, want)
		}
		if want[:2] != "op" {
			if _, err := ParseIOFilter("op="+want, nil); err != nil {
				t.Errorf("the filter does not take the name OpName gives: %v", err)
			}
		}
	}
}
