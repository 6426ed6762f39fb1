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

// defaultListenAddress lies outside the 9100–9999 range that Prometheus
// allocates to exporters, so it cannot collide with a registered one.
const defaultListenAddress = ":10044"

func main() {
	if version.Version == "" {
		// Built without the release ldflags (go run, go build): say so in
		// the User-Agent and build info instead of leaving them blank.
		version.Version = "devel"
	}
	// SIGHUPs are caught from the process's first moments (package
	// sighup); those that came before the configuration could be
	// reloaded wait in the channel and reload it once serving.
	os.Exit(runService(func() int { return run(os.Args[1:], sighup.Signals()) }))
}

// run parses args, validates them and serves until the server fails,
// reloading the configuration on every signal of hup. It returns the
// process exit code.
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
	x, err := build(s, cmd.flags, logger)
	if err != nil {
		msg := "Invalid configuration"
		var se *startError
		if errors.As(err, &se) {
			msg, err = se.msg, se.err
		}
		logger.Error(msg, "err", err)
		return 1
	}
	defer x.close()
	return serve(x, cmd.web, hup, logger)
}

// command is what the command line asks for: the exporter's own flags,
// the toolkit's listen flags and the log settings.
type command struct {
	flags flagValues
	web   *web.FlagConfig
	log   *promslog.Config
}

// parseArgs parses the command line. --help and --version answer and exit
// inside; any other error is the one to print before exiting with 2.
func parseArgs(args []string) (*command, error) {
	app := kingpin.New(exporterName, "Prometheus exporter for a deployment service's HTTP JSON API.")
	cmd := &command{log: &promslog.Config{}}
	locationsGiven := addFlags(app, &cmd.flags)
	cmd.web = kingpinflag.AddFlags(app, defaultListenAddress)
	flag.AddFlags(app, cmd.log)
	// --version and --help are answers, not errors: they go to stdout.
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
	cmd.flags.locationsGiven = locationsGiven[0] || locationsGiven[1] || locationsGiven[2]
	return cmd, nil
}

// addFlags defines the exporter's own flags on app, parsed into f. The
// flags of the returned array are set when the corresponding --locations.*
// flag is on the command line.
func addFlags(app *kingpin.Application, f *flagValues) *[3]bool {
	var given [3]bool
	app.Flag("api.url", "Base URL of the deployment service, with any path prefix (required unless --demo or --config.file).").Envar("DEPLOYMENT_SERVICE_URL").StringVar(&f.apiURL)
	app.Flag("api.key-file", "File holding the API key (surrounding whitespace trimmed); re-read on every request, so a rotated key needs no restart. Or set the key itself in "+keyEnv+".").Envar("DEPLOYMENT_SERVICE_API_KEY_FILE").StringVar(&f.keyFile)
	app.Flag("api.timeout", "Upper bound for one poll of the API; Prometheus' scrape timeout header lowers it.").Default(defaultTimeout.String()).SetValue((*durationValue)(&f.timeout))
	app.Flag("api.concurrency", "Most requests in flight to the API at once during one poll.").Default(strconv.Itoa(client.DefaultConcurrency)).SetValue((*intValue)(&f.concurrency))
	app.Flag("api.max-pages", "Most pages followed for one list.").Default(strconv.Itoa(client.DefaultMaxPages)).SetValue((*intValue)(&f.maxPages))
	app.Flag("api.max-response-bytes", "Largest response body read, in bytes or with a unit (64MiB); a larger body is a too_large error.").Default("64MiB").SetValue(&f.maxResponseBytes)
	app.Flag("api.rate-limit", "Most requests per second sent to the API (0 = no limit).").Default("0").SetValue((*float64Value)(&f.rateLimit))
	app.Flag("api.gzip", "Ask the service for gzip-compressed answers (--no-api.gzip: do not); --api.max-response-bytes bounds the decompressed body.").Default("true").BoolVar(&f.gzip)
	app.Flag("api.min-interval", "Least time between the starts of two polls; scrapes inside it are answered from the last poll (0 = poll on every scrape).").Default("0s").SetValue((*durationValue)(&f.minInterval))
	app.Flag("locations.detail-id", "Location id whose detail view is read on every scrape; repeatable. Each id adds per-location series.").IsSetByUser(&given[0]).SetValue((*int64ListValue)(&f.detailIDs))
	app.Flag("locations.detail-limit", "When no --locations.detail-id is given: read the detail views of the first N locations of the list (0 = none).").IsSetByUser(&given[1]).Default("0").SetValue((*intValue)(&f.detailLimit))
	app.Flag("locations.info-field", "Top-level scalar field of the detail view to expose as a label of deployment_service_location_info; repeatable.").IsSetByUser(&given[2]).StringsVar(&f.infoFields)
	app.Flag("api.http-config.file", "YAML file of prometheus/common HTTP client settings (tls_config, proxy_url, http_headers, ...) for the service behind /metrics; an authorization of type Token in it replaces the key flags.").StringVar(&f.httpConfigFile)
	app.Flag("config.file", "YAML file of modules for /probe; reloaded on SIGHUP and POST /-/reload.").StringVar(&f.configFile)
	app.Flag("config.check", "Check --config.file, --api.http-config.file and the other flags as a start would (building every module's HTTP client), print what is wrong or OK, and exit 1 or 0 without serving.").BoolVar(&f.configCheck)
	app.Flag("demo", fmt.Sprintf("Start an embedded sample deployment service on loopback and watch it; no URL or key needed. Unless --locations.* flags are given, it watches the details of %d locations with info field %s.", demoDetailLimit, demoInfoField)).BoolVar(&f.demo)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.metricsPath)
	app.Flag("web.external-url", "URL under which people reach the exporter's pages (through a proxy, say), such as https://exporter.example.com/; deployment_service_target_info then carries a page label linking to the exporter's page about each target, which alerts show.").StringVar(&f.externalURL)
	app.Flag("web.disable-exporter-metrics", "Leave the go_*, process_* and promhttp_* metrics out of the metrics path.").BoolVar(&f.disableExporterMetrics)
	app.Flag("web.max-requests", "Most scrape requests (metrics path and /probe together) served at once; more get a 503 (0 = no limit).").Default(strconv.Itoa(defaultMaxRequests)).SetValue((*intValue)(&f.maxRequests))
	return &given
}

