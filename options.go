package main

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/config"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
)

// defaultTimeout is the default of --api.timeout, a module's too.
const defaultTimeout = moduleconfig.DefaultTimeout

// keyEnv holds the API key itself. There is deliberately no flag for it,
// so the key never shows in a process list.
const keyEnv = "DEPLOYMENT_SERVICE_API_KEY"

// flagValues are the raw command-line settings, before validation.
type flagValues struct {
	apiURL           string
	keyFile          string
	key              string // from the environment only
	timeout          time.Duration
	concurrency      int
	maxPages         int
	maxResponseBytes byteSize
	detailIDs        []int64
	detailLimit      int
	infoFields       []string
	rateLimit        float64
	minInterval      time.Duration
	gzip             bool
	demo             bool
	demoFaults       demoFaults
	configFile       string
	configCheck      bool
	metricsPath      string
	externalURL      string

	httpConfigFile         string
	disableExporterMetrics bool
	maxRequests            int
	// locationsGiven is true when any --locations.* flag is on the
	// command line: then --demo takes them as given, not its own subset.
	locationsGiven bool
}

// Demo defaults, so that every dashboard panel has data: a detail subset
// and the info field the dashboards label locations with.
const (
	demoDetailLimit = 5
	demoInfoField   = "name"
)

// defaultMaxRequests is the default of --web.max-requests, node_exporter's.
const defaultMaxRequests = 40

// settings is the validated configuration of the single target behind
// /metrics. base is nil when no single target is configured.
type settings struct {
	base   *url.URL
	target collector.TargetSettings
	// demoURL is the embedded sample service's base URL with --demo.
	demoURL string
	// demoFaults make the sample service fail on purpose.
	demoFaults demoFaults
	// externalURL is where people reach the exporter, nil when unknown.
	externalURL *url.URL
	// maxRequests bounds the scrapes (/metrics and /probe) served at once;
	// 0 is no limit.
	maxRequests int
	// exporterMetrics adds the go_*, process_* and promhttp_* metrics.
	exporterMetrics bool
}

// validate checks the flags and returns one error naming what to fix:
// first the limits, then the service to watch.
func validate(f flagValues) (*settings, error) {
	if err := validateLimits(f); err != nil {
		return nil, err
	}
	s := &settings{
		target: collector.TargetSettings{
			Client: client.Config{
				Concurrency:      f.concurrency,
				MaxPages:         f.maxPages,
				MaxResponseBytes: int64(f.maxResponseBytes),
				RateLimit:        f.rateLimit,
				DisableGzip:      !f.gzip,
			},
			DetailIDs:   f.detailIDs,
			DetailLimit: f.detailLimit,
			InfoFields:  f.infoFields,
			Timeout:     f.timeout,
			MinInterval: f.minInterval,
		},
		maxRequests:     f.maxRequests,
		exporterMetrics: !f.disableExporterMetrics,
	}
	if err := validateTarget(f, s); err != nil {
		return nil, err
	}
	if f.externalURL != "" {
		u, err := url.Parse(f.externalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, errors.New("--web.external-url must be an absolute http or https URL without credentials, query or fragment, such as https://exporter.example.com/")
		}
		s.externalURL = u
	}
	return s, nil
}

// validateLimits checks the numeric flags, the ranges they take and the
// flags that exclude one another.
func validateLimits(f flagValues) error {
	// In the order they are checked: the first that fails is reported.
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{f.timeout <= 0, "--api.timeout must be positive, such as 10s"},
		{f.concurrency < 1, "--api.concurrency must be at least 1"},
		{f.maxPages < 1, "--api.max-pages must be at least 1"},
		{f.maxResponseBytes < 1, "--api.max-response-bytes must be positive, such as 64MiB"},
		{f.detailLimit < 0, "--locations.detail-limit must be 0 (none) or more"},
		{f.rateLimit < 0 || math.IsNaN(f.rateLimit) || math.IsInf(f.rateLimit, 0), "--api.rate-limit must be 0 (no limit) or more requests per second"},
		{f.minInterval < 0, "--api.min-interval must be 0 (poll on every scrape) or more"},
		{len(f.detailIDs) > 0 && f.detailLimit > 0, "--locations.detail-id and --locations.detail-limit conflict: give ids or a limit, not both"},
		{f.maxRequests < 0, "--web.max-requests must be 0 (no limit) or more"},
		{len(f.demoFaults.specs) > 0 && !f.demo, "--demo.fault makes the sample service of --demo fail: add --demo, or drop --demo.fault"},
	} {
		if c.bad {
			return errors.New(c.msg)
		}
	}
	if err := validateMetricsPath(f.metricsPath); err != nil {
		return err
	}
	for _, id := range f.detailIDs {
		if id < 0 {
			return fmt.Errorf("--locations.detail-id %d: ids are non-negative integers", id)
		}
	}
	if err := moduleconfig.ValidateInfoFields(f.infoFields); err != nil {
		return fmt.Errorf("--locations.info-field %w", err)
	}
	return nil
}

