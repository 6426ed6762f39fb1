package config

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Store holds the configuration in use and swaps it on reload. A file that
// fails to load is refused and the old configuration keeps serving.
type Store struct {
	path   string
	logger *slog.Logger

	// reloadMu runs reloads one at a time, from reading the file to
	// setting the gauges: otherwise a reload that read the file before it
	// changed could swap its modules in after one that read it after, or
	// its failure overwrite a later success.
	reloadMu sync.Mutex
	// Set by tests only: queuedHook runs when a reload waits for another
	// one to end, loadedHook between reading the file and using what it
	// held.
	queuedHook, loadedHook func()

	mu     sync.RWMutex
	cfg    *Config
	loaded bool

	lastSuccess     prometheus.Gauge
	lastSuccessTime prometheus.Gauge
}

// NewStore returns a store for the file at path (empty: no file, only the
// command line) and registers its reload metrics on reg.
func NewStore(path string, reg prometheus.Registerer, logger *slog.Logger) *Store {
	s := &Store{
		path:   path,
		logger: logger,
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deployment_service_exporter_config_last_reload_successful",
			Help: "Whether the last load of the configuration file succeeded (1) or was refused (0).",
		}),
		lastSuccessTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deployment_service_exporter_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of the configuration.",
		}),
	}
	reg.MustRegister(s.lastSuccess, s.lastSuccessTime)
	return s
}

// Reload reads the file again. Without a file there is nothing to read and
// the command line is the whole configuration, which counts as loaded.
// Reloads run one at a time, so once Reload has succeeded the modules in
// force are those of the file as it was when Reload was called, or of a
// later version: never those of an earlier reload that finished last.
func (s *Store) Reload() error {
	if !s.reloadMu.TryLock() {
		if s.queuedHook != nil {
			s.queuedHook()
		}
		s.reloadMu.Lock()
	}
	defer s.reloadMu.Unlock()
	cfg := &Config{}
	var err error
	if s.path != "" {
		cfg, err = load(s.path)
	}
	if s.loadedHook != nil {
		s.loadedHook()
	}
	if err != nil {
		s.lastSuccess.Set(0)
		return err
	}
	s.mu.Lock()
	s.cfg, s.loaded = cfg, true
	s.mu.Unlock()
	s.lastSuccess.Set(1)
	s.lastSuccessTime.SetToCurrentTime()
	if s.path != "" {
		s.logger.Info("Configuration loaded", "file", s.path, "modules", len(cfg.Modules))
	}
	for _, name := range cfg.ModuleNames() {
		if cfg.Modules[name].AllowAnyTarget {
			s.logger.Warn("Module has allow_any_target: true: /probe sends its credentials to any target a request names; list its services under targets instead", "module", name, "file", s.path)
		}
	}
	return nil
}

// Ready tells whether a configuration has been loaded.
func (s *Store) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.loaded
}

// errNoDefault explains a /probe without module when no module is named
// default.
var errNoDefault = errors.New("no module given and the configuration has no module named default: add module=<name>")

// Lookup returns the module named name (default when empty). /probe
// turns it into a target's settings, and compares it with the one it last
// saw to tell whether a reload changed it.
func (s *Store) Lookup(name string) (*Module, error) {
	s.mu.RLock()
	cfg := s.cfg
	s.mu.RUnlock()
	if cfg == nil || len(cfg.Modules) == 0 {
		return nil, errors.New("no modules are configured: start the exporter with --config.file to use /probe")
	}
	if name == "" {
		m, ok := cfg.Modules[defaultModule]
		if !ok {
			return nil, errNoDefault
		}
		return m, nil
	}
	m, ok := cfg.Modules[name]
	if !ok {
		return nil, fmt.Errorf("unknown module %q: use one of the configuration file's modules", name)
	}
	return m, nil
}

// Current returns the configuration in use, nil before the first load.
// It is never changed: a reload replaces it.
func (s *Store) Current() *Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cfg
}

// ModuleNames returns the names of the modules in use, sorted.
func (s *Store) ModuleNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cfg == nil {
		return nil
	}
	return s.cfg.ModuleNames()
}

// Check reads the file at path as a reload would, building every module's
// HTTP client, and returns each problem as one line naming the file and,
// where there is one, the module. It returns nothing for a good file.
func Check(path string) []string {
	_, err := load(path)
	if err == nil {
		return nil
	}
	var problems Problems
	if errors.As(err, &problems) {
		lines := make([]string, len(problems))
		for i, p := range problems {
			lines[i] = fmt.Sprintf("config file %s: %s", path, p)
		}
		return lines
	}
	return []string{err.Error()}
}
