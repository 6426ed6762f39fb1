package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
)

// TestConcurrentReloads has a reload read the file, then the file change
// and a second reload begin (SIGHUP and POST /-/reload together, say)
// before the first one uses what it read. Once the second reload has
// answered, the new file's modules must be in force and the gauge must
// say success, whatever the first reload read. The file starts as a named
// pipe, so that the first reload waits inside its read until the test writes.
func TestConcurrentReloads(t *testing.T) {
	tests := []struct {
		name, first string
	}{
		{"an older good file", "modules:\n  one: " + withKey + "\n"},
		{"an older bad file", "modules:\n  one: {timeout: -1s}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, "config.yml", "modules:\n  zero: "+withKey+"\n")
			reg := prometheus.NewPedanticRegistry()
			s := NewStore(path, reg, promslog.NewNopLogger())
			if err := s.Reload(); err != nil {
				t.Fatal(err)
			}
			first := namedPipe(t, path)
			firstDone := make(chan error, 1)
			go func() { firstDone <- s.Reload() }()
			w := first.writer()

			// The first reload is reading; the file changes and a second begins.
			next := writeFile(t, dir, "next.yml", "modules:\n  two: "+withKey+"\n")
			if err := os.Rename(next, path); err != nil {
				t.Fatal(err)
			}
			secondDone := make(chan error, 1)
			go func() { secondDone <- s.Reload() }()
			select {
			case err := <-secondDone:
				t.Fatalf("the second reload answered (%v) while the first was still reading", err)
			case <-time.After(100 * time.Millisecond): // only a missing lock ends sooner
			}
			first.finish(w, tt.first)
			<-firstDone
			if err := <-secondDone; err != nil {
				t.Fatalf("second reload: %v", err)
			}

			if _, err := s.Lookup("two"); err != nil {
				t.Errorf("after the second reload answered, its file's module is not in force: %v", err)
			}
			if _, err := s.Lookup("one"); err == nil {
				t.Error("the first reload's older file is in force")
			}
			want := `# HELP deployment_service_exporter_config_last_reload_successful Whether the last load of the configuration file succeeded (1) or was refused (0).
# TYPE deployment_service_exporter_config_last_reload_successful gauge
deployment_service_exporter_config_last_reload_successful 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "deployment_service_exporter_config_last_reload_successful"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestReloadsRunOneAtATime starts many reloads of a named pipe that the
// test fills once per reader: were two reading at once, one would read
// another's file or none. Each reads a whole file, and the last is in force.
func TestReloadsRunOneAtATime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yml")
	pipe := namedPipe(t, path)
	s := NewStore(path, prometheus.NewRegistry(), promslog.NewNopLogger())
	const reloads = 8
	errs := make(chan error, reloads)
	for range reloads {
		go func() { errs <- s.Reload() }()
	}
	for j := range reloads {
		// The writer waits for a reader; the next one may start once this reload has answered.
		pipe.finish(pipe.writer(), fmt.Sprintf("modules:\n  m%d: %s\n", j, withKey))
		if err := <-errs; err != nil {
			t.Errorf("a reload read a partial file: %v", err)
		}
	}
	if _, err := s.Lookup(fmt.Sprintf("m%d", reloads-1)); err != nil {
		t.Errorf("the last file's module is not in force: %v", err)
	}
}

// pipe is a configuration file that is a named pipe.
type pipe struct {
	t    *testing.T
	path string
}

// namedPipe replaces the file at path with a named pipe.
func namedPipe(t *testing.T, path string) pipe {
	t.Helper()
	_ = os.Remove(path)
	if err := mkfifo(path); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	return pipe{t, path}
}

// writer opens the pipe for writing, which returns once a reload has opened it.
func (p pipe) writer() *os.File {
	w, err := os.OpenFile(p.path, os.O_WRONLY, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	return w
}

// finish hands the reading reload its file.
func (p pipe) finish(w *os.File, content string) {
	if _, err := w.WriteString(content); err != nil {
		p.t.Error(err)
	}
	if err := w.Close(); err != nil {
		p.t.Error(err)
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
