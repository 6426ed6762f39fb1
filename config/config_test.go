package config

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
)

// withKey is the smallest valid module with a key: a Token key, the one
// service it may go to, and defaults.
const withKey = "{targets: [https://deploy.example.com], http_client_config: {authorization: {type: Token, credentials: k}}}"

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// parse loads text as the configuration file config.yml in dir (a new one when "").
func parse(t *testing.T, text, dir string) (*Config, error) {
	t.Helper()
	return load(writeFile(t, cmp.Or(dir, t.TempDir()), "config.yml", text))
}

func TestParseValid(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "key", "abc\n")
	cfg, err := parse(t, `
modules:
  default:
    targets: [https://deploy.example.com]
    http_client_config:
      authorization:
        type: Token
        credentials_file: key
    timeout: 3s
    concurrency: 2
    locations:
      detail_ids: [3, 5, 3]
      info_fields: [name]
  staging:
    targets: [https://staging.example.com]
    http_client_config: {authorization: {type: Token, credentials: s}}
    rate_limit: 5
    min_interval: 30s
    gzip: false
    locations:
      detail_limit: 10
  bare:
    allow_any_target: true
    http_client_config: {authorization: {type: Token, credentials: b}}
`, dir)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got := strings.Join(cfg.ModuleNames(), ","); got != "bare,default,staging" {
		t.Errorf("modules %s", got)
	}
	d := cfg.Modules["default"]
	if d.Timeout != 3*time.Second || d.Concurrency != 2 || len(d.Locations.DetailIDs) != 3 || d.Locations.InfoFields[0] != "name" {
		t.Errorf("default module settings: %+v", d)
	}
	if f := cfg.Modules["default"].HTTPClientConfig.Authorization.CredentialsFile; f != filepath.Join(dir, "key") {
		t.Errorf("credentials_file %q not resolved against the file's directory", f)
	}
	s := cfg.Modules["staging"]
	if s.RateLimit != 5 || s.MinInterval != 30*time.Second || s.Locations.DetailLimit != 10 || s.Timeout != DefaultTimeout || s.Gzip {
		t.Errorf("staging module settings: %+v", s)
	}
	b := cfg.Modules["bare"]
	if b.Concurrency != 4 || b.MaxPages == 0 || b.MaxResponseBytes == 0 || !b.Gzip {
		t.Errorf("bare module lacks defaults: %+v", b)
	}
}

