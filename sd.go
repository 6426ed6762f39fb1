package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
)

// sdGroup is one target group of Prometheus' HTTP service discovery.
type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// serviceDiscovery answers GET /sd: one group per module of its targets
// without a "*", or of one module's with ?module=<name>.
func serviceDiscovery(store *moduleconfig.Store, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cfg := store.Current() // loaded before serving
		names := cfg.ModuleNames()
		if only := r.URL.Query().Get("module"); only != "" {
			if cfg.Modules[only] == nil {
				http.Error(w, fmt.Sprintf("unknown module %q: use one of the configuration file's modules", only), http.StatusBadRequest)
				return
			}
			names = []string{only}
		}
		groups := []sdGroup{}
		for _, name := range names {
			if targets := cfg.Modules[name].ConcreteTargets(); len(targets) > 0 {
				groups = append(groups, sdGroup{targets, map[string]string{"module": name, "__param_module": name}})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(groups); err != nil {
			logger.Debug("Cannot send the service discovery answer", "err", err)
		}
	}
}
