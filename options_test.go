package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"

	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
)

func goodFlags() settings {
	return settings{
		apiURL: "https://deploy.example.com/prefix",
		key:    "k",
		module: moduleconfig.Module{
			Timeout:          moduleconfig.DefaultTimeout,
			Concurrency:      4,
			MaxPages:         1000,
			MaxResponseBytes: 64 << 20,
			Gzip:             true,
		},
		metricsPath: "/metrics",
	}
}

func TestGzipFlag(t *testing.T) {
	for _, gzip := range []bool{true, false} {
		f := goodFlags()
		f.module.Gzip = gzip
		s, err := validate(f)
		if err != nil {
			t.Fatal(err)
		}
		if s.target.Client.DisableGzip == gzip {
			t.Errorf("--api.gzip=%t gave DisableGzip %t", gzip, s.target.Client.DisableGzip)
		}
	}
}

func TestValidateRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	emptyKey := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyKey, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(*settings)
		want   string // a fragment of the one-line error
	}{
		{"no URL", func(f *settings) { f.apiURL = "" }, "--api.url"},
		{"relative URL", func(f *settings) { f.apiURL = "deploy.example.com" }, "--api.url"},
		{"wrong scheme", func(f *settings) { f.apiURL = "ftp://deploy.example.com" }, "--api.url"},
		{"credentials in URL", func(f *settings) { f.apiURL = "https://user:hunter2@deploy.example.com" }, "--api.url (or DEPLOYMENT_SERVICE_URL): URL must not carry credentials: give the key through --api.key-file or DEPLOYMENT_SERVICE_API_KEY"},
		{"unparsable URL", func(f *settings) { f.apiURL = "http://[::1" }, "--api.url"},
		{"no key", func(f *settings) { f.key = "" }, "DEPLOYMENT_SERVICE_API_KEY"},
		{"both key sources", func(f *settings) { f.keyFile = emptyKey }, "use one"},
		{"unreadable key file", func(f *settings) { f.key, f.keyFile = "", filepath.Join(dir, "missing") }, "--api.key-file"},
		{"empty key file", func(f *settings) { f.key, f.keyFile = "", emptyKey }, "empty"},
		{"zero timeout", func(f *settings) { f.module.Timeout = 0 }, "--api.timeout"},
		{"zero concurrency", func(f *settings) { f.module.Concurrency = 0 }, "--api.concurrency"},
		{"zero pages", func(f *settings) { f.module.MaxPages = 0 }, "--api.max-pages"},
		{"zero body size", func(f *settings) { f.module.MaxResponseBytes = 0 }, "--api.max-response-bytes"},
		{"negative rate", func(f *settings) { f.module.RateLimit = -1 }, "--api.rate-limit"},
		{"negative interval", func(f *settings) { f.module.MinInterval = -time.Second }, "--api.min-interval"},
		{"ids and limit", func(f *settings) { f.module.Locations.DetailIDs, f.module.Locations.DetailLimit = []int64{1}, 3 }, "conflict"},
		{"demo and URL", func(f *settings) { f.demo = true }, "--demo"},
		{"info field not a label name", func(f *settings) { f.module.Locations.InfoFields = []string{"last-deploy"} }, "not a valid label name"},
		{"info field starting with a digit", func(f *settings) { f.module.Locations.InfoFields = []string{"1st"} }, "not a valid label name"},
		{"info field reserved", func(f *settings) { f.module.Locations.InfoFields = []string{"__name__"} }, "reserved"},
		{"info field location_id", func(f *settings) { f.module.Locations.InfoFields = []string{"location_id"} }, "clashes"},
		{"info field job", func(f *settings) { f.module.Locations.InfoFields = []string{"job"} }, "clashes"},
		{"info field instance", func(f *settings) { f.module.Locations.InfoFields = []string{"instance"} }, "clashes"},
		{"info field twice", func(f *settings) { f.module.Locations.InfoFields = []string{"name", "name"} }, "twice"},
		{"NaN rate", func(f *settings) { f.module.RateLimit = math.NaN() }, "--api.rate-limit"},
		{"URL with an impossible port", func(f *settings) { f.apiURL = "http://127.0.0.1:99999" }, "port"},
		{"URL with port 0", func(f *settings) { f.apiURL = "http://127.0.0.1:0" }, "port"},
		{"key with a line break", func(f *settings) { f.key = "abc\ndef" }, "control"},
		{"telemetry path without slash", func(f *settings) { f.metricsPath = "metrics" }, "--web.telemetry-path"},
		{"empty telemetry path", func(f *settings) { f.metricsPath = "" }, "--web.telemetry-path"},
		{"telemetry path taken by /probe", func(f *settings) { f.metricsPath = "/probe" }, "taken"},
		{"telemetry path taken by health", func(f *settings) { f.metricsPath = "/-/healthy" }, "taken"},
		{"telemetry path with a pattern", func(f *settings) { f.metricsPath = "/metrics{x}" }, "plain, clean path"},
		{"telemetry path not clean", func(f *settings) { f.metricsPath = "/x/../metrics" }, "plain, clean path"},
		{"telemetry path with a double slash", func(f *settings) { f.metricsPath = "//metrics" }, "plain, clean path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			tt.modify(&f)
			_, err := validate(f)
			if err == nil {
				t.Fatal("validate accepted it")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line mentioning %q", msg, tt.want)
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q repeats the URL's password", msg)
			}
		})
	}
}