func TestParseInvalid(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "empty-key", "\n")
	tests := []struct {
		name, yaml string
		want       []string // fragments of the error
	}{
		{"unknown top-level key", "modulez: {}\n", []string{"line 1", "modulez", "unknown key"}},
		{"unknown module key", "modules:\n  default:\n    timeot: 3s\n", []string{"line 3", "timeot", "unknown key"}},
		{"unknown http client key", "modules:\n  default:\n    http_client_config:\n      authorisation: {}\n", []string{"line 4", "authorisation"}},
		{"wrong type", "modules:\n  default:\n    concurrency: lots\n", []string{"line 3", "wrong type"}},
		{"bad duration", "modules:\n  default:\n    timeout: soon\n", []string{"line 3", "time.Duration"}},
		{"wrong value is not quoted", "modules:\n  default:\n    concurrency: s3cr3tkey\n", []string{"line 3", "a value"}},
		{"authorization without a key", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token}}\n", []string{"no key"}},
		{"authorization type in lower case", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: token, credentials: abc}}\n", []string{"spelled so"}},
		{"authorization without type", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {credentials: abc}}\n", []string{"type must be Token", "Bearer"}},
		{"authorization of another type", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Digest, credentials: abc}}\n", []string{"type must be Token"}},
		{"a key pasted as the type", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: \"Token s3cr3t-pasted-key\"}}\n", []string{`module "m"`, "authorization.type"}},
		{"a key pasted as a TLS version", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {tls_config: {min_version: s3cr3t-pasted-key}}\n", []string{"TLS version"}},
		{"octal-looking id", "modules:\n  m:\n    locations: {detail_ids: [0x10]}\n", []string{`module "m"`, "locations.detail_ids", "decimal"}},
		{"basic auth", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {basic_auth: {username: u, password: p}}\n", []string{"Token"}},
		{"bearer token", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {bearer_token: abc}\n", []string{"Token"}},
		{"Accept header", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials: abc}, http_headers: {Accept: {values: [text/html]}}}\n", []string{"http_client_config.http_headers: Accept is set by the exporter"}},
		{"Accept header before basic auth", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {basic_auth: {username: u, password: p}, http_headers: {Accept: {values: [text/html]}}}\n", []string{"http_client_config.http_headers: Accept is set by the exporter"}},
		{"NaN rate limit", "modules:\n  m:\n    rate_limit: .nan\n", []string{"rate_limit"}},
		{"not YAML", "modules: [\n", []string{"line"}},
		{"no modules", "modules: {}\n", []string{"no modules"}},
		{"empty module", "modules:\n  default:\n", []string{`"default"`, "empty"}},
		{"zero timeout", "modules:\n  default:\n    timeout: 0s\n", []string{"timeout"}},
		{"zero concurrency", "modules:\n  default:\n    concurrency: 0\n", []string{"concurrency"}},
		{"ids and limit", "modules:\n  m:\n    locations: {detail_ids: [1], detail_limit: 2}\n", []string{`"m"`, "conflict"}},
		{"negative id", "modules:\n  m:\n    locations: {detail_ids: [-1]}\n", []string{`module "m"`, "locations.detail_ids", "from 0"}},
		{"negative limit", "modules:\n  m:\n    locations: {detail_limit: -1}\n", []string{`module "m"`, "locations.detail_limit", "from 0"}},
		{"bad info field", "modules:\n  m:\n    locations: {info_fields: [job]}\n", []string{"info_fields", "entry 1"}},
		{"missing key file", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials_file: nope}}\n", []string{"credentials_file", "nope"}},
		{"empty key file", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials_file: empty-key}}\n", []string{"empty"}},
		{"key inline and in a file", "modules:\n  m:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials: x, credentials_file: empty-key}}\n", []string{"credentials"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, "config.yml", tt.yaml)
			lines := Check(path)
			if len(lines) != 1 {
				t.Fatalf("Check = %q, want one problem", lines)
			}
			msg := lines[0]
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q spans several lines", msg)
			}
			if strings.Contains(msg, "s3cr3t") {
				t.Errorf("error %q quotes a value that could be a key", msg)
			}
		})
	}
}

func TestStoreReload(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "config.yml", "modules:\n  default: "+withKey+"\n  other: "+withKey+"\n")
	reg := prometheus.NewPedanticRegistry()
	s := NewStore(path, reg, promslog.NewNopLogger())
	if s.Current() != nil {
		t.Error("ready before the first load")
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if s.Current() == nil {
		t.Error("not ready after loading")
	}
	okMetric := func(want float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "deployment_service_exporter_config_last_reload_successful" {
				if got := mf.GetMetric()[0].GetGauge().GetValue(); got != want {
					t.Errorf("last_reload_successful %v, want %v", got, want)
				}
				return
			}
		}
		t.Error("no last_reload_successful metric")
	}
	okMetric(1)
	if n, _ := testutil.GatherAndCount(reg, "deployment_service_exporter_config_last_reload_success_timestamp_seconds"); n != 1 {
		t.Error("no success timestamp")
	}

	// A broken file is refused and the old modules keep serving.
	writeFile(t, dir, "config.yml", "modules:\n  default: {timeout: -1s}\n")
	if err := s.Reload(); err == nil {
		t.Fatal("a bad file was accepted")
	}
	okMetric(0)
	if _, err := s.Lookup("other"); err != nil {
		t.Errorf("old module lost after a refused reload: %v", err)
	}

	// A good file replaces the modules.
	writeFile(t, dir, "config.yml", "modules:\n  fresh: "+withKey+"\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	okMetric(1)
	if _, err := s.Lookup("other"); err == nil {
		t.Error("a removed module is still served")
	}
	if _, err := s.Lookup(""); err == nil || !strings.Contains(err.Error(), "default") {
		t.Errorf("no default module: error %v", err)
	}
	if _, err := s.Lookup("fresh"); err != nil {
		t.Error(err)
	}
}

