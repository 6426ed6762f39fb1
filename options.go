package main

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

const (
	exporterName         = "deployment_service_exporter"
	defaultListenAddress = ":10044" // outside the range Prometheus allocates to exporters
	demoListenAddress    = "127.0.0.1:10044"
	defaultMaxRequests   = 40                           // node_exporter's
	keyEnv               = "DEPLOYMENT_SERVICE_API_KEY" // no flag: the key never shows in a process list
	demoDetailLimit      = 5                            // the demo's subset, so that every dashboard panel has data
	demoInfoField        = "name"
)

// settings are the flags, and what validate derives: base (the service behind /metrics, nil without one) and target.
type settings struct {
	apiURL, keyFile, httpConfigFile, configFile, metricsPath string
	key                                                      string // from the environment only
	module                                                   moduleconfig.Module
	demo, configCheck, disableExporterMetrics                bool
	demoFaults                                               sampleservice.FaultFlag
	externalURL                                              *url.URL // nil when unknown
	maxRequests                                              int
	web                                                      *web.FlagConfig
	log                                                      promslog.Config
	locationsGiven                                           bool // --demo takes the --locations.* flags as given, not its own subset
	base                                                     *url.URL
	target                                                   collector.TargetSettings
}

// validate checks the flags and returns one error naming what to fix.
func validate(f settings) (*settings, error) {
	hc, err := moduleconfig.LoadHTTPClientConfig(f.httpConfigFile)
	if err != nil {
		return nil, fmt.Errorf("--api.http-config.file %s: %w", f.httpConfigFile, err)
	}
	if f.externalURL != nil && *f.externalURL == (url.URL{}) { // given empty, as templates do: not set
		f.externalURL = nil
	}
	m, loc, p, u := &f.module, &f.module.Locations, f.metricsPath, f.externalURL
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{f.demo && f.apiURL != "", "--demo watches its own sample service: drop --api.url (or DEPLOYMENT_SERVICE_URL)"},
		{!f.demo && f.apiURL == "" && f.configFile == "", "no service to watch: set --api.url (or DEPLOYMENT_SERVICE_URL), or use --demo"},
		{m.Timeout <= 0, "--api.timeout must be positive, such as 10s"},
		{m.Concurrency < 1, "--api.concurrency must be at least 1"},
		{m.MaxPages < 1, "--api.max-pages must be at least 1"},
		{m.MaxResponseBytes < 1, "--api.max-response-bytes must be positive, such as 64MiB"},
		{m.RateLimit < 0 || math.IsNaN(m.RateLimit) || math.IsInf(m.RateLimit, 0), "--api.rate-limit must be 0 (no limit) or more requests per second"},
		{m.MinInterval < 0, "--api.min-interval must be 0 (poll on every scrape) or more"},
		{len(loc.DetailIDs) > 0 && loc.DetailLimit > 0, "--locations.detail-id and --locations.detail-limit conflict: give ids or a limit, not both"},
		{f.demoFaults.String() != "" && !f.demo, "--demo.fault makes the sample service of --demo fail: add --demo, or drop --demo.fault"},
		{!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "{}% \t\n?#") || path.Clean(p) != p,
			fmt.Sprintf("--web.telemetry-path %q must be a plain, clean path from /, such as /metrics", p)},
		{slices.Contains([]string{"/probe", "/target", "/sd", "/-/healthy", "/-/ready", "/-/reload"}, p) || strings.HasPrefix(p, "/polls/"),
			fmt.Sprintf("--web.telemetry-path %q is taken by another endpoint of the exporter: choose another path", p)},
		{u != nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != ""),
			"--web.external-url must be an absolute http or https URL without credentials, query or fragment, such as https://exporter.example.com/"},
	} {
		if c.bad {
			return nil, errors.New(c.msg)
		}
	}
	if err := moduleconfig.ValidateInfoFields(loc.InfoFields); err != nil {
		return nil, fmt.Errorf("--locations.info-field %w", err)
	}
	if w := f.web; w != nil && *w.WebConfigFile != "" {
		if _, err := client.ReadRegularFile(*w.WebConfigFile, moduleconfig.MaxFileBytes); err != nil {
			return nil, fmt.Errorf("--web.config.file %s: %w", *w.WebConfigFile, err)
		}
	}
	f.target = moduleSettings(&f.module)
	switch {
	case f.demo && !f.locationsGiven:
		f.target.DetailLimit, f.target.InfoFields = demoDetailLimit, []string{demoInfoField}
	case f.demo, f.apiURL == "":
	default:
		if f.base, err = client.ParseBaseURL(f.apiURL); errors.Is(err, client.ErrURLCredentials) {
			err = fmt.Errorf("%w: give the key through --api.key-file or %s", err, keyEnv)
		}
		if err != nil {
			return nil, fmt.Errorf("--api.url (or DEPLOYMENT_SERVICE_URL): %w", err)
		}
		if f.target.Client.HTTPClientConfig, err = withKey(f, hc); err != nil {
			return nil, err
		}
	}
	return &f, nil
}

