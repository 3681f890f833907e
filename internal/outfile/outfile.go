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
	// Only a regular file is locked and cut: a device, tty or FIFO
	// (-o /dev/null --force) is shared by design, and O_TRUNC ignored it.
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return f, nil
	}
	if err := lock(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if force {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// lock takes f's exclusive lock, or says who holds it. A file system
// without flock (some network ones) goes unlocked.
func lock(f *os.File, path string) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%s is being written by another idletrace; wait for it to finish or write elsewhere", path)
	}
	return nil
}

// Remove removes path unless another idletrace is writing it (Create's
// lock): `experiment --force` clears the last run's traces this way, and
// must not pull them from under a run still recording them. A path that
// does not exist is no error.
func Remove(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if err := lock(f, path); err != nil {
			return err
		}
	}
	return os.Remove(path)
}

// Discard removes a file Create made and closes it, in that order: closed
// first, its lock would be free for another writer whose file the remove
// would then take away.
func Discard(f *os.File) {
	os.Remove(f.Name())
	f.Close()
}