func TestStoreWithoutFile(t *testing.T) {
	s := NewStore("", prometheus.NewRegistry(), promslog.NewNopLogger())
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if s.Current() == nil {
		t.Error("the command line alone is a loaded configuration")
	}
	if _, err := s.Lookup(""); err == nil || !strings.Contains(err.Error(), "--config.file") {
		t.Errorf("probe without modules: error %v", err)
	}
}

// TestShippedExampleParses keeps deploy/prometheus/modules.yml in step with
// the parser; its key files are swapped for temporary ones.
func TestShippedExampleParses(t *testing.T) {
	b, err := os.ReadFile("../deploy/prometheus/modules.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "production.key", "p\n")
	writeFile(t, dir, "staging.key", "s\n")
	text := strings.ReplaceAll(string(b), "/etc/deployment-service/", dir+"/")
	cfg, err := parse(t, text, dir)
	if err != nil {
		t.Fatalf("the shipped example does not parse: %v", err)
	}
	if len(cfg.Modules) != 2 {
		t.Errorf("%d modules, want 2", len(cfg.Modules))
	}
}

// TestModuleFilesMustBeRegular: every file a module reads (its key, a
// header's file, its TLS files) and those of --api.http-config.file must
// be regular files of at most 64 KiB: a device, a FIFO, a directory or a
// large file is refused on the spot, naming the file, and a reload never
// waits on a FIFO (Reload would block here).
func TestModuleFilesMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	big := writeFile(t, dir, "big", strings.Repeat("k", 64<<10+1))
	for _, path := range []string{fifo, "/dev/zero", dir, big} {
		for _, block := range []string{
			"{authorization: {type: Token, credentials_file: " + path + "}}",
			"{http_headers: {X-Api-Key: {files: [" + path + "]}}}",
			"{tls_config: {cert: c, key_file: " + path + "}}",
		} {
			cfgPath := writeFile(t, dir, "config.yml", "modules:\n  m: {targets: [https://deploy.example.com], http_client_config: "+block+"}\n")
			s := NewStore(cfgPath, prometheus.NewRegistry(), promslog.NewNopLogger())
			if err := s.Reload(); err == nil || !strings.Contains(err.Error(), path+": it is") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v, want one line naming %s", block, err, path)
			}
			httpPath := writeFile(t, dir, "http.yml", block+"\n")
			if _, err := LoadHTTPClientConfig(httpPath); err == nil || !strings.Contains(err.Error(), path+": it is") {
				t.Errorf("--api.http-config.file %s: %v, want it to name %s", block, err, path)
			}
		}
	}
}