func TestValidateAcceptsGoodFlags(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(*settings)
	}{
		{"key from the environment", func(*settings) {}},
		{"key from a file", func(f *settings) { f.key, f.keyFile = "", keyFile }},
		{"demo needs no URL or key", func(f *settings) { f.apiURL, f.key, f.demo = "", "", true }},
		{"config file alone", func(f *settings) { f.apiURL, f.key, f.configFile = "", "", "modules.yml" }},
		{"ids and info fields", func(f *settings) {
			f.module.Locations.DetailIDs, f.module.Locations.InfoFields = []int64{3, 5, 3}, []string{"name", "region"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			tt.modify(&f)
			s, err := validate(f)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if s == nil {
				t.Fatal("no settings")
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "64MiB": 64 << 20, "1KiB": 1024, "10MB": 10_000_000} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	var b byteSize
	if err := b.Set("lots"); err == nil {
		t.Error("Set accepted \"lots\"")
	}
}

func TestValidateHTTPConfigFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("from-key-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withToken := write("token.yml", "authorization: {type: Token, credentials: hunter2}\n")
	withoutAuth := write("plain.yml", "enable_http2: false\n")

	refused := []struct {
		name   string
		modify func(*settings)
		want   []string
	}{
		{"missing file", func(f *settings) { f.httpConfigFile = filepath.Join(dir, "none.yml") }, []string{"--api.http-config.file", "none.yml"}},
		{"authorization and the key variable", func(f *settings) { f.httpConfigFile = withToken }, []string{"--api.http-config.file", keyEnv, "one place"}},
		{"authorization and a key file", func(f *settings) { f.key, f.keyFile, f.httpConfigFile = "", keyFile, withToken }, []string{"--api.http-config.file", "--api.key-file", "one place"}},
		{"no key anywhere", func(f *settings) { f.key, f.httpConfigFile = "", withoutAuth }, []string{"no API key", "--api.http-config.file"}},
		{"basic auth", func(f *settings) {
			f.httpConfigFile = write("basic.yml", "basic_auth: {username: u, password: hunter2}\n")
		}, []string{"--api.http-config.file", "Token"}},
		{"oauth2", func(f *settings) {
			f.httpConfigFile = write("oauth2.yml", "oauth2: {client_id: c, client_secret: hunter2, token_url: 'http://127.0.0.1:1/'}\n")
		}, []string{"--api.http-config.file", "Token"}},
		{"bearer token", func(f *settings) { f.httpConfigFile = write("bearer.yml", "bearer_token: hunter2\n") }, []string{"--api.http-config.file", "type must be Token"}},
		{"authorization of type Bearer", func(f *settings) {
			f.key, f.httpConfigFile = "", write("bearer2.yml", "authorization: {type: Bearer, credentials: hunter2}\n")
		}, []string{"--api.http-config.file", "type must be Token"}},
		{"Authorization header", func(f *settings) {
			f.httpConfigFile = write("header.yml", "http_headers: {Authorization: {secrets: [Token hunter2]}}\n")
		}, []string{"--api.http-config.file", `"Authorization" is not allowed`}},
		{"unknown key", func(f *settings) { f.httpConfigFile = write("typo.yml", "tls_confg: {}\n") }, []string{"--api.http-config.file", "tls_confg", "unknown key"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			tt.modify(&f)
			_, err := validate(f)
			if err == nil {
				t.Fatal("validate accepted it")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "hunter2") {
				t.Errorf("error %q: want one line without the secret", msg)
			}
		})
	}

	accepted := []struct {
		name    string
		modify  func(*settings)
		wantKey string // the credentials or the credentials file
	}{
		{"no file: the key variable", func(*settings) {}, "k"},
		{"file without authorization: the key variable", func(f *settings) { f.httpConfigFile = withoutAuth }, "k"},
		{"file without authorization: the key file", func(f *settings) { f.key, f.keyFile, f.httpConfigFile = "", keyFile, withoutAuth }, keyFile},
		{"file with the key", func(f *settings) { f.key, f.httpConfigFile = "", withToken }, "hunter2"},
		{"file with a relative key file", func(f *settings) {
			f.key, f.httpConfigFile = "", write("keyfile.yml", "authorization: {type: Token, credentials_file: key}\n")
		}, keyFile},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			tt.modify(&f)
			s, err := validate(f)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			hc := s.target.Client.HTTPClientConfig
			a := hc.Authorization
			if a == nil || a.Type != "Token" {
				t.Fatalf("authorization %+v, want type Token", a)
			}
			if got := string(a.Credentials) + a.CredentialsFile; got != tt.wantKey {
				t.Errorf("key %q, want %q", got, tt.wantKey)
			}
			if f.httpConfigFile == withoutAuth && hc.EnableHTTP2 {
				t.Error("the file's enable_http2: false was lost")
			}
		})
	}
}

func TestValidateDemoSubset(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(*settings)
		wantLimit  int
		wantIDs    []int64
		wantFields []string
	}{
		{"no --locations.* flag: five locations with their name", func(*settings) {}, 5, nil, []string{"name"}},
		{"detail-limit 0 given: none", func(f *settings) { f.locationsGiven = true }, 0, nil, nil},
		{"detail-limit given", func(f *settings) { f.module.Locations.DetailLimit, f.locationsGiven = 2, true }, 2, nil, nil},
		{"ids given", func(f *settings) { f.module.Locations.DetailIDs, f.locationsGiven = []int64{7, 9}, true }, 0, []int64{7, 9}, nil},
		{"info field given", func(f *settings) { f.module.Locations.InfoFields, f.locationsGiven = []string{"region"}, true }, 0, nil, []string{"region"}},
		{"limit and field given", func(f *settings) {
			f.module.Locations.DetailLimit, f.module.Locations.InfoFields, f.locationsGiven = 3, []string{"slug"}, true
		}, 3, nil, []string{"slug"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			f.apiURL, f.key, f.demo = "", "", true
			tt.modify(&f)
			s, err := validate(f)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if s.target.DetailLimit != tt.wantLimit || !slices.Equal(s.target.DetailIDs, tt.wantIDs) || !slices.Equal(s.target.InfoFields, tt.wantFields) {
				t.Errorf("limit %d, ids %v, fields %v; want %d, %v, %v",
					s.target.DetailLimit, s.target.DetailIDs, s.target.InfoFields, tt.wantLimit, tt.wantIDs, tt.wantFields)
			}
		})
	}
	// Outside the demo, no flag means no subset.
	f := goodFlags()
	s, err := validate(f)
	if err != nil || s.target.DetailLimit != 0 || len(s.target.InfoFields) != 0 {
		t.Errorf("single target without --locations.* flags: %+v, %v", s, err)
	}
}

