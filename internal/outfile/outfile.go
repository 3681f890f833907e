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
	if !Regular(f) {
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

// Regular says f is a regular file: what may be locked, synced and
// removed, unlike a device or FIFO given as the output (/dev/null).
func Regular(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}

// lock takes f's exclusive lock, or says who holds it. A file system
// without flock (some network ones) goes unlocked. Locked, f must still be
// the file at path: a Remove between the open and the lock would
// otherwise leave the trace written to an unlinked file, lost.
func lock(f *os.File, path string) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%s is being written by another idletrace; wait for it to finish or write elsewhere", path)
	}
	held, err1 := f.Stat()
	named, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		return fmt.Errorf("%s was removed or replaced by another idletrace as it was opened; try again", path)
	}
	return nil
}

// Remove removes path unless another idletrace is writing it (Create's
// lock): `experiment --force` clears the last run's traces this way, and
// must not pull them from under a run still recording them. A path that
// does not exist is no error; one that is no regular file (a FIFO, which
// an open would wait on) is removed unlocked.
func Remove(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return os.Remove(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lock(f, path); err != nil {
		return err
	}
	return os.Remove(path)
}

// Discard removes a file Create made and closes it, in that order: closed
// first, its lock would be free for another writer whose file the remove
// would then take away. Only a regular file is removed: a failed import
// to -o /dev/null must not take /dev/null away.
func Discard(f *os.File) {
	RemovePartial(f.Name())
	f.Close()
}

// RemovePartial removes what a failed write left at path, if it is a
// regular file (not a device or FIFO given as -o), for a write whose file
// is already closed.
func RemovePartial(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		os.Remove(path)
	}
}