// endpoints is what build puts together for serve.
type endpoints struct {
	handler http.Handler
	// reload reloads the configuration file, as SIGHUP and POST /-/reload do.
	reload func() error
	// close releases what build started (the sample service of --demo).
	close func()
}

// startError is a failure of build with the message it is logged under.
type startError struct {
	msg string
	err error
}

func (e *startError) Error() string { return e.msg + ": " + e.err.Error() }

func (e *startError) Unwrap() error { return e.err }

// build turns the validated settings into the registry, the configuration
// store and the handlers of every endpoint, starting the sample service
// first with --demo.
func build(s *settings, f flagValues, logger *slog.Logger) (*endpoints, error) {
	reg := newRegistry(s.exporterMetrics)
	store := moduleconfig.NewStore(f.configFile, reg, logger)
	if err := store.Reload(); err != nil {
		return nil, &startError{"Invalid configuration", err}
	}
	logger.Info("Starting "+exporterName, "version", version.Info())
	logger.Info("Build context", "build_context", version.BuildContext())

	x := &endpoints{close: func() {}}
	if f.demo {
		demo, err := sampleservice.Start(sampleservice.DefaultOptions())
		if err != nil {
			return nil, &startError{"Cannot start the sample service", err}
		}
		// The process is ending: nothing is left to tell of a failure.
		x.close = func() { _ = demo.Close() }
		s.base, _ = parseBaseURL(demo.URL())
		s.demoURL = demo.URL()
		s.target.Client.HTTPClientConfig = config.HTTPClientConfig{
			Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(demo.Service.Key())},
		}
		logger.Info("Demo mode: watching the embedded sample service", "url", demo.URL())
	}

	recent := collector.NewPollLog(collector.DefaultRecentPolls)
	mux, reload, err := routes(s, f.metricsPath, reg, store, recent, logger)
	if err != nil {
		x.close()
		return nil, &startError{"Invalid configuration", err}
	}
	x.handler, x.reload = mux, reload
	return x, nil
}

