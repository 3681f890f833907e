package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SyncWrites keeps block IO going for a recording under test: a 4 KiB write
// and fsync of one file in dir, then a pause of every (0: none), until the
// returned stop is called or the test ends. A dir on tmpfs issues no IO.
func SyncWrites(t testing.TB, dir string, every time.Duration) (stop func()) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "syncwrites"))
	if err != nil {
		t.Fatal(err)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			select {
			case <-quit:
				return
			default:
			}
			f.WriteAt(buf, 0)
			f.Sync()
			if every > 0 {
				time.Sleep(every)
			}
		}
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			close(quit)
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}
