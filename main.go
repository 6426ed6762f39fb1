// Command deployment_service_exporter exposes a deployment service's health, latency and inventory counts as Prometheus metrics.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
	"github.com/deployment-service/deployment_service_exporter/internal/sighup"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

func main() {
	if version.Version == "" {
		version.Version = "devel" // built without the release ldflags
	}
	os.Exit(runService(func() int { return run(os.Args[1:], sighup.Signals) }))
}

// run serves as args ask, reloading on every signal of hup; it returns the exit code.
func run(args []string, hup <-chan os.Signal) int {
	f, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", exporterName, err)
		return 2
	}
	if f.configCheck {
		return checkConfig(*f)
	}
	logger := promslog.New(&f.log)
	fail := func(msg string, err error) int {
		logger.Error(msg, "err", err)
		return 1
	}
	s, err := validate(*f)
	if err != nil {
		return fail("Invalid configuration", err)
	}
	reg := newRegistry(!s.disableExporterMetrics)
	store := moduleconfig.NewStore(s.configFile, reg, logger)
	if err := store.Reload(); err != nil {
		return fail("Invalid configuration", err)
	}
	logger.Info("Starting "+exporterName, "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())
	if s.demo {
		demo, err := startDemo(s, (*f.web.WebListenAddresses)[0], logger)
		if err != nil {
			return fail("Cannot start the sample service", err)
		}
		defer demo.Close()
	}
	handler, reload, err := routes(s, reg, store, collector.NewPollLog(), logger)
	if err != nil {
		return fail("Invalid configuration", err)
	}
	go func() {
		for range hup { // signals queued during the start included
			_ = reload()
		}
	}()
	return serve(newServer(handler, fileLimit()), f.web, logger)
}

// parseArgs parses the command line; --help and --version answer and exit.
func parseArgs(args []string) (*settings, error) {
	app := kingpin.New(exporterName, "Prometheus exporter for a deployment service's HTTP JSON API.")
	f := &settings{}
	m, loc := &f.module, &f.module.Locations
	app.Flag("api.url", "Base URL of the deployment service, with any path prefix (required unless --demo or --config.file).").Envar("DEPLOYMENT_SERVICE_URL").StringVar(&f.apiURL)
	app.Flag("api.key-file", "File holding the API key (surrounding whitespace trimmed); re-read on every request, so a rotated key needs no restart. Or set the key itself in "+keyEnv+".").Envar("DEPLOYMENT_SERVICE_API_KEY_FILE").StringVar(&f.keyFile)
	app.Flag("api.timeout", "Upper bound for one poll of the API; Prometheus' scrape timeout header lowers it.").Default(moduleconfig.DefaultTimeout.String()).DurationVar(&m.Timeout)
	app.Flag("api.concurrency", "Most requests in flight to the API at once during one poll.").Default(strconv.Itoa(client.DefaultConcurrency)).SetValue((*intFlag)(&m.Concurrency))
	app.Flag("api.max-pages", "Most pages followed for one list.").Default(strconv.Itoa(client.DefaultMaxPages)).SetValue((*intFlag)(&m.MaxPages))
	app.Flag("api.max-response-bytes", "Largest response body read, in bytes or with a unit (64MiB); a larger body is a too_large error.").Default("64MiB").SetValue((*byteSize)(&m.MaxResponseBytes))
	app.Flag("api.rate-limit", "Most requests per second sent to the API (0 = no limit).").Default("0").Float64Var(&m.RateLimit)
	app.Flag("api.gzip", "Ask the service for gzip-compressed answers (--no-api.gzip: do not); --api.max-response-bytes bounds the decompressed body.").Default("true").BoolVar(&m.Gzip)
	app.Flag("api.min-interval", "Least time between the starts of two polls; scrapes inside it are answered from the last poll (0 = poll on every scrape).").Default("0s").DurationVar(&m.MinInterval)
	app.Flag("locations.detail-id", "Location id whose detail view is read on every scrape; repeatable. Each id adds per-location series.").IsSetByUser(&f.locationsGiven).SetValue((*idsFlag)(&loc.DetailIDs))
	app.Flag("locations.detail-limit", "When no --locations.detail-id is given: read the detail views of the first N locations of the list (0 = none).").IsSetByUser(&f.locationsGiven).Default("0").SetValue((*intFlag)(&loc.DetailLimit))
	app.Flag("locations.info-field", "Top-level scalar field of the detail view to expose as a label of deployment_service_location_info; repeatable.").IsSetByUser(&f.locationsGiven).StringsVar(&loc.InfoFields)
	app.Flag("api.http-config.file", "YAML file of prometheus/common HTTP client settings (tls_config, proxy_url, http_headers, ...) for the service behind /metrics; an authorization of type Token in it replaces the key flags.").StringVar(&f.httpConfigFile)
	app.Flag("config.file", "YAML file of modules for /probe; reloaded on SIGHUP and POST /-/reload.").StringVar(&f.configFile)
	app.Flag("config.check", "Check --config.file, --api.http-config.file and the other flags as a start would (building every module's HTTP client), print what is wrong or OK, and exit 1 or 0 without serving.").BoolVar(&f.configCheck)
	app.Flag("demo", fmt.Sprintf("Start an embedded sample deployment service on loopback and watch it; no URL or key needed. Unless --locations.* flags are given, it watches the details of %d locations with info field %s. Listens on %s unless --web.listen-address is given.", demoDetailLimit, demoInfoField, demoListenAddress)).BoolVar(&f.demo)
	app.Flag("demo.fault", "Make the sample service of --demo fail on purpose, as ENDPOINT:FAULT; repeatable. ENDPOINT: root, projects, locations, location_detail (every detail view) or location_detail/<id>. FAULT: 401, 403, 404, 500, 502, 503, 429/<seconds> or 503/<seconds> (with that Retry-After), or delay/<duration>, such as projects:delay/2.5s.").SetValue(&f.demoFaults)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.metricsPath)
	app.Flag("web.external-url", "URL under which people reach the exporter's pages (through a proxy, say), such as https://exporter.example.com/; deployment_service_target_info then carries a page label linking to the exporter's page about each target, which alerts show.").URLVar(&f.externalURL)
	app.Flag("web.disable-exporter-metrics", "Leave the go_*, process_* and promhttp_* metrics out of the metrics path.").BoolVar(&f.disableExporterMetrics)
	app.Flag("web.max-requests", "Most scrape requests served at once on the metrics path, and as many on /probe; more get a 503 (0 = no limit).").Default(strconv.Itoa(defaultMaxRequests)).SetValue((*intFlag)(&f.maxRequests))
	f.web = kingpinflag.AddFlags(app, defaultListenAddress)
	var listenGiven bool
	app.GetFlag("web.listen-address").IsSetByUser(&listenGiven)
	flag.AddFlags(app, &f.log)
	app.UsageWriter(os.Stdout)
	app.Version(version.Print(exporterName))
	app.HelpFlag.Short('h')
	if _, err := app.Parse(args); err != nil {
		return nil, flagError(app, args, err)
	}
	f.key = os.Getenv(keyEnv)
	if f.demo && !listenGiven {
		*f.web.WebListenAddresses = []string{demoListenAddress}
	}
	return f, nil
}

