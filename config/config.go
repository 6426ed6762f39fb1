// Package config reads the configuration file: named modules, each saying how to poll a /probe target.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v2"

	"github.com/deployment-service/deployment_service_exporter/client"
)

const (
	moduleBlock    = "http_client_config"
	DefaultTimeout = 10 * time.Second // of a poll, unless a module or --api.timeout says otherwise
	MaxFileBytes   = 1 << 20          // of every configuration file the exporter reads
)

// Config is the whole file.
type Config struct {
	Modules map[string]*Module `yaml:"modules"`
}

// Module says how to poll one kind of service; the README describes each key.
type Module struct {
	Targets          []string                   `yaml:"targets"`
	AllowAnyTarget   bool                       `yaml:"allow_any_target"`
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config"`
	Timeout          time.Duration              `yaml:"timeout"`
	Concurrency      int                        `yaml:"concurrency"`
	MaxPages         int                        `yaml:"max_pages"`
	MaxResponseBytes int64                      `yaml:"max_response_bytes"`
	RateLimit        float64                    `yaml:"rate_limit"`
	Gzip             bool                       `yaml:"gzip"`
	MinInterval      time.Duration              `yaml:"min_interval"`
	Locations        Locations                  `yaml:"locations"`

	patterns []targetPattern
	numbers  error // of wholeNumbers, reported with the module's name
}

// Locations chooses the detail subset of a module.
type Locations struct {
	DetailIDs   []int64  `yaml:"detail_ids"`
	DetailLimit int      `yaml:"detail_limit"`
	InfoFields  []string `yaml:"info_fields"`
}

// UnmarshalYAML applies the defaults before reading a module.
func (m *Module) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Module
	*m = Module{
		HTTPClientConfig: commoncfg.DefaultHTTPClientConfig,
		Timeout:          DefaultTimeout,
		Concurrency:      client.DefaultConcurrency,
		MaxPages:         client.DefaultMaxPages,
		MaxResponseBytes: client.DefaultMaxResponseBytes,
		Gzip:             true,
	}
	if err := unmarshal((*plain)(m)); err != nil {
		return err // before reading again, which reuses the memory of its errors
	}
	m.numbers = m.wholeNumbers(unmarshal)
	return nil
}

type yamlText []string // a YAML value as written: a scalar's text, or those of a sequence

func (t *yamlText) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if unmarshal((*[]string)(t)) != nil && unmarshal(&s) == nil { // nothing for a mapping
		*t = yamlText{s}
	}
	return nil
}

// wholeNumbers reads the module's whole numbers again as written, in decimal from 0: YAML 1.1 reads 010 as eight.
func (m *Module) wholeNumbers(unmarshal func(any) error) error {
	var top map[string]yamlText
	var sub map[string]map[string]yamlText
	_, _ = unmarshal(&top), unmarshal(&sub)
	for key, set := range map[string]func([]int64){
		"concurrency":            func(n []int64) { m.Concurrency = int(n[0]) },
		"max_pages":              func(n []int64) { m.MaxPages = int(n[0]) },
		"max_response_bytes":     func(n []int64) { m.MaxResponseBytes = n[0] },
		"locations.detail_limit": func(n []int64) { m.Locations.DetailLimit = int(n[0]) },
		"locations.detail_ids":   func(n []int64) { m.Locations.DetailIDs = n },
	} {
		text := top[key]
		if parent, child, nested := strings.Cut(key, "."); nested {
			text = sub[parent][child]
		}
		var ns []int64
		for _, s := range text {
			n, err := strconv.ParseUint(s, 10, 63)
			if err != nil {
				return fmt.Errorf("%s takes whole numbers from 0 written in decimal, such as 10", key)
			}
			ns = append(ns, int64(n))
		}
		if len(ns) > 0 {
			set(ns)
		}
	}
	return nil
}

// load reads and checks the file at path (none: no modules); its errors (a line per bad module, not naming the file) void the config.
func load(path string) (*Config, error) {
	var cfg Config
	if err := readYAML(path, &cfg); err != nil || path == "" {
		return &cfg, err
	}
	if len(cfg.Modules) == 0 {
		return nil, errors.New("no modules: add at least one under modules:, such as default: {targets: [https://deploy.example.com], http_client_config: {authorization: {type: Token, credentials_file: /path/to/key}}}")
	}
	var errs []error
	for _, name := range cfg.ModuleNames() {
		if m := cfg.Modules[name]; m == nil {
			errs = append(errs, fmt.Errorf("module %q is empty: give it settings, or {} for the defaults", name))
		} else if err := m.check(filepath.Dir(path)); err != nil {
			errs = append(errs, fmt.Errorf("module %q: %w", name, err))
		}
	}
	return &cfg, errors.Join(errs...)
}

// readYAML reads the file at path (none: out stays) into out; its errors add the fix to the YAML library's, without Go types or quoted values (secrets).
func readYAML(path string, out any) error {
	if path == "" {
		return nil
	}
	b, err := client.ReadRegularFile(path, MaxFileBytes)
	if err != nil {
		return err
	}
	if err = yaml.UnmarshalStrict(b, out); err == nil {
		return nil
	}
	msg := urlParseRE.ReplaceAllString(err.Error(), "a URL does not parse")
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msg = goTypeRE.ReplaceAllString(quotedValueRE.ReplaceAllString(strings.Join(te.Errors, "; "), "a value"), "")
	}
	switch {
	case te == nil && !strings.HasPrefix(msg, "yaml: "): // a setting's own parser, which may quote the value
		msg, _, _ = strings.Cut(msg, ": ")
		return fmt.Errorf("%s (see the README for what the setting takes)", msg)
	case strings.Contains(msg, "not found"):
		return fmt.Errorf("%s (unknown key: check its spelling and indentation against the README)", msg)
	case strings.Contains(msg, "cannot unmarshal"):
		return fmt.Errorf("%s (wrong type of value: check the README for what the key takes)", msg)
	}
	return errors.New(msg)
}

