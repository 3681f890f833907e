package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		name    string
		force   bool
		wantErr string
	}{
		{"new file", false, ""},
		{"existing, not forced", false, "already exists; use --force"},
		{"existing, forced", true, ""},
	} {
		f, err := Create(path, c.force)
		switch {
		case c.wantErr == "" && err != nil:
			t.Fatalf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Fatalf("%s: error %v, want one containing %q", c.name, err, c.wantErr)
		case err == nil:
			if _, err := f.WriteString(c.name); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "existing, forced" {
		t.Fatalf("after a forced create the file holds %q, want only the last write", b)
	}
}

// TestCreateLocked: a file another writer holds is refused, forced or
// not, and left as that writer has it; once closed it can be replaced.
func TestCreateLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	first, err := Create(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.WriteString("first"); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		want := "already exists"
		if force {
			want = "is being written by another idletrace"
		}
		if f, err := Create(path, force); err == nil || !strings.Contains(err.Error(), want) {
			if f != nil {
				f.Close()
			}
			t.Errorf("force=%v while written: error %v, want %q", force, err, want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Errorf("the first writer's file holds %q after the refused creates", b)
	}
	first.Close()
	second, err := Create(path, true)
	if err != nil {
		t.Fatalf("after the first writer closed: %v", err)
	}
	second.Close()
	// Not a regular file: shared by design, neither locked nor cut; two
	// writers to /dev/null at once are fine.
	a, err := Create(os.DevNull, true)
	if err != nil {
		t.Fatalf("%s --force: %v", os.DevNull, err)
	}
	defer a.Close()
	if b, err := Create(os.DevNull, true); err != nil {
		t.Errorf("a second %s --force: %v", os.DevNull, err)
	} else {
		b.Close()
	}
}

// TestRemove: a file another writer holds is not removed (experiment
// --force clearing a run's traces); one nobody writes, or none, is.
func TestRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	w, err := Create(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err == nil || !strings.Contains(err.Error(), "is being written by another idletrace") {
		t.Errorf("Remove while written: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the written file is gone: %v", err)
	}
	Discard(w)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Discard left the file: %v", err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("Remove of a file that is not there: %v", err)
	}
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("Remove of a file nobody writes: %v", err)
	}
}

// TestNotRegular: what is no regular file (a device behind a symlink, a
// FIFO) is neither locked, nor removed by Discard, and Remove does not
// open it (an open of a FIFO waits for a writer).
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "null")
	if err := os.Symlink(os.DevNull, link); err != nil {
		t.Fatal(err)
	}
	f, err := Create(link, true)
	if err != nil {
		t.Fatal(err)
	}
	Discard(f) // a failed write to -o /dev/null
	if _, err := os.Stat(link); err != nil {
		t.Errorf("Discard removed what -o named, a device: %v", err)
	}
	RemovePartial(link)
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("RemovePartial removed a link to a device: %v", err)
	}
	fifo := filepath.Join(dir, "before.trace")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Remove(fifo) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Remove of a FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Remove of a FIFO waited for a writer")
	}
}