// withKey returns the /metrics service's HTTP client settings hc with the key, unless hc has one.
func withKey(f settings, hc config.HTTPClientConfig) (config.HTTPClientConfig, error) {
	key := strings.TrimSpace(f.key)
	var err error
	switch {
	case hc.Authorization != nil && (key != "" || f.keyFile != ""):
		err = fmt.Errorf("--api.http-config.file has an authorization and %s or --api.key-file gives a key too: keep the key in one place", keyEnv)
	case hc.Authorization != nil:
	case key != "" && f.keyFile != "":
		err = fmt.Errorf("both %s and --api.key-file are set: use one", keyEnv)
	case f.keyFile != "":
		// Read now to fail early; the client reads it again on every request.
		if _, err = client.ReadKeyFile(f.keyFile); err != nil {
			err = fmt.Errorf("--api.key-file: %w", err)
		}
		hc.Authorization = &config.Authorization{Type: "Token", CredentialsFile: f.keyFile}
	case key != "" && !client.ValidKey(key):
		err = fmt.Errorf("%s has control characters such as a line break inside it: set the key alone", keyEnv)
	case key != "":
		hc.Authorization = &config.Authorization{Type: "Token", Credentials: config.Secret(key)}
	default:
		err = fmt.Errorf("no API key: set %s or --api.key-file, or an authorization of type Token in --api.http-config.file", keyEnv)
	}
	return hc, err
}

// checkConfig answers --config.check: it prints each problem a start would meet, or OK, and returns the exit code.
func checkConfig(f settings) int {
	problems := moduleconfig.Check(f.configFile)
	if _, err := validate(f); err != nil {
		problems = append(problems, err.Error())
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "%s: %s\n", exporterName, p)
	}
	if len(problems) > 0 {
		return 1
	}
	fmt.Println("OK")
	return 0
}

// moduleSettings turns a module, of the file or of the flags, into what a poll of one target needs.
func moduleSettings(m *moduleconfig.Module) collector.TargetSettings {
	return collector.TargetSettings{
		Client: client.Config{HTTPClientConfig: m.HTTPClientConfig, Concurrency: m.Concurrency, MaxPages: m.MaxPages,
			MaxResponseBytes: m.MaxResponseBytes, RateLimit: m.RateLimit, DisableGzip: !m.Gzip},
		DetailIDs: m.Locations.DetailIDs, DetailLimit: m.Locations.DetailLimit, InfoFields: m.Locations.InfoFields,
		Timeout: m.Timeout, MinInterval: m.MinInterval,
	}
}

// intFlag and idsFlag are whole numbers from 0 in decimal (no flag takes less): kingpin's Int takes 2.5, its Int64 reads 010 as eight.
type intFlag int

func (i *intFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, strconv.IntSize-1)
	*i = intFlag(n)
	return err
}

func (i *intFlag) String() string { return strconv.Itoa(int(*i)) }

type idsFlag []int64

func (l *idsFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 63)
	*l = append(*l, int64(n))
	return err
}

func (l *idsFlag) String() string   { return fmt.Sprint([]int64(*l)) }
func (*idsFlag) IsCumulative() bool { return true }

// byteSize is bytes, with or without a unit (64MiB, 10MB): kingpin's Bytes takes no plain number, and reads MB as MiB.
type byteSize int64

func (b *byteSize) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		n, err = units.ParseStrictBytes(s)
	}
	if err != nil {
		return fmt.Errorf("%q is not a size in bytes, such as 67108864 or 64MiB", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// flagError rewrites kingpin's error about a flag's value ("time: invalid duration", "unexpected false") as one line naming the flag and what it takes.
func flagError(app *kingpin.Application, args []string, err error) error {
	for _, a := range args {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if f := app.GetFlag(strings.TrimPrefix(name, "no-")); ok && strings.HasPrefix(a, "--") && f != nil && f.Model().IsBoolFlag() {
			return fmt.Errorf("--%s takes no value: give --%[2]s or --no-%[2]s", name, f.Model().Name)
		}
	}
	pc, _ := app.ParseContext(args)
	for _, el := range pc.Elements {
		// The flag whose value fails to set again is the one that failed.
		f, ok := el.Clause.(*kingpin.FlagClause)
		if !ok || el.Value == nil || f.Model().Value.Set(*el.Value) == nil {
			continue
		}
		what, v := err.Error(), *el.Value
		var num *strconv.NumError
		switch {
		case errors.As(err, &num) && num.Err == strconv.ErrRange:
			what = fmt.Sprintf("%q is out of range", v)
		case errors.As(err, &num) && num.Func == "ParseFloat":
			what = fmt.Sprintf("%q is not a number, such as 2.5", v)
		case errors.As(err, &num):
			what = fmt.Sprintf("%q is not a whole number from 0", v)
		case strings.HasPrefix(what, "time: "):
			what = fmt.Sprintf("%q is not a duration, such as 10s", v)
		}
		return fmt.Errorf("--%s: %s", f.Model().Name, what)
	}
	return err
}
