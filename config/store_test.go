package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
)

// TestConcurrentReloads has a reload read the file, then the file change
// and a second reload begin (SIGHUP and POST /-/reload together, say)
// before the first one uses what it read. Once the second reload has
// answered, the new file's modules must be in force and the gauge must
// say success, whatever the first reload read.
func TestConcurrentReloads(t *testing.T) {
	tests := []struct {
		name, first string
	}{
		{"an older good file", "modules:\n  one: " + withKey + "\n"},
		{"an older bad file", "modules:\n  one: {timeout: -1s}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				path := writeFile(t, dir, "config.yml", "modules:\n  zero: "+withKey+"\n")
				reg := prometheus.NewPedanticRegistry()
				s := NewStore(path, reg, promslog.NewNopLogger())
				if err := s.Reload(); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, "config.yml", tt.first)

				// The first reload stops once it has read the file.
				release := make(chan struct{})
				var calls atomic.Int32
				fromFile := s.load
				s.load = func() (*Config, error) {
					cfg, err := fromFile()
					if calls.Add(1) == 1 {
						<-release
					}
					return cfg, err
				}
				firstDone := make(chan error, 1)
				go func() { firstDone <- s.Reload() }()
				synctest.Wait()

				writeFile(t, dir, "config.yml", "modules:\n  two: "+withKey+"\n")
				secondDone := make(chan error, 1)
				go func() { secondDone <- s.Reload() }()
				// The second reload waits for the first or, were they not
				// serialised, runs to its end; then the first one goes on.
				synctest.Wait()
				close(release)
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
		})
	}
}

// TestReloadsRunOneAtATime starts many reloads while the file changes: no
// two are ever between reading the file and using it, and the last to read
// it is the one in force.
func TestReloadsRunOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := writeFile(t, dir, "config.yml", "modules:\n  zero: "+withKey+"\n")
		s := NewStore(path, prometheus.NewRegistry(), promslog.NewNopLogger())
		var inside atomic.Int32
		gate := make(chan struct{})
		fromFile := s.load
		s.load = func() (*Config, error) {
			inside.Add(1)
			defer inside.Add(-1)
			<-gate
			return fromFile()
		}
		const reloads = 8
		var wg sync.WaitGroup
		for range reloads {
			wg.Go(func() { _ = s.Reload() })
		}
		for j := range reloads {
			synctest.Wait()
			if n := inside.Load(); n != 1 {
				t.Errorf("%d reloads at once", n)
				break
			}
			writeFile(t, dir, "config.yml", fmt.Sprintf("modules:\n  m%d: %s\n", j, withKey))
			gate <- struct{}{}
		}
		close(gate)
		wg.Wait()
		if _, err := s.Lookup(fmt.Sprintf("m%d", reloads-1)); err != nil {
			t.Errorf("the last file's module is not in force: %v", err)
		}
	})
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