// serve answers HTTP with x, reloading the configuration file on every
// signal of hup, until the server fails. It returns the process exit code.
func serve(x *endpoints, toolkitFlags *web.FlagConfig, hup <-chan os.Signal, logger *slog.Logger) int {
	go reloadOnSignal(hup, x.reload, logger)
	srv := &http.Server{Handler: x.handler, ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	// shutDown is closed once the server has stopped after a signal, its
	// scrapes in flight answered: Serve returns as soon as it begins.
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		sig := <-stop
		logger.Info("Shutting down", "signal", sig.String())
		// Scrapes in flight get a moment to answer; a service manager
		// that waits longer than that kills the process anyway.
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

// shutdownGrace is how long scrapes in flight may take to answer once a
// SIGTERM asks the exporter to stop.
const shutdownGrace = 5 * time.Second

// newRegistry returns the registry of the metrics kept across scrapes,
// with the build info and, unless --web.disable-exporter-metrics, the Go
// runtime and process metrics.
func newRegistry(exporterMetrics bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(exporterName))
	if exporterMetrics {
		reg.MustRegister(
			withoutMetric{
				// The runtime's own name for the heap's allocated bytes,
				// in place of the memstats counter left out below.
				Collector: collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
					collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/allocs:bytes$`)})),
				// A counter go_memstats_alloc_bytes_total beside the gauge
				// go_memstats_alloc_bytes makes one OpenMetrics family
				// twice (client_golang#829): strict parsers refuse the
				// whole answer, and Prometheus 3 records the gauge's
				// metadata as a counter's.
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

func (c withoutMetric) Describe(ch chan<- *prometheus.Desc) {
	inner := make(chan *prometheus.Desc)
	go func() {
		c.Collector.Describe(inner)
		close(inner)
	}()
	for d := range inner {
		if !strings.Contains(d.String(), `fqName: "`+c.name+`"`) {
			ch <- d
		}
	}
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

// routes wires every HTTP endpoint of the exporter. It returns the mux and
// how to reload the configuration file, as SIGHUP and POST /-/reload do.
func routes(s *settings, metricsPath string, reg *prometheus.Registry, store *moduleconfig.Store, recent *collector.PollLog, logger *slog.Logger) (*http.ServeMux, func() error, error) {
	mux := http.NewServeMux()
	metrics := collector.NewGathererHandler(reg, logger)
	single := ""
	if s.base != nil {
		single = client.RedactURL(s.base)
		// Only with a single target: without one there are no requests
		// to count, and /metrics has just the exporter's own metrics.
		requests := collector.NewRequestMetrics(reg)
		s.target.Client.Observer = requests
		p, err := collector.NewTargetPoller(s.base, s.target, collector.PollerOptions{
			Logger: logger.With("target", single, "module", collector.ModuleName("")), Recent: recent, Name: single,
			Polls: requests, TimeoutName: "--api.timeout",
		})
		if err != nil {
			return nil, nil, err
		}
		// Kept across scrapes like the request metrics: the service's name
		// for alerts, as every /probe answer carries its target's.
		page := ""
		if s.externalURL != nil {
			page = collector.PageURL(s.externalURL, "")
		}
		reg.MustRegister(collector.NewTargetInfo(single, page))
		metrics = collector.NewHandler(p, collector.NewMetrics(s.target.InfoFields), reg, s.target.Timeout, logger)
	}
	limit := newScrapeLimit(s.maxRequests)
	metrics = limit.wrap(metrics)
	if s.exporterMetrics {
		// Outside the limit, so that the 503s it answers are counted.
		metrics = promhttp.InstrumentMetricHandler(reg, metrics)
	}
	mux.Handle(metricsPath, metrics)
	probe := collector.NewProbeHandler(probeLookup(store), recent, logger.With("handler", "probe"))
	probe.ExternalURL = s.externalURL
	mux.Handle("/probe", limit.wrap(probe))
	mux.Handle("GET /sd", serviceDiscovery(store, logger))
	// After a reload, the targets of changed or removed modules go at once,
	// with their connections, rather than when next probed.
	reload := func() error {
		if err := store.Reload(); err != nil {
			return err
		}
		probe.Prune()
		return nil
	}
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !store.Ready() {
			http.Error(w, "Not ready: no configuration loaded", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "Use POST to reload the configuration", http.StatusMethodNotAllowed)
			return
		}
		if err := reload(); err != nil {
			logger.Error("Configuration refused; the previous one stays in use", "err", err)
			http.Error(w, "Configuration refused, the previous one stays in use: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprintln(w, "Configuration reloaded")
	})
	ui := &pages{metricsPath: metricsPath, singleTarget: single, demo: s.demoURL, modules: store.ModuleNames, recent: recent, logger: logger}
	mux.HandleFunc("GET /polls/{id}", ui.poll)
	if metricsPath != "/" {
		mux.HandleFunc("GET /{$}", ui.landing)
	}
	return mux, reload, nil
}

// scrapeLimit bounds the scrape requests served at once across the
// handlers it wraps, as --web.max-requests asks. A request over the limit
// gets a 503 at once rather than a place in a queue: Prometheus retries on
// its next interval, and a queue would only pile up scrapes that time out.
// A nil scrapeLimit is no limit.
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
// for the life of the process. A signal queued while the exporter started
// reloads at once, so a file changed meanwhile is read.
func reloadOnSignal(hup <-chan os.Signal, reload func() error, logger *slog.Logger) {
	for range hup {
		if err := reload(); err != nil {
			logger.Error("Configuration refused; the previous one stays in use", "err", err)
		}
	}
}
