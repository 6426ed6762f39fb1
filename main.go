// Command deployment_service_exporter exposes the health, latency and
// inventory counts of a deployment service's JSON API as Prometheus metrics.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
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

const exporterName = "deployment_service_exporter"

// defaultListenAddress lies outside the range Prometheus allocates to exporters.
const defaultListenAddress = ":10044"

// demoListenAddress is --demo's: the demo is for this machine.
const demoListenAddress = "127.0.0.1:10044"

func main() {
	if version.Version == "" {
		version.Version = "devel" // built without the release ldflags
	}
	os.Exit(run(os.Args[1:], sighup.Signals()))
}

// run serves as args ask, reloading on every signal of hup; it returns the exit code.
func run(args []string, hup <-chan os.Signal) int {
	cmd, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", exporterName, err)
		return 2
	}
	if cmd.flags.configCheck {
		return checkConfig(cmd.flags, os.Stdout, os.Stderr)
	}
	logger := promslog.New(cmd.log)
	s, err := validate(cmd.flags)
	if err != nil {
		logger.Error("Invalid configuration", "err", err)
		return 1
	}
	for _, w := range ineffectiveFlags(cmd.flags) {
		logger.Warn("Setting without effect", "detail", w)
	}
	x := build(s, cmd.flags, logger)
	if x == nil {
		return 1
	}
	defer x.close()
	return serve(x, cmd.web, hup, logger)
}

// command is what the command line asks for.
type command struct {
	flags flagValues
	web   *web.FlagConfig
	log   *promslog.Config
}

// parseArgs parses the command line; --help and --version answer and exit.
func parseArgs(args []string) (*command, error) {
	app := kingpin.New(exporterName, "Prometheus exporter for a deployment service's HTTP JSON API.")
	cmd := &command{log: &promslog.Config{}}
	addFlags(app, &cmd.flags)
	cmd.web = kingpinflag.AddFlags(app, defaultListenAddress)
	var listenGiven bool
	app.GetFlag("web.listen-address").IsSetByUser(&listenGiven)
	flag.AddFlags(app, cmd.log)
	app.UsageWriter(os.Stdout)
	app.Version(version.Print(exporterName))
	app.HelpFlag.Short('h')
	nameFlagErrors(app)
	if _, err := app.Parse(args); err != nil {
		if m := switchWithValue(app, args); m != "" {
			return nil, errors.New(m)
		}
		return nil, err
	}
	cmd.flags.key = os.Getenv(keyEnv)
	if cmd.flags.demo && !listenGiven {
		*cmd.web.WebListenAddresses = []string{demoListenAddress}
	}
	return cmd, nil
}

