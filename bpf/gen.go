// Package bpf holds idletrace's eBPF programs (idletrace.bpf.c), the header
// that defines every record shared with Go (idletrace.h), and the bpf2go
// output: the compiled object, embedded, and the generated Go types.
// The generated files are committed; `make generate` rebuilds them and
// `make check-generated` proves they are fresh. Every type of idletrace.h
// is named with -type: the header's types are the contract, so a new one
// is added there and here.
package bpf

//go:generate go tool bpf2go -cc ${BPF_CLANG} -strip ${BPF_STRIP} -target bpfel -type record_type -type wake_cause -type idle_flags -type kernel_flags -type loop_flags -type idle_record -type block_io_record -type io_task_record -type haltpoll_record -type pm_qos_record -go-package bpf -output-stem idletrace Idletrace idletrace.bpf.c -- -I/usr/include/x86_64-linux-gnu -Wall -Werror -mcpu=v3
