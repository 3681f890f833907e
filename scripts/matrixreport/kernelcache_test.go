package main

// Tests of the kernel matrix's package cache (scripts/kernel-cache.sh, run
// through scripts/kernel-matrix.sh --fetch).

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cacheShell runs script in bash with scripts/kernel-cache.sh sourced, CACHE
// and WORK set, and ROOT the repository.
func cacheShell(t *testing.T, cache, script string, args ...string) (string, error) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"-c", `set -euo pipefail
CACHE=$1 ROOT=$2 WORK=$(mktemp -d)
. "$ROOT/scripts/kernel-cache.sh"
shift 2
` + script, "sh", cache, root}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSafeRm: no computed path that can be the cache, one of its parents, the
// repository, / or nothing is removed; a directory inside the cache is.
func TestSafeRm(t *testing.T) {
	base := t.TempDir()
	cache := filepath.Join(base, "kernels")
	keep := filepath.Join(cache, "linux-image-6.1.0-57-cloud-amd64-unsigned_6.1.192-3_amd64.deb")
	victim := filepath.Join(cache, "linux-image-6.1.0-57-cloud-amd64-unsigned_6.1.192-3_amd64")
	if err := os.MkdirAll(filepath.Join(victim, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../..")
	for _, p := range []string{"", "/", cache, cache + "/", cache + "/.", cache + "//", victim + "/..", base, filepath.Dir(base), root, root + "/scripts/.."} {
		if out, err := cacheShell(t, cache, `safe_rm "$1"`, p); err == nil {
			t.Errorf("safe_rm %q did not refuse: %s", p, out)
		}
	}
	// The bug that emptied the cache: a failed lookup handed kernel_dir the
	// cache itself ("$CACHE/" + an empty name).
	for _, deb := range []string{cache + "/", cache + "/.deb", "", cache + "/absent.deb", "/elsewhere/x.deb"} {
		if out, err := cacheShell(t, cache, `kernel_dir "$1"`, deb); err == nil {
			t.Errorf("kernel_dir %q did not refuse: %s", deb, out)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the cache lost its package: %v", err)
	}
	if out, err := cacheShell(t, cache, `safe_rm "$1"`, victim); err != nil {
		t.Errorf("safe_rm of an extraction directory: %v: %s", err, out)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Errorf("safe_rm left %s", victim)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("safe_rm of a directory in the cache removed more: %v", err)
	}
}

// TestCachedLookup: a cached package is found by its literal name, '+' and
// all, and a series does not pick another's package (6.1 is not 6.12).
func TestCachedLookup(t *testing.T) {
	cache := t.TempDir()
	for _, n := range []string{
		"linux-image-6.1.0-57-cloud-amd64-unsigned_6.1.192-3_amd64.deb",
		"linux-image-6.1.0-9-cloud-amd64-unsigned_6.1.27-1_amd64.deb",
		"linux-image-6.12.117+deb12-cloud-amd64-unsigned_6.12.117-1~deb12u1_amd64.deb",
		"linux-image-6.12.9+deb12-cloud-amd64-unsigned_6.12.9-1_amd64.deb",
	} {
		if err := os.WriteFile(filepath.Join(cache, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for series, want := range map[string]string{
		"6.1":  "linux-image-6.1.0-57-cloud-amd64-unsigned_6.1.192-3_amd64.deb",
		"6.12": "linux-image-6.12.117+deb12-cloud-amd64-unsigned_6.12.117-1~deb12u1_amd64.deb",
	} {
		out, err := cacheShell(t, cache, `kernel_deb "$1"`, series)
		if got := strings.TrimSpace(out); err != nil || got != filepath.Join(cache, want) {
			t.Errorf("kernel_deb %s: %v: %q, want %s", series, err, got, want)
		}
	}
}

// buildDeb makes a minimal Debian package at path holding files (path in
// the package → content).
func buildDeb(t *testing.T, path, name string, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	control := "Package: " + name + "\nVersion: 7.3.4-1\nArchitecture: amd64\nMaintainer: test <t@example.org>\nDescription: test\n"
	if err := os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, path).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v: %s", err, out)
	}
}

// TestSplitKernelPackage: trixie-backports' kernels come as linux-binary
// (vmlinuz under /usr/lib/modules) and linux-base (its config); a cached
// pair is found by its series and laid out as bookworm's /boot, and a
// linux-binary without its linux-base is refused in one line naming it.
func TestSplitKernelPackage(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatal("no dpkg-deb: the kernel matrix extracts its kernels with it (Debian's dpkg)")
	}
	cache := t.TempDir()
	const rel = "7.3.4+deb13-cloud-amd64"
	binName, baseName := "linux-binary-"+rel, "linux-base-"+rel
	bin := filepath.Join(cache, binName+"_7.3.4-1~bpo13+1_amd64.deb")
	base := filepath.Join(cache, baseName+"_7.3.4-1~bpo13+1_amd64.deb")
	buildDeb(t, bin, binName, map[string]string{"usr/lib/modules/" + rel + "/vmlinuz": "kernel"})
	buildDeb(t, base, baseName, map[string]string{"usr/lib/modules/" + rel + "/config": "CONFIG_HZ=250\n"})
	out, err := cacheShell(t, cache, `kernel_deb "$1"`, "7.3")
	if got := strings.TrimSpace(out); err != nil || got != bin {
		t.Fatalf("kernel_deb 7.3: %v: %q, want %s", err, got, bin)
	}
	hidden := base + ".hidden"
	if err := os.Rename(base, hidden); err != nil {
		t.Fatal(err)
	}
	out, err = cacheShell(t, cache, `kernel_dir "$1"`, bin)
	if err == nil || !strings.Contains(out, baseName) {
		t.Errorf("kernel_dir without linux-base: %v: %q, want a refusal naming %s", err, out, baseName)
	}
	if err := os.Rename(hidden, base); err != nil {
		t.Fatal(err)
	}
	out, err = cacheShell(t, cache, `kernel_dir "$1"`, bin)
	if err != nil {
		t.Fatalf("kernel_dir: %v: %s", err, out)
	}
	dir := strings.TrimSpace(out)
	for name, want := range map[string]string{"vmlinuz-" + rel: "kernel", "config-" + rel: "CONFIG_HZ=250\n"} {
		b, err := os.ReadFile(filepath.Join(dir, "boot", name))
		if err != nil || string(b) != want {
			t.Errorf("boot/%s: %v: %q, want %q", name, err, b, want)
		}
	}
}
