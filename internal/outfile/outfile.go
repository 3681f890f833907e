// Package outfile creates the files idletrace writes (traces, reports) the
// one way every command does: never over an existing file unless forced.
package outfile

import (
	"errors"
	"fmt"
	"os"
)

// Create creates path for writing; an existing file is an error naming
// --force, and with force it is truncated.
func Create(path string, force bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%s already exists; use --force to overwrite it", path)
	}
	return f, err
}