// startDemo starts the sample service of --demo, with its faults, and points s at it.
func startDemo(s *settings, listen string, logger *slog.Logger) (*sampleservice.Server, error) {
	demo, err := sampleservice.Start(sampleservice.DefaultOptions())
	if err != nil {
		return nil, err
	}
	s.base, _ = client.ParseBaseURL(demo.URL())
	auth := &config.Authorization{Type: "Token", Credentials: config.Secret(demo.Service.Key())}
	s.target.Client.HTTPClientConfig = config.HTTPClientConfig{Authorization: auth}
	host, port, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	logger.Info("Demo mode: watching the embedded sample service", "url", demo.URL(), "open", "http://"+net.JoinHostPort(host, port)+"/")
	if s.demoFaults.Apply(demo.Service); s.demoFaults.String() != "" {
		logger.Warn("Demo mode: the sample service fails on purpose", "faults", s.demoFaults.String())
	}
	return demo, nil
}

// serve runs srv until a signal stops it, and returns the exit code.
func serve(srv *http.Server, toolkitFlags *web.FlagConfig, logger *slog.Logger) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- web.ListenAndServe(srv, toolkitFlags, logger) }()
	select {
	case err := <-served:
		logger.Error("Server stopped", "err", err)
		return 1
	case sig := <-stop:
		logger.Info("Shutting down", "signal", sig.String())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // for scrapes in flight
		defer cancel()
		_ = srv.Shutdown(ctx)
		return 0
	}
}

// newServer returns the HTTP server for h, with timeouts and open connections bounded below files (0: unbounded).
func newServer(h http.Handler, files uint64) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	var open atomic.Int64
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			// Past a quarter, idle keep-alives lose their slots; past a half, accepting waits a second, then refuses.
			if n := uint64(open.Add(1)); files > 0 && n > files/4 {
				srv.SetKeepAlivesEnabled(false) // closes the idle connections
				srv.SetKeepAlivesEnabled(true)
				for i := 0; i < 10 && uint64(open.Load()) > files/2; i++ {
					time.Sleep(100 * time.Millisecond)
				}
				if uint64(open.Load()) > files/2 {
					_ = c.Close()
				}
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	return srv
}

