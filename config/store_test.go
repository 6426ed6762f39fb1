package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
)

// TestConcurrentReloads: reloads (SIGHUP and POST /-/reload together, say)
// run while the file keeps changing. Once a reload has answered, the
// modules in force are those of a file as new as the one it was called
// after, or newer: an older file read by a slower reload never wins.
func TestConcurrentReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yml")
	s := NewStore(path, prometheus.NewRegistry(), promslog.NewNopLogger())
	var mu sync.Mutex
	version := 0
	write := func() int { // a new version of the file, replaced as a whole
		mu.Lock()
		defer mu.Unlock()
		version++
		next := writeFile(t, dir, fmt.Sprintf("next%d.yml", version), fmt.Sprintf("modules:\n  m%d: %s\n", version, withKey))
		if err := os.Rename(next, path); err != nil {
			t.Error(err)
		}
		return version
	}
	inForce := func() int {
		n, _ := strconv.Atoi(strings.TrimPrefix(s.Current().ModuleNames()[0], "m"))
		return n
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				v := write()
				if err := s.Reload(); err != nil {
					t.Error(err)
					return
				}
				if got := inForce(); got < v {
					t.Errorf("after a reload of version %d, version %d is in force", v, got)
				}
			}
		})
	}
	wg.Wait()
}

// TestConfigFileMustBeRegular: a FIFO, a device, a directory or a file over
// 1 MiB as --config.file or --api.http-config.file is refused at once, in
// one line naming it; a refused reload leaves the gauge at 0 and the old
// configuration in force.
func TestConfigFileMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	big := writeFile(t, dir, "big", "modules:\n  m: "+withKey+"\n#"+strings.Repeat("x", MaxFileBytes))
	path := filepath.Join(dir, "config.yml")
	reg := prometheus.NewRegistry()
	s := NewStore(path, reg, promslog.NewNopLogger())
	for _, bad := range []string{fifo, "/dev/zero", dir, big} {
		writeFile(t, dir, "config.yml", "modules:\n  good: "+withKey+"\n")
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bad, path); err != nil {
			t.Fatal(err)
		}
		err := s.Reload()
		if err == nil || !strings.Contains(err.Error(), path+": it is") || strings.Contains(err.Error(), "\n") {
			t.Errorf("reload of %s: %v, want one line naming the file", bad, err)
		}
		if _, err := s.Lookup("good"); err != nil || testutil.ToFloat64(s.lastSuccess) != 0 {
			t.Errorf("after a refused reload of %s: %v, gauge %v", bad, err, testutil.ToFloat64(s.lastSuccess))
		}
		if got := Check(bad); len(got) != 1 || !strings.Contains(got[0], bad+": it is") {
			t.Errorf("Check(%s) = %q", bad, got)
		}
		if _, err := LoadHTTPClientConfig(bad); err == nil || !strings.Contains(err.Error(), "it is") {
			t.Errorf("LoadHTTPClientConfig(%s): %v", bad, err)
		}
		_ = os.Remove(path)
	}
}

// TestAllowAnyTargetWarnsOncePerLoad: a module that sends its key
// anywhere is said at warn on every load, once, naming the module.
func TestAllowAnyTargetWarnsOncePerLoad(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "config.yml", "modules:\n  bound: "+withKey+"\n  loose: {allow_any_target: true, http_client_config: {authorization: {type: Token, credentials: k}}}\n")
	var log bytes.Buffer
	s := NewStore(path, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&log, nil)))
	for range 2 {
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings over two loads, want 2:\n%s", n, log.String())
	}
	if n := strings.Count(log.String(), "allow_any_target: true"); n != 2 || !strings.Contains(log.String(), "module=loose") || strings.Contains(log.String(), "module=bound") {
		t.Errorf("the warnings do not name the loose module alone:\n%s", log.String())
	}
}