// TestModuleSettings checks that every setting of a module reaches the
// poll of a /probe target.
func TestModuleSettings(t *testing.T) {
	cfg := &moduleconfig.Module{Timeout: 3 * time.Second, Concurrency: 2, MaxPages: 7, MaxResponseBytes: 99, RateLimit: 5, MinInterval: time.Minute}
	cfg.Locations.DetailIDs = []int64{1, 2}
	cfg.Locations.DetailLimit = 4
	cfg.Locations.InfoFields = []string{"name"}
	s := moduleSettings(cfg)
	c := s.Client
	if s.Timeout != 3*time.Second || s.MinInterval != time.Minute || len(s.DetailIDs) != 2 || s.DetailLimit != 4 || s.InfoFields[0] != "name" ||
		c.Concurrency != 2 || c.MaxPages != 7 || c.MaxResponseBytes != 99 || c.RateLimit != 5 || !c.DisableGzip {
		t.Errorf("settings: %+v", s)
	}
}

// TestDemoFaultNeedsDemo: --demo.fault breaks the sample service only.
func TestDemoFaultNeedsDemo(t *testing.T) {
	f := goodFlags()
	if err := f.demoFaults.Set("root:500"); err != nil {
		t.Fatal(err)
	}
	_, err := validate(f)
	if err == nil || !strings.Contains(err.Error(), "--demo.fault") || !strings.Contains(err.Error(), "--demo ") {
		t.Errorf("--demo.fault without --demo: %v", err)
	}
	f.apiURL, f.key, f.demo = "", "", true
	s, err := validate(f)
	if err != nil || s.demoFaults.String() != "root:500" {
		t.Errorf("--demo.fault with --demo: %v", err)
	}
}