// addFlags defines the exporter's own flags on app, parsed into f.
func addFlags(app *kingpin.Application, f *flagValues) {
	app.Flag("api.url", "Base URL of the deployment service, with any path prefix (required unless --demo or --config.file).").Envar("DEPLOYMENT_SERVICE_URL").StringVar(&f.apiURL)
	app.Flag("api.key-file", "File holding the API key (surrounding whitespace trimmed); re-read on every request, so a rotated key needs no restart. Or set the key itself in "+keyEnv+".").Envar("DEPLOYMENT_SERVICE_API_KEY_FILE").StringVar(&f.keyFile)
	app.Flag("api.timeout", "Upper bound for one poll of the API; Prometheus' scrape timeout header lowers it.").Default(defaultTimeout.String()).SetValue((*durationValue)(&f.timeout))
	app.Flag("api.concurrency", "Most requests in flight to the API at once during one poll.").Default(strconv.Itoa(client.DefaultConcurrency)).SetValue((*intValue)(&f.concurrency))
	app.Flag("api.max-pages", "Most pages followed for one list.").Default(strconv.Itoa(client.DefaultMaxPages)).SetValue((*intValue)(&f.maxPages))
	app.Flag("api.max-response-bytes", "Largest response body read, in bytes or with a unit (64MiB); a larger body is a too_large error.").Default("64MiB").SetValue(&f.maxResponseBytes)
	app.Flag("api.rate-limit", "Most requests per second sent to the API (0 = no limit).").Default("0").SetValue((*float64Value)(&f.rateLimit))
	app.Flag("api.gzip", "Ask the service for gzip-compressed answers (--no-api.gzip: do not); --api.max-response-bytes bounds the decompressed body.").Default("true").BoolVar(&f.gzip)
	app.Flag("api.min-interval", "Least time between the starts of two polls; scrapes inside it are answered from the last poll (0 = poll on every scrape).").Default("0s").SetValue((*durationValue)(&f.minInterval))
	app.Flag("locations.detail-id", "Location id whose detail view is read on every scrape; repeatable. Each id adds per-location series.").IsSetByUser(&f.locationsGiven).SetValue((*int64ListValue)(&f.detailIDs))
	app.Flag("locations.detail-limit", "When no --locations.detail-id is given: read the detail views of the first N locations of the list (0 = none).").IsSetByUser(&f.locationsGiven).Default("0").SetValue((*intValue)(&f.detailLimit))
	app.Flag("locations.info-field", "Top-level scalar field of the detail view to expose as a label of deployment_service_location_info; repeatable.").IsSetByUser(&f.locationsGiven).StringsVar(&f.infoFields)
	app.Flag("api.http-config.file", "YAML file of prometheus/common HTTP client settings (tls_config, proxy_url, http_headers, ...) for the service behind /metrics; an authorization of type Token in it replaces the key flags.").StringVar(&f.httpConfigFile)
	app.Flag("config.file", "YAML file of modules for /probe; reloaded on SIGHUP and POST /-/reload.").StringVar(&f.configFile)
	app.Flag("config.check", "Check --config.file, --api.http-config.file and the other flags as a start would (building every module's HTTP client), print what is wrong or OK, and exit 1 or 0 without serving.").BoolVar(&f.configCheck)
	app.Flag("demo", fmt.Sprintf("Start an embedded sample deployment service on loopback and watch it; no URL or key needed. Unless --locations.* flags are given, it watches the details of %d locations with info field %s. Listens on %s unless --web.listen-address is given.", demoDetailLimit, demoInfoField, demoListenAddress)).BoolVar(&f.demo)
	app.Flag("demo.fault", "Make the sample service of --demo fail on purpose, as ENDPOINT:FAULT; repeatable. ENDPOINT: root, projects, locations, location_detail (every detail view) or location_detail/<id>. FAULT: 401, 403, 404, 500, 502, 503, 429/<seconds> or 503/<seconds> (with that Retry-After), or delay/<duration>, such as projects:delay/2.5s.").SetValue(&f.demoFaults)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.metricsPath)
	app.Flag("web.external-url", "URL under which people reach the exporter's pages (through a proxy, say), such as https://exporter.example.com/; deployment_service_target_info then carries a page label linking to the exporter's page about each target, which alerts show.").StringVar(&f.externalURL)
	app.Flag("web.disable-exporter-metrics", "Leave the go_*, process_* and promhttp_* metrics out of the metrics path.").BoolVar(&f.disableExporterMetrics)
	app.Flag("web.max-requests", "Most scrape requests served at once on the metrics path, and as many on /probe; more get a 503 (0 = no limit).").Default(strconv.Itoa(defaultMaxRequests)).SetValue((*intValue)(&f.maxRequests))
}

// endpoints is what build puts together for serve.
type endpoints struct {
	handler http.Handler
	reload  func() error
	close   func() // stops the sample service of --demo
}