// validateTarget checks the service behind /metrics (its URL, key and
// HTTP client file) and completes s with it. In demo mode the URL and key
// come from the sample service later; with only --config.file there is no
// such service, and s.base stays nil.
func validateTarget(f flagValues, s *settings) error {
	if f.demo {
		if f.apiURL != "" {
			return errors.New("--demo watches its own sample service: drop --api.url (or DEPLOYMENT_SERVICE_URL)")
		}
		s.demoFaults = f.demoFaults
		if !f.locationsGiven {
			s.target.DetailLimit = demoDetailLimit
			s.target.InfoFields = []string{demoInfoField}
		}
		return nil
	}
	if f.apiURL == "" {
		if f.configFile != "" {
			// Only /probe targets from the configuration file.
			return nil
		}
		return errors.New("no service to watch: set --api.url (or DEPLOYMENT_SERVICE_URL), or use --demo")
	}
	base, err := parseBaseURL(f.apiURL)
	if err != nil {
		return err
	}
	hc, err := httpClientConfig(f)
	if err != nil {
		return err
	}
	s.base = base
	s.target.Client.HTTPClientConfig = *hc
	return nil
}

// httpClientConfig returns the HTTP client settings of the service behind
// /metrics: those of --api.http-config.file, if given, with the key from
// the key flags unless the file has its own authorization.
func httpClientConfig(f flagValues) (*config.HTTPClientConfig, error) {
	keyGiven := strings.TrimSpace(f.key) != "" || f.keyFile != ""
	if f.httpConfigFile == "" {
		auth, err := keyAuthorization(f.key, f.keyFile)
		if err != nil {
			return nil, err
		}
		// prometheus/common's defaults, as a module and the file start
		// from: HTTP/2 is the same whichever way the client is set up.
		hc := config.DefaultHTTPClientConfig
		hc.Authorization = auth
		return &hc, nil
	}
	hc, err := moduleconfig.LoadHTTPClientConfig(f.httpConfigFile)
	if err != nil {
		return nil, fmt.Errorf("--api.http-config.file %s: %w", f.httpConfigFile, err)
	}
	switch {
	case hc.Authorization != nil && keyGiven:
		other := keyEnv
		if f.keyFile != "" {
			other = "--api.key-file"
		}
		return nil, fmt.Errorf("--api.http-config.file has an authorization and %s gives a key too: keep the key in one place", other)
	case hc.Authorization != nil:
		return hc, nil
	case !keyGiven:
		return nil, fmt.Errorf("no API key: set %s or --api.key-file, or an authorization of type Token in --api.http-config.file", keyEnv)
	}
	auth, err := keyAuthorization(f.key, f.keyFile)
	if err != nil {
		return nil, err
	}
	hc.Authorization = auth
	return hc, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	u, err := client.ParseBaseURL(raw)
	if errors.Is(err, client.ErrURLCredentials) {
		return nil, fmt.Errorf("--api.url (or DEPLOYMENT_SERVICE_URL): %w: give the key through --api.key-file or %s", err, keyEnv)
	}
	if err != nil {
		return nil, fmt.Errorf("--api.url (or DEPLOYMENT_SERVICE_URL): %w", err)
	}
	return u, nil
}

// keyAuthorization turns the key source into a Token authorization. A key
// file is read once here to fail early, then re-read on every request, so a
// rotated key (even one swapped in by a rename) needs no restart.
func keyAuthorization(key, keyFile string) (*config.Authorization, error) {
	key = strings.TrimSpace(key)
	switch {
	case key != "" && keyFile != "":
		return nil, fmt.Errorf("both %s and --api.key-file are set: use one", keyEnv)
	case keyFile != "":
		if _, err := client.ReadKeyFile(keyFile); err != nil {
			return nil, fmt.Errorf("--api.key-file: %w", err)
		}
		return &config.Authorization{Type: "Token", CredentialsFile: keyFile}, nil
	case key != "":
		if !client.ValidKey(key) {
			return nil, fmt.Errorf("%s has control characters such as a line break inside it: set the key alone", keyEnv)
		}
		return &config.Authorization{Type: "Token", Credentials: config.Secret(key)}, nil
	}
	return nil, fmt.Errorf("no API key: set %s or --api.key-file", keyEnv)
}

