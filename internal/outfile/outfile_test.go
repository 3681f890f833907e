package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
