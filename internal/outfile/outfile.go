// Package outfile creates the files idletrace writes (traces, reports) the
// one way every command does: never over an existing file unless forced,
// and never over one another idletrace is still writing.
package outfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Create creates path for writing; an existing file is an error naming
// --force, and with force it is truncated. The file stays locked
// (flock, exclusive) until it is closed: a second writer given the same
// path, with --force or not, is refused rather than interleaving its
// chunks with the first's (two recorders on one -o made a file whose
// every other chunk failed its magic, which info called finished).
func Create(path string, force bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE // truncated once locked
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%s already exists; use --force to overwrite it", path)
	}
	if err != nil {
		return nil, err
	}
	// A file system without flock (some network ones) goes unlocked.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("%s is being written by another idletrace; wait for it to finish or write elsewhere", path)
	}
	// Only a regular file has a length to cut (O_TRUNC ignored the
	// others: -o /dev/null --force).
	if fi, err := f.Stat(); force && err == nil && fi.Mode().IsRegular() {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
