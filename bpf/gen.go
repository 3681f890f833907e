// Package bpf holds idletrace's eBPF programs (idletrace.bpf.c), the header
// that defines every record shared with Go (idletrace.h), and the bpf2go
// output: the compiled object, embedded, and the generated Go types.
// The generated files are committed; `make generate` rebuilds them and
// `make check-generated` proves they are fresh.
package bpf

//go:generate go tool bpf2go -cc ${BPF_CLANG} -strip ${BPF_STRIP} -target bpfel -go-package bpf -output-stem idletrace Idletrace idletrace.bpf.c -- -I/usr/include/x86_64-linux-gnu -Wall -Werror -mcpu=v3
