package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Store holds the configuration in use; a file that fails to load is refused, the old one kept.
type Store struct {
	path                         string
	logger                       *slog.Logger
	reloading                    sync.Mutex
	cfg                          atomic.Pointer[Config]
	lastSuccess, lastSuccessTime prometheus.Gauge
}

// NewStore returns a store for the file at path ("": none) with its metrics on reg.
func NewStore(path string, reg prometheus.Registerer, logger *slog.Logger) *Store {
	gauge := promauto.With(reg).NewGauge
	return &Store{
		path:   path,
		logger: logger,
		lastSuccess: gauge(prometheus.GaugeOpts{
			Name: "deployment_service_exporter_config_last_reload_successful",
			Help: "Whether the last load of the configuration file succeeded (1) or was refused (0).",
		}),
		lastSuccessTime: gauge(prometheus.GaugeOpts{
			Name: "deployment_service_exporter_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of the configuration.",
		}),
	}
}

// Reload reads the configuration again, one reload at a time, so that an older file never wins.
func (s *Store) Reload() error {
	s.reloading.Lock()
	defer s.reloading.Unlock()
	cfg, err := load(s.path)
	if err != nil {
		s.lastSuccess.Set(0)
		return fmt.Errorf("config file %s: %s", s.path, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	s.cfg.Store(cfg)
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

// Current returns the configuration in use, nil before the first load.
func (s *Store) Current() *Config { return s.cfg.Load() }

// Lookup returns the module named name (default when empty).
func (s *Store) Lookup(name string) (*Module, error) {
	cfg := s.Current()
	if cfg == nil || len(cfg.Modules) == 0 {
		return nil, errors.New("no modules are configured: start the exporter with --config.file to use /probe")
	}
	if m, ok := cfg.Modules[cmp.Or(name, "default")]; ok {
		return m, nil
	}
	if name == "" {
		return nil, errors.New("no module given and the configuration has no module named default: add module=<name>")
	}
	return nil, fmt.Errorf("unknown module %q: use one of the configuration file's modules", name)
}

// Check reads the file at path as a reload would and returns its problems, one line each.
func Check(path string) (lines []string) {
	if _, err := load(path); err != nil {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			lines = append(lines, fmt.Sprintf("config file %s: %s", path, line))
		}
	}
	return lines
}