// ineffectiveFlags names the settings given that cannot have an effect,
// for a warning: they are harmless, but their author expects something.
func ineffectiveFlags(f flagValues) []string {
	var out []string
	if len(f.infoFields) > 0 && len(f.detailIDs) == 0 && f.detailLimit == 0 && (f.demo || f.apiURL != "") {
		out = append(out, "--locations.info-field labels the detail subset, and there is none: add --locations.detail-id or --locations.detail-limit")
	}
	if f.demo {
		if strings.TrimSpace(f.key) != "" || f.keyFile != "" {
			out = append(out, "the API key ("+keyEnv+" or --api.key-file) is ignored with --demo, which generates its own")
		}
		if f.httpConfigFile != "" {
			out = append(out, "--api.http-config.file is ignored with --demo, whose sample service speaks plain HTTP on loopback")
		}
		return out
	}
	if f.apiURL != "" {
		return out
	}
	var given []string
	for name, set := range map[string]bool{
		"--api.key-file (or " + keyEnv + ")": f.keyFile != "" || strings.TrimSpace(f.key) != "",
		"--locations.detail-id":              len(f.detailIDs) > 0,
		"--locations.detail-limit":           f.detailLimit > 0,
		"--locations.info-field":             len(f.infoFields) > 0,
		"--api.rate-limit":                   f.rateLimit > 0,
		"--api.min-interval":                 f.minInterval > 0,
		"--api.timeout":                      f.timeout != defaultTimeout,
		"--api.concurrency":                  f.concurrency != client.DefaultConcurrency,
		"--api.max-pages":                    f.maxPages != client.DefaultMaxPages,
		"--api.max-response-bytes":           int64(f.maxResponseBytes) != client.DefaultMaxResponseBytes,
		"--api.http-config.file":             f.httpConfigFile != "",
		"--no-api.gzip":                      !f.gzip,
	} {
		if set {
			given = append(given, name)
		}
	}
	if len(given) > 0 {
		slices.Sort(given)
		out = append(out, strings.Join(given, ", ")+" configure the service behind /metrics and do nothing without --api.url; /probe takes its settings from the modules of --config.file")
	}
	return out
}

// reservedPaths are served by the exporter itself.
var reservedPaths = []string{"/probe", "/sd", "/-/healthy", "/-/ready", "/-/reload"}

// validateMetricsPath refuses a --web.telemetry-path that the HTTP mux
// would reject or that would shadow another endpoint.
func validateMetricsPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("--web.telemetry-path %q must start with /, such as /metrics", p)
	case strings.ContainsAny(p, "{}% \t\n?#") || path.Clean(p) != p:
		return fmt.Errorf("--web.telemetry-path %q must be a plain, clean path, such as /metrics", p)
	case slices.Contains(reservedPaths, p) || strings.HasPrefix(p, "/polls/"):
		return fmt.Errorf("--web.telemetry-path %q is taken by another endpoint of the exporter: choose another path", p)
	}
	return nil
}

// moduleSettings turns a module of the configuration file into what a
// poll of one /probe target needs, as validate does for the flags.
func moduleSettings(m *moduleconfig.Module) collector.TargetSettings {
	return collector.TargetSettings{
		Client: client.Config{
			HTTPClientConfig: m.HTTPClientConfig,
			Concurrency:      m.Concurrency,
			MaxPages:         m.MaxPages,
			MaxResponseBytes: m.MaxResponseBytes,
			RateLimit:        m.RateLimit,
			DisableGzip:      !m.Gzip,
		},
		DetailIDs:   m.Locations.DetailIDs,
		DetailLimit: m.Locations.DetailLimit,
		InfoFields:  m.Locations.InfoFields,
		Timeout:     m.Timeout,
		MinInterval: m.MinInterval,
	}
}

// probeLookup gives /probe the modules of store. The module itself is the
// version the probe handler compares after a reload.
func probeLookup(store *moduleconfig.Store) collector.ModuleLookup {
	return func(name string) (collector.ProbeModule, error) {
		m, err := store.Lookup(name)
		if err != nil {
			return collector.ProbeModule{}, err
		}
		return collector.ProbeModule{Settings: moduleSettings(m), Version: m, CheckTarget: m.CheckTarget}, nil
	}
}
