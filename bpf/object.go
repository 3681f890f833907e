package bpf

import (
	"crypto/sha256"
	"encoding/hex"
)

// ObjectSHA256 identifies the embedded BPF object; traces carry it so a
// result can be tied to the exact kernel-side code that produced it.
func ObjectSHA256() string {
	sum := sha256.Sum256(_IdletraceBytes)
	return hex.EncodeToString(sum[:])
}