// build turns the settings into handlers, starting the sample service with
// --demo. On failure it logs why and returns nil.
func build(s *settings, f flagValues, logger *slog.Logger) *endpoints {
	reg := newRegistry(s.exporterMetrics)
	store := moduleconfig.NewStore(f.configFile, reg, logger)
	if err := store.Reload(); err != nil {
		logger.Error("Invalid configuration", "err", err)
		return nil
	}
	logger.Info("Starting "+exporterName, "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())

	x := &endpoints{close: func() {}}
	if f.demo {
		demo, err := startDemo(s, logger)
		if err != nil {
			logger.Error("Cannot start the sample service", "err", err)
			return nil
		}
		x.close = func() { _ = demo.Close() }
	}

	recent := collector.NewPollLog(collector.DefaultRecentPolls)
	mux, reload, err := routes(s, f.metricsPath, reg, store, recent, logger)
	if err != nil {
		x.close()
		logger.Error("Invalid configuration", "err", err)
		return nil
	}
	x.handler, x.reload = mux, reload
	return x
}

// startDemo starts the sample service of --demo with its faults, and points
// the settings of the metrics path at it.
func startDemo(s *settings, logger *slog.Logger) (*sampleservice.Server, error) {
	demo, err := sampleservice.Start(sampleservice.DefaultOptions())
	if err != nil {
		return nil, err
	}
	s.base, _ = parseBaseURL(demo.URL())
	s.demoURL = demo.URL()
	s.target.Client.HTTPClientConfig = config.HTTPClientConfig{
		Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(demo.Service.Key())},
	}
	logger.Info("Demo mode: watching the embedded sample service", "url", demo.URL())
	for v, fault := range s.demoFaults.faults {
		if v.id > 0 {
			demo.Service.SetDetailFault(v.id, fault)
		} else {
			demo.Service.SetFault(v.endpoint, fault)
		}
	}
	if len(s.demoFaults.specs) > 0 {
		logger.Warn("Demo mode: the sample service fails on purpose", "faults", s.demoFaults.String())
	}
	return demo, nil
}

// serve answers HTTP with x until the server stops, and returns the exit code.
func serve(x *endpoints, toolkitFlags *web.FlagConfig, hup <-chan os.Signal, logger *slog.Logger) int {
	go reloadOnSignal(hup, x.reload, logger)
	srv := newServer(x.handler)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	// shutDown is closed once the scrapes in flight at a signal have answered.
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		sig := <-stop
		logger.Info("Shutting down", "signal", sig.String())
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	err := web.ListenAndServe(srv, toolkitFlags, logger)
	if errors.Is(err, http.ErrServerClosed) {
		<-shutDown
		return 0
	}
	logger.Error("Server stopped", "err", err)
	return 1
}

// newServer returns the HTTP server for h, with timeouts so clients cannot hold its fds.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
}

// shutdownGrace is how long scrapes in flight may take to answer after SIGTERM.
const shutdownGrace = 5 * time.Second