// TestDemoListenAddress: --demo alone listens on loopback; an address
// given, or no --demo, keeps the toolkit's way.
func TestDemoListenAddress(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo"}, "127.0.0.1:10044"},
		{[]string{"--demo", "--web.listen-address=:10044"}, ":10044"},
		{[]string{"--demo", "--web.listen-address=[::1]:9999"}, "[::1]:9999"},
		{[]string{"--api.url=http://127.0.0.1:1"}, ":10044"},
	} {
		cmd, err := parseArgs(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := *cmd.web.WebListenAddresses; !slices.Equal(got, []string{tt.want}) {
			t.Errorf("%v listens on %v, want %s", tt.args, got, tt.want)
		}
	}
}

// TestHTTP2FollowsPrometheusDefault: however the HTTP client is set up
// (flags alone, an empty --api.http-config.file, a module), HTTP/2 is
// what prometheus/common's default says.
func TestHTTP2FollowsPrometheusDefault(t *testing.T) {
	want := config.DefaultHTTPClientConfig.EnableHTTP2
	dir := t.TempDir()
	empty := filepath.Join(dir, "http.yml")
	cfgFile := filepath.Join(dir, "config.yml")
	for path, content := range map[string]string{empty: "", cfgFile: "modules:\n  m: {}\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	withFile := goodFlags()
	withFile.httpConfigFile = empty
	for name, f := range map[string]settings{"flags alone": goodFlags(), "an empty --api.http-config.file": withFile} {
		s, err := validate(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.target.Client.HTTPClientConfig.EnableHTTP2; got != want {
			t.Errorf("%s: enable_http2 %t, want %t", name, got, want)
		}
	}
	store := moduleconfig.NewStore(cfgFile, prometheus.NewRegistry(), promslog.NewNopLogger())
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	m, err := store.Lookup("m")
	if err != nil {
		t.Fatal(err)
	}
	if got := moduleSettings(m).Client.HTTPClientConfig.EnableHTTP2; got != want {
		t.Errorf("a module: enable_http2 %t, want %t", got, want)
	}
}

// TestWholeNumberFlagsAreDecimal: 010 is ten, never eight, and 08 is eight; none is below 0.
func TestWholeNumberFlagsAreDecimal(t *testing.T) {
	f, err := parseArgs([]string{"--locations.detail-id=010", "--locations.detail-id=7", "--api.max-pages=08", "--api.concurrency=010", "--web.max-requests=010"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := f.module.Locations.DetailIDs; len(ids) != 2 || ids[0] != 10 || ids[1] != 7 || f.module.MaxPages != 8 || f.module.Concurrency != 10 || f.maxRequests != 10 {
		t.Errorf("ids %v, pages %d, concurrency %d, requests %d; want [10 7], 8, 10, 10", ids, f.module.MaxPages, f.module.Concurrency, f.maxRequests)
	}
	for _, arg := range []string{"--locations.detail-id=0x10", "--api.max-pages=0b1", "--locations.detail-limit=1_0",
		"--locations.detail-id=-4", "--locations.detail-limit=-1", "--web.max-requests=-1"} {
		flag, _, _ := strings.Cut(arg, "=")
		if _, err := parseArgs([]string{arg}); err == nil || !strings.Contains(err.Error(), flag+": ") || !strings.Contains(err.Error(), "not a whole number from 0") {
			t.Errorf("%s: %v, want it refused as no whole number from 0", arg, err)
		}
	}
}

// TestEmptyExternalURLIsUnset: --web.external-url= (as a template without a value writes it) sets no URL.
func TestEmptyExternalURLIsUnset(t *testing.T) {
	f, err := parseArgs([]string{"--demo", "--web.external-url="})
	if err != nil {
		t.Fatal(err)
	}
	s, err := validate(*f)
	if err != nil {
		t.Fatal(err)
	}
	if s.externalURL != nil {
		t.Errorf("external URL %v, want none", s.externalURL)
	}
}
