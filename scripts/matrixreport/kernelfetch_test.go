//go:build kernelfetch

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelFetch runs the matrix's download and extract steps
// (kernel-matrix.sh --fetch) and checks that each kernel's vmlinuz and config
// come out. It downloads about 60 MB, so it is built only with the
// kernelfetch tag (make test-kernels runs it, before the matrix). When
// the kernel cache (IDLETRACE_KERNEL_CACHE, default
// /var/cache/idletrace-kernels) is empty or missing, it fills that cache,
// which the matrix then reuses: one download per fresh machine. When the
// cache is already filled, it checks the cached lookup there and, with
// CI=true, fetches again into an empty directory of its own.
func TestKernelFetch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("fetching the matrix's kernels needs root (apt-get update)")
	}
	cache := os.Getenv("IDLETRACE_KERNEL_CACHE")
	if cache == "" {
		cache = "/var/cache/idletrace-kernels"
	}
	ents, err := os.ReadDir(cache)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// The lab kernel's build (.ci/run starts it first) shares the cache:
	// its source package, tree, link and locks are not the matrix's.
	matrix := 0
	for _, e := range ents {
		if n := e.Name(); !strings.HasPrefix(n, ".") && !strings.HasPrefix(n, "lab-") && !strings.HasPrefix(n, "linux-source-") {
			matrix++
		}
	}
	fetchInto(t, cache, matrix == 0)
	if matrix > 0 && os.Getenv("CI") == "true" {
		fetchInto(t, t.TempDir(), true)
	}
}

func fetchInto(t *testing.T, cache string, empty bool) {
	t.Helper()
	series := os.Getenv("IDLETRACE_KERNELS")
	if series == "" {
		series = "6.1 6.12 7.3"
	}
	t.Logf("kernel cache %s (empty: %v), kernels %s", cache, empty, series)
	cmd := exec.Command("bash", "../kernel-matrix.sh", "--fetch")
	cmd.Env = append(os.Environ(), "IDLETRACE_KERNEL_CACHE="+cache, "IDLETRACE_KERNELS="+series)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("kernel-matrix.sh --fetch:\n%s%s", out, stderr.String())
	if err != nil {
		t.Fatalf("kernel-matrix.sh --fetch: %v", err)
	}
	dirs := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if s, d, ok := strings.Cut(l, "="); ok {
			dirs[s] = d
		}
	}
	for _, s := range strings.Fields(series) {
		d := dirs[s]
		if d == "" {
			t.Errorf("%s: no kernel directory", s)
			continue
		}
		if filepath.Dir(d) != filepath.Clean(cache) {
			t.Errorf("%s: %s is not in the cache %s", s, d, cache)
		}
		if _, err := os.Stat(d + ".deb"); err != nil {
			t.Errorf("%s: the package is not kept next to its extraction: %v", s, err)
		}
		for _, f := range []string{"vmlinuz-*", "config-*"} {
			m, _ := filepath.Glob(filepath.Join(d, "boot", f))
			if len(m) != 1 {
				t.Errorf("%s: boot/%s: %q", s, f, m)
				continue
			}
			if f == "vmlinuz-*" {
				if st, err := os.Stat(m[0]); err != nil || st.Size() < 1<<20 {
					t.Errorf("%s: %s is missing or under 1 MiB: %v", s, m[0], err)
				}
			} else {
				b, _ := os.ReadFile(m[0])
				if !strings.Contains(string(b), "\nCONFIG_DEBUG_INFO_BTF=y\n") {
					t.Errorf("%s: %s has no CONFIG_DEBUG_INFO_BTF=y", s, m[0])
				}
			}
		}
	}
	if empty && !strings.Contains(stderr.String(), "downloading") {
		t.Errorf("from an empty cache, nothing was downloaded")
	}
}