var (
	goTypeRE      = regexp.MustCompile(` in type [\w.]+`)
	quotedValueRE = regexp.MustCompile("`[^`]*`")
	urlParseRE    = regexp.MustCompile(`parse "[^"]*"`)
)

// check validates a module, with file names relative to dir, and builds its HTTP client as every probe would.
func (m *Module) check(dir string) error {
	m.HTTPClientConfig.SetDirectory(dir)
	switch {
	case m.numbers != nil:
		return m.numbers
	case m.Timeout <= 0:
		return errors.New("timeout must be positive, such as 10s")
	case m.Concurrency < 1:
		return errors.New("concurrency must be at least 1")
	case m.MaxPages < 1:
		return errors.New("max_pages must be at least 1")
	case m.MaxResponseBytes < 1:
		return errors.New("max_response_bytes must be positive")
	case m.RateLimit < 0 || math.IsNaN(m.RateLimit) || math.IsInf(m.RateLimit, 0):
		return errors.New("rate_limit must be 0 (no limit) or more requests per second")
	case m.MinInterval < 0:
		return errors.New("min_interval must be 0 or more")
	case len(m.Locations.DetailIDs) > 0 && m.Locations.DetailLimit > 0:
		return errors.New("locations.detail_ids and locations.detail_limit conflict: give one")
	}
	if err := ValidateInfoFields(m.Locations.InfoFields); err != nil {
		return fmt.Errorf("locations.info_fields: %w", err)
	}
	if err := m.parseTargets(); err != nil {
		return err
	}
	return checkHTTPClient(&m.HTTPClientConfig, moduleBlock+".")
}

// checkHTTPClient holds a client block (prefix starts its names in errors) to the exporter's Accept and a Token key, and builds its transport.
func checkHTTPClient(c *commoncfg.HTTPClientConfig, prefix string) error {
	accept := func(name string) bool { return http.CanonicalHeaderKey(name) == "Accept" }
	a := c.Authorization
	switch {
	case c.HTTPHeaders != nil && slices.ContainsFunc(slices.Collect(maps.Keys(c.HTTPHeaders.Headers)), accept):
		return fmt.Errorf("%shttp_headers: Accept is set by the exporter on every request (Accept: application/json) and cannot be replaced", prefix)
	case c.BasicAuth != nil || c.OAuth2 != nil: // bearer_token is an authorization of type Bearer once read
		return fmt.Errorf("%sbasic_auth and oauth2 are refused: the service takes a Token key, so use authorization with type: Token and credentials_file", prefix)
	case c.ProxyURL.URL != nil && !slices.Contains([]string{"http", "https", "socks5", "socks5h"}, c.ProxyURL.Scheme):
		return fmt.Errorf("%sproxy_url must be an http, https, socks5 or socks5h URL, such as http://proxy.example.com:3128", prefix)
	case a == nil: // no key to check
	case a.Type != "Token":
		return fmt.Errorf("%sauthorization.type must be Token, spelled so: the service's scheme (prometheus/common takes Bearer when type is left out)", prefix)
	case a.Credentials == "" && a.CredentialsFile == "":
		return fmt.Errorf("%sauthorization has no key: add credentials_file (or credentials)", prefix)
	case a.Credentials != "" && !client.ValidKey(string(a.Credentials)):
		return fmt.Errorf("%sauthorization.credentials has control characters such as a line break inside it", prefix)
	case a.CredentialsFile != "":
		if _, err := client.ReadKeyFile(a.CredentialsFile); err != nil {
			return fmt.Errorf("%sauthorization.credentials_file: %w", prefix, err)
		}
	}
	if _, err := client.NewTransport(*c, ""); err != nil {
		block := cmp.Or(strings.TrimSuffix(prefix, "."), "it")
		return fmt.Errorf("%s cannot be used: %s", block, strings.TrimPrefix(err.Error(), "http client config: "))
	}
	return nil
}

// LoadHTTPClientConfig reads --api.http-config.file (none: the defaults) as a module's; its errors do not name the file.
func LoadHTTPClientConfig(path string) (commoncfg.HTTPClientConfig, error) {
	c := commoncfg.DefaultHTTPClientConfig
	if err := readYAML(path, &c); err != nil {
		return c, err
	}
	c.SetDirectory(filepath.Dir(path))
	return c, checkHTTPClient(&c, "")
}

// ModuleNames returns the module names, sorted.
func (c *Config) ModuleNames() []string { return slices.Sorted(maps.Keys(c.Modules)) }

// ValidateInfoFields refuses fields that cannot become labels of deployment_service_location_info.
func ValidateInfoFields(fields []string) error {
	for i, f := range fields {
		switch {
		case !model.LegacyValidation.IsValidLabelName(f):
			return fmt.Errorf("entry %d is not a valid label name (letters, digits and underscores, not starting with a digit)", i+1)
		case strings.HasPrefix(f, "__"):
			return fmt.Errorf("entry %d: names starting with __ are reserved by Prometheus", i+1)
		case f == "location_id" || f == "job" || f == "instance":
			return fmt.Errorf("entry %d clashes with a label the exporter or Prometheus sets (location_id, job, instance)", i+1)
		case slices.Contains(fields[:i], f):
			return fmt.Errorf("entry %d is given twice", i+1)
		}
	}
	return nil
}