// newRegistry returns the registry of the metrics kept across scrapes.
func newRegistry(exporterMetrics bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(exporterName))
	if exporterMetrics {
		reg.MustRegister(
			// go_gc_heap_allocs_bytes_total stands in for go_memstats_alloc_bytes_total,
			// which clashes with go_memstats_alloc_bytes (docs/metrics.md).
			withoutMetric{
				Collector: collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
					collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/allocs:bytes$`)})),
				name: "go_memstats_alloc_bytes_total",
			},
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	return reg
}

// withoutMetric is a collector with the metrics of one name left out.
type withoutMetric struct {
	prometheus.Collector
	name string
}

func (c withoutMetric) Collect(ch chan<- prometheus.Metric) {
	inner := make(chan prometheus.Metric)
	go func() {
		c.Collector.Collect(inner)
		close(inner)
	}()
	for m := range inner {
		if !strings.Contains(m.Desc().String(), `fqName: "`+c.name+`"`) {
			ch <- m
		}
	}
}

// routes wires every HTTP endpoint; it returns the handler and how to reload.
func routes(s *settings, metricsPath string, reg *prometheus.Registry, store *moduleconfig.Store, recent *collector.PollLog, logger *slog.Logger) (http.Handler, func() error, error) {
	mux := http.NewServeMux()
	s.target.Client.HoldOffs = client.NewHoldOffs() // shared with /probe
	metrics, single, err := metricsHandler(s, reg, recent, logger)
	if err != nil {
		return nil, nil, err
	}
	// A limit for each path, so that slow probes cannot starve /metrics.
	metrics = newScrapeLimit(s.maxRequests).wrap(metrics)
	if s.exporterMetrics {
		// Outside the limit, so that the 503s it answers are counted.
		metrics = promhttp.InstrumentMetricHandler(reg, metrics)
	}
	// At the root, metrics answer / alone: another path is a 404 and polls nothing.
	pattern := metricsPath
	if metricsPath == "/" {
		pattern = "/{$}"
	}
	mux.Handle(pattern, metrics)
	probe := collector.NewProbeHandler(probeLookup(store), recent, logger.With("handler", "probe"))
	probe.ExternalURL = s.externalURL
	probe.HoldOffs = s.target.Client.HoldOffs
	mux.Handle("/probe", newScrapeLimit(s.maxRequests).wrap(probe))
	mux.Handle("GET /sd", serviceDiscovery(store, logger))
	// After a reload, targets of changed or removed modules go at once.
	reload := func() error {
		if err := store.Reload(); err != nil {
			return err
		}
		probe.Prune()
		return nil
	}
	lifecycleRoutes(mux, store.Ready, reload, logger)
	ui := &pages{metricsPath: metricsPath, singleTarget: single, demo: s.demoURL, modules: store.ModuleNames, recent: recent, logger: logger}
	mux.HandleFunc("GET /polls/{id}", ui.poll)
	if metricsPath != "/" {
		mux.HandleFunc("GET /{$}", ui.landing)
	}
	return withSecurityHeaders(mux), reload, nil
}

// metricsHandler returns the handler of the metrics path and the name of
// the service behind it ("": none, only the exporter's own metrics).
func metricsHandler(s *settings, reg *prometheus.Registry, recent *collector.PollLog, logger *slog.Logger) (http.Handler, string, error) {
	if s.base == nil {
		return collector.NewGathererHandler(reg, logger), "", nil
	}
	single := client.RedactURL(s.base)
	requests := collector.NewRequestMetrics(reg)
	s.target.Client.Observer = requests
	p, err := collector.NewTargetPoller(s.base, s.target, collector.PollerOptions{
		Logger: logger.With("target", single, "module", collector.ModuleName("")), Recent: recent, Name: single,
		Polls: requests, TimeoutName: "--api.timeout",
	})
	if err != nil {
		return nil, "", err
	}
	page := ""
	if s.externalURL != nil {
		page = collector.PageURL(s.externalURL, "")
	}
	reg.MustRegister(collector.NewTargetInfo(single, page))
	return collector.NewHandler(p, collector.NewMetrics(s.target.InfoFields), reg, s.target.Timeout, logger), single, nil
}

// lifecycleRoutes adds /-/healthy, /-/ready and /-/reload to mux.
func lifecycleRoutes(mux *http.ServeMux, ready func() bool, reload func() error, logger *slog.Logger) {
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "Not ready: no configuration loaded", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "Ready")
	})
	// Other methods get a 405 with Allow: POST from the mux.
	mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, _ *http.Request) {
		if err := reload(); err != nil {
			logger.Error("Configuration refused; the previous one stays in use", "err", err)
			http.Error(w, "Configuration refused, the previous one stays in use: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprintln(w, "Configuration reloaded")
	})
}

// scrapeLimit bounds the requests served at once (nil: no limit). One over
// gets a 503 at once: a queue would only pile up scrapes that time out.
type scrapeLimit chan struct{}

func newScrapeLimit(n int) scrapeLimit {
	if n <= 0 {
		return nil
	}
	return make(scrapeLimit, n)
}

func (l scrapeLimit) wrap(h http.Handler) http.Handler {
	if l == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case l <- struct{}{}:
			defer func() { <-l }()
			h.ServeHTTP(w, r)
		default:
			http.Error(w, fmt.Sprintf("Too many scrapes at once (--web.max-requests=%d): try again later", cap(l)), http.StatusServiceUnavailable)
		}
	})
}

// reloadOnSignal reloads the configuration file on every signal of hup,
// those queued while the exporter started included.
func reloadOnSignal(hup <-chan os.Signal, reload func() error, logger *slog.Logger) {
	for range hup {
		if err := reload(); err != nil {
			logger.Error("Configuration refused; the previous one stays in use", "err", err)
		}
	}
}