// TestEnvProxyPasswordIsACredential: a module that takes its proxy from
// the environment, where HTTP_PROXY or HTTPS_PROXY carries a password,
// lends that password to whoever names a target: it must list targets.
func TestEnvProxyPasswordIsACredential(t *testing.T) {
	const module = "modules:\n  px: {http_client_config: {proxy_from_environment: true}}\n"
	for _, tt := range []struct {
		env, value string
		refused    bool
	}{
		{"HTTPS_PROXY", "http://user:s3cr3t-proxy-pw@proxy.example.com:3128", true},
		{"http_proxy", "user:s3cr3t-proxy-pw@proxy.example.com:3128", true},
		{"HTTP_PROXY", "http://proxy.example.com:3128", false},
	} {
		t.Run(tt.env, func(t *testing.T) {
			for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
				t.Setenv(name, "")
			}
			t.Setenv(tt.env, tt.value)
			path := writeFile(t, t.TempDir(), "config.yml", module)
			problems := Check(path)
			if refused := len(problems) > 0; refused != tt.refused {
				t.Fatalf("Check = %q, want refused %v", problems, tt.refused)
			}
			if tt.refused && (!strings.Contains(problems[0], `module "px"`) || !strings.Contains(problems[0], "proxy_from_environment") || strings.Contains(problems[0], "s3cr3t")) {
				t.Errorf("Check = %q, want it to name the module and the setting, not the password", problems)
			}
			if err := NewStore(path, prometheus.NewRegistry(), promslog.NewNopLogger()).Reload(); (err != nil) != tt.refused {
				t.Errorf("reload: %v", err)
			}
			listed := writeFile(t, t.TempDir(), "config.yml", "modules:\n  px: {targets: [https://deploy.example.com], http_client_config: {proxy_from_environment: true}}\n")
			if got := Check(listed); len(got) > 0 {
				t.Errorf("with targets: %q", got)
			}
		})
	}
}

// TestWholeNumbersAreDecimal: 010 in the file is ten, never eight (YAML
// 1.1's octal), and 08 is eight; other spellings of a number are refused.
func TestWholeNumbersAreDecimal(t *testing.T) {
	cfg, err := parse(t, "modules:\n  m:\n    concurrency: 010\n    max_pages: 08\n    max_response_bytes: 0100\n    locations: {detail_ids: [010, 7, 0]}\n  n:\n    locations: {detail_limit: 011}\n", "")
	if err != nil {
		t.Fatal(err)
	}
	m, n := cfg.Modules["m"], cfg.Modules["n"]
	if m.Concurrency != 10 || m.MaxPages != 8 || m.MaxResponseBytes != 100 || !slices.Equal(m.Locations.DetailIDs, []int64{10, 7, 0}) || n.Locations.DetailLimit != 11 {
		t.Errorf("read %d, %d, %d, %v, %d; want 10, 8, 100, [10 7 0], 11", m.Concurrency, m.MaxPages, m.MaxResponseBytes, m.Locations.DetailIDs, n.Locations.DetailLimit)
	}
	for _, v := range []string{"0x10", "0o10", "1_000", "8.5", "1e3"} {
		if _, err := parse(t, "modules:\n  m: {max_pages: "+v+"}\n", ""); err == nil || !strings.Contains(err.Error(), "max_pages") {
			t.Errorf("max_pages: %s: %v, want it refused", v, err)
		}
	}
}

// FuzzWholeNumbers: whatever a number of the file says, it is read as the
// decimal number it spells, or refused; never read in another base.
func FuzzWholeNumbers(f *testing.F) {
	for _, s := range []string{"010", "08", "0x1f", "-0", "+7", "1_0", "9223372036854775807", "0b1", "1e2", " 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || strings.ContainsAny(s, "#,{}[]:\n\r\"'&*!|>%@`?") || strings.TrimSpace(s) != s {
			return // YAML syntax around the number, not the number
		}
		want, werr := strconv.ParseUint(s, 10, 63)
		cfg, err := parse(t, "modules:\n  m: {locations: {detail_ids: ["+s+"]}}\n", "")
		switch {
		case err == nil && werr != nil:
			t.Errorf("%q read as %v, but it is no decimal number", s, cfg.Modules["m"].Locations.DetailIDs)
		case err == nil && (len(cfg.Modules["m"].Locations.DetailIDs) != 1 || cfg.Modules["m"].Locations.DetailIDs[0] != int64(want)):
			t.Errorf("%q read as %v, want %d", s, cfg.Modules["m"].Locations.DetailIDs, want)
		case err != nil && werr == nil:
			t.Errorf("%q refused: %v", s, err)
		}
	})
}