// newRegistry returns the registry of the metrics kept across scrapes.
func newRegistry(exporterMetrics bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(exporterName))
	if exporterMetrics {
		goCollector := collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/allocs:bytes$`)}))
		// Without go_memstats_alloc_bytes_total, which go_gc_heap_allocs_bytes_total replaces (docs/metrics.md);
		// its descriptor is found once, not by formatting every metric's on each scrape.
		var allocTotal *prometheus.Desc
		descs := make(chan *prometheus.Desc)
		go func() { goCollector.Describe(descs); close(descs) }()
		for d := range descs {
			if strings.Contains(d.String(), `fqName: "go_memstats_alloc_bytes_total"`) {
				allocTotal = d
			}
		}
		withoutAllocTotal := prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
			inner := make(chan prometheus.Metric)
			go func() { goCollector.Collect(inner); close(inner) }()
			for m := range inner {
				if m.Desc() != allocTotal {
					ch <- m
				}
			}
		})
		reg.MustRegister(withoutAllocTotal, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return reg
}

// routes wires every HTTP endpoint; it returns the handler and how to reload.
func routes(s *settings, reg *prometheus.Registry, store *moduleconfig.Store, recent *collector.PollLog, logger *slog.Logger) (http.Handler, func() error, error) {
	s.target.Client.HoldOffs = client.NewHoldOffs() // shared with /probe
	metrics, single, err := metricsHandler(s, reg, recent, logger)
	if err != nil {
		return nil, nil, err
	}
	metrics = limitRequests(s.maxRequests, metrics) // one limit per path: slow probes cannot starve /metrics
	if !s.disableExporterMetrics {
		metrics = promhttp.InstrumentMetricHandler(reg, metrics) // outside the limit, to count its 503s
	}
	mux := http.NewServeMux()
	ui := &pages{metricsPath: s.metricsPath, singleTarget: single, demo: s.demo, recent: recent, logger: logger,
		modules: func() []string { return store.Current().ModuleNames() }}
	if s.metricsPath == "/" {
		mux.Handle("/{$}", metrics) // another path is a 404 and polls nothing
	} else {
		mux.Handle(s.metricsPath, metrics)
		mux.HandleFunc("GET /{$}", ui.landing)
	}
	mux.HandleFunc("GET /polls/{id}", ui.poll)
	mux.HandleFunc("GET /target", ui.target)
	lookup := func(name string) (collector.ProbeModule, error) { // each module its own version, for reloads
		m, err := store.Lookup(name)
		if err != nil {
			return collector.ProbeModule{}, err
		}
		return collector.ProbeModule{Settings: moduleSettings(m), Version: m, CheckTarget: m.CheckTarget}, nil
	}
	probe := collector.NewProbeHandler(lookup, recent, logger.With("handler", "probe"))
	probe.ExternalURL = s.externalURL
	probe.HoldOffs = s.target.Client.HoldOffs
	mux.Handle("/probe", limitRequests(s.maxRequests, probe))
	mux.Handle("GET /sd", serviceDiscovery(store))
	reload := func() error {
		if err := store.Reload(); err != nil {
			logger.Error("Configuration refused; the previous one stays in use", "err", err)
			return err
		}
		probe.Prune()
		return nil
	}
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "Ready") })
	mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, _ *http.Request) {
		if err := reload(); err != nil {
			http.Error(w, "Configuration refused, the previous one stays in use: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprintln(w, "Configuration reloaded")
	})
	return withSecurityHeaders(mux), reload, nil
}

// metricsHandler returns the metrics path's handler and its service's name ("" without one).
func metricsHandler(s *settings, reg *prometheus.Registry, recent *collector.PollLog, logger *slog.Logger) (http.Handler, string, error) {
	if s.base == nil {
		return collector.NewHandler(nil, nil, nil, reg, 0, logger), "", nil
	}
	single := client.RedactURL(s.base)
	s.target.Client.Observer = collector.NewRequestMetrics(reg)
	stats := collector.NewTargetStats(single, collector.TargetPage(s.externalURL, single, ""))
	p, err := collector.NewTargetPoller(s.base, s.target, collector.PollerOptions{Logger: logger.With("target", single),
		Recent: recent, Name: single, Polls: stats, TimeoutName: "--api.timeout"})
	if err != nil {
		return nil, "", err
	}
	return collector.NewHandler(p, collector.NewMetrics(s.target.InfoFields), stats, reg, s.target.Timeout, logger), single, nil
}

// serviceDiscovery answers GET /sd: each module's targets without a "*" (or ?module=<name>'s).
func serviceDiscovery(store *moduleconfig.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cfg, only := store.Current(), r.URL.Query().Get("module")
		if only != "" && cfg.Modules[only] == nil {
			http.Error(w, fmt.Sprintf("unknown module %q: use one of the configuration file's modules", only), http.StatusBadRequest)
			return
		}
		groups := []map[string]any{}
		for _, name := range cfg.ModuleNames() {
			if targets := cfg.Modules[name].ConcreteTargets(); len(targets) > 0 && (only == "" || name == only) {
				groups = append(groups, map[string]any{"targets": targets, "labels": map[string]string{"module": name, "__param_module": name}})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(groups) // an error is the client's going away
	}
}

// limitRequests lets h serve n requests at once (0: no limit); one more gets a 503, as a queue would time out.
func limitRequests(n int, h http.Handler) http.Handler {
	if n <= 0 {
		return h
	}
	inFlight := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
			h.ServeHTTP(w, r)
		default:
			http.Error(w, fmt.Sprintf("Too many scrapes at once (--web.max-requests=%d): try again later", n), http.StatusServiceUnavailable)
		}
	})
}
