package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// recorder is a service that records every request it gets: where a key
// must never go.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // method, path and Authorization of each request
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.Path+" "+req.Header.Get("Authorization"))
		r.mu.Unlock()
		http.NotFound(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// TestProbeKeyGoesOnlyToListedTargets: through the binary, a module's key
// reaches the services its targets list, however a target is spelt, and
// nothing at all reaches any other, however it is spelt or patterned.
func TestProbeKeyGoesOnlyToListedTargets(t *testing.T) {
	listed, err := sampleservice.Start(sampleservice.Options{Key: "key-alpha-123", Locations: 4, Prefix: "/deploy"})
	if err != nil {
		t.Fatal(err)
	}
	defer listed.Close()
	rec := newRecorder(t)
	recPort := mustURL(t, rec.URL).Port()
	listedURL := mustURL(t, listed.URL())

	dir := t.TempDir()
	writeTestFile(t, dir, "alpha.key", "key-alpha-123\n")
	cfg := writeTestFile(t, dir, "config.yml", `modules:
  default:
    targets: ["`+listed.URL()+`"]
    http_client_config: {authorization: {type: Token, credentials_file: alpha.key}}
  wild:
    targets: ["http://127.0.0.1:*/deploy"]
    http_client_config: {authorization: {type: Token, credentials: key-wild-456}}
  open:
    timeout: 2s
`)
	e := startExporter(t, nil, "--config.file="+cfg)

	// The listed service in other spellings: still the listed one.
	for _, spelling := range []string{
		listed.URL(), listed.URL() + "/", strings.ToUpper(listedURL.Scheme) + "://" + listedURL.Host + "/deploy/",
		"http://127.0.0.1:0" + listedURL.Port() + "/deploy",
	} {
		if code, body := e.get(t, "/probe?target="+url.QueryEscape(spelling)); code != http.StatusOK || !strings.Contains(body, "deployment_service_up 1") {
			t.Errorf("listed target spelt %s: %d\n%s", spelling, code, body)
		}
	}

	refused := []struct{ module, target string }{
		{"default", rec.URL},
		{"default", rec.URL + "/deploy"},
		{"default", "http://localhost:" + recPort + "/deploy"},
		{"default", "http://127.0.0.1:" + recPort + listedURL.Path},
		{"default", "http://localhost:" + listedURL.Port() + "/deploy"}, // the listed port under another name
		{"default", listed.URL() + "x"},
		{"default", listed.URL() + "/api"},
		{"default", "https://127.0.0.1:" + listedURL.Port() + "/deploy"},
		{"wild", rec.URL},
		{"wild", rec.URL + "/deploy/x"},
		{"wild", rec.URL + "/deployx"},
		{"wild", "http://localhost:" + recPort + "/deploy"},
		{"wild", "http://127.0.0.1.nip.io:" + recPort + "/deploy"},
		{"wild", "https://127.0.0.1:" + recPort + "/deploy"},
		{"", rec.URL + "/deploy"}, // no module: the default one
	}
	for _, r := range refused {
		for _, debug := range []string{"", "&debug=true"} {
			code, body := e.get(t, "/probe?module="+r.module+"&target="+url.QueryEscape(r.target)+debug)
			name := r.module
			if name == "" {
				name = "default"
			}
			if code != http.StatusForbidden || !strings.Contains(body, `module "`+name+`" may not be used with target`) || strings.Count(body, "\n") != 1 {
				t.Errorf("module %q, target %s%s: %d %q, want a one-line 403", r.module, r.target, debug, code, body)
			}
		}
	}
	// Hosts that Go's transport would dial as other names (Unicode full
	// stops become dots) are refused before any matching.
	for _, spelt := range []string{"http://127\u30020\u30020\u30021:" + recPort + "/deploy", "http://127%E3%80%820.0.1:" + recPort + "/deploy"} {
		if code, body := e.get(t, "/probe?module=wild&target="+url.QueryEscape(spelt)); code != http.StatusBadRequest {
			t.Errorf("target %s: %d %q, want a 400", spelt, code, body)
		}
	}
	if got := rec.requests(); len(got) != 0 {
		t.Fatalf("unlisted targets got requests: %q", got)
	}

	// The recorder does record: a pattern that matches it, and a module
	// without credentials, reach it, the latter without any key.
	if code, _ := e.get(t, "/probe?module=wild&target="+url.QueryEscape(rec.URL+"/deploy/")); code != http.StatusOK {
		t.Errorf("pattern match: %d", code)
	}
	if code, _ := e.get(t, "/probe?module=open&target="+url.QueryEscape(rec.URL)); code != http.StatusOK {
		t.Errorf("module without credentials: %d", code)
	}
	var withKey, withoutKey int
	for _, r := range rec.requests() {
		switch {
		case strings.Contains(r, "key-alpha"):
			t.Errorf("the default module's key reached an unlisted service: %s", r)
		case strings.HasSuffix(r, " Token key-wild-456") && strings.HasPrefix(r, "GET /deploy/api/"):
			withKey++
		case strings.HasSuffix(r, " ") && !strings.HasPrefix(r, "GET /deploy/"):
			withoutKey++
		default:
			t.Errorf("unexpected request %q", r)
		}
	}
	if withKey == 0 || withoutKey == 0 {
		t.Errorf("the recorder saw %d requests of the pattern's module and %d of the keyless one, want some of each", withKey, withoutKey)
	}
	for _, secret := range []string{"key-alpha-123", "key-wild-456"} {
		if strings.Contains(e.stderr.String(), secret) {
			t.Errorf("the log holds the key %s", secret)
		}
	}
}

// TestProbeRefusesAddressSpellingsAndLongTargets: through the binary, a
// lone "*" host matches no address however it is spelt (a zone, brackets,
// a number a resolver reads as one), and targets beyond the bounds are a
// 400 that repeats nothing of them, even for a credentialed wildcard:
// none of them reaches the recorder.
func TestProbeRefusesAddressSpellingsAndLongTargets(t *testing.T) {
	rec := newRecorder(t)
	port := mustURL(t, rec.URL).Port()
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "config.yml", `modules:
  star:
    targets: ["http://*:`+port+`/deploy"]
    http_client_config: {authorization: {type: Token, credentials: key-star-789}}
  wild:
    targets: ["http://*.deploy.example.com:`+port+`"]
    http_client_config: {authorization: {type: Token, credentials: key-wild-456}}
`)
	e := startExporter(t, nil, "--config.file="+cfg)
	long := strings.Repeat("a", 100_000)
	for _, r := range []struct {
		module, target string
		code           int
	}{
		{"star", "http://[::ffff:127.0.0.1%25lo]:" + port + "/deploy", http.StatusBadRequest},
		{"star", "http://[::1%25x]:" + port + "/deploy", http.StatusBadRequest},
		{"star", "http://[::ffff:127.0.0.1]:" + port + "/deploy", http.StatusForbidden},
		{"star", "http://[::ffff:7f00:1]:" + port + "/deploy", http.StatusForbidden},
		{"star", "http://2130706433:" + port + "/deploy", http.StatusForbidden},
		{"star", "http://0x7f000001:" + port + "/deploy", http.StatusForbidden},
		{"star", "http://017700000001:" + port + "/deploy", http.StatusForbidden},
		{"star", "http://localhost:" + port + "/deploy/" + long, http.StatusBadRequest},
		{"wild", "http://" + long[:64] + ".deploy.example.com:" + port, http.StatusBadRequest},
		{"wild", "http://" + long + ".deploy.example.com:" + port, http.StatusBadRequest},
	} {
		code, body := e.get(t, "/probe?module="+r.module+"&target="+url.QueryEscape(r.target))
		if code != r.code || strings.Count(body, "\n") != 1 || strings.Contains(body, long[:64]) {
			t.Errorf("module %s, target %.80s: %d %.200q, want a one-line %d that does not repeat it", r.module, r.target, code, body, r.code)
		}
	}
	if got := rec.requests(); len(got) != 0 {
		t.Fatalf("refused targets got requests: %q", got)
	}
	if strings.Contains(e.stderr.String(), long[:64]) {
		t.Error("the log repeats a refused target")
	}
	// The pattern does match a name, so the recorder would have seen them.
	if code, _ := e.get(t, "/probe?module=star&target="+url.QueryEscape("http://localhost:"+port+"/deploy")); code != http.StatusOK || len(rec.requests()) == 0 {
		t.Errorf("a name the pattern matches: %d, %d requests", code, len(rec.requests()))
	}
}

// TestBadModuleRefusedEverywhere: a module with a key and no targets is a
// bad file at start, on reload (the old file keeps serving) and for
// --config.check, each time with a line naming the module.
func TestBadModuleRefusedEverywhere(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "key-k", Locations: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	dir := t.TempDir()
	bad := "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n    http_client_config: {authorization: {type: Token, credentials: key-k}}\n" +
		"  leaky:\n    http_client_config: {authorization: {type: Token, credentials: key-k}}\n"
	badPath := writeTestFile(t, dir, "bad.yml", bad)
	const wantLine = `module "leaky": carries credentials (http_client_config.authorization) but lists no targets`
	// logfmt escapes the quotes around the module's name.
	const wantLog = `module \"leaky\": carries credentials (http_client_config.authorization) but lists no targets`

	// At start.
	start := exec.Command(binary, "--web.listen-address="+freeAddr(t), "--config.file="+badPath)
	start.Env = cleanEnv()
	var startErr bytes.Buffer
	start.Stderr = &startErr
	if err := start.Run(); err == nil {
		t.Fatal("the exporter started with the bad file")
	}
	if lines := strings.Split(strings.TrimSpace(startErr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], wantLog) {
		t.Errorf("start: want one line with %q, got:\n%s", wantLine, startErr.String())
	}

	// By --config.check, which serves nothing.
	code, stdout, stderr := runCheck(t, "--config.file="+badPath)
	if code != 1 || stdout != "" || !strings.Contains(stderr, wantLine) || !strings.Contains(stderr, badPath) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("--config.check of the bad file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// On reload, by HTTP and by SIGHUP: refused, the old file serves on.
	cfgPath := writeTestFile(t, dir, "config.yml", "modules:\n  default:\n    targets: [\""+svc.URL()+"\"]\n    http_client_config: {authorization: {type: Token, credentials: key-k}}\n")
	e := startExporter(t, nil, "--config.file="+cfgPath)
	writeTestFile(t, dir, "config.yml", bad)
	if code, body := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, wantLine) {
		t.Errorf("reload of the bad file: %d %q", code, body)
	}
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SIGHUP's refusal was logged", func() bool {
		return strings.Count(e.stderr.String(), wantLog) >= 2
	})
	if _, m := e.get(t, "/metrics"); !strings.Contains(m, "deployment_service_exporter_config_last_reload_successful 0") {
		t.Error("the refused reload is not reported")
	}
	if code, body := e.get(t, "/probe?target="+url.QueryEscape(svc.URL())); code != http.StatusOK || !strings.Contains(body, "deployment_service_up 1") {
		t.Errorf("the old file stopped serving: %d\n%s", code, body)
	}
	if code, _ := e.get(t, "/probe?module=leaky&target="+url.QueryEscape(svc.URL())); code != http.StatusBadRequest {
		t.Errorf("the refused file's module answers %d", code)
	}
}

// TestClientCertificatesAndProxyCredentialsBindToTargets: a client
// certificate, a proxy's password and proxy_connect_header lend the
// module's authority as a key does, so a module with any of them and no
// targets is refused at start, by --config.check and on reload.
func TestClientCertificatesAndProxyCredentialsBindToTargets(t *testing.T) {
	dir := t.TempDir()
	bad := "modules:\n" +
		"  cert:\n    http_client_config: {tls_config: {cert_file: c.pem, key_file: k.pem}}\n" +
		"  proxy:\n    http_client_config: {proxy_url: 'http://u:proxy-pw-321@127.0.0.1:3128'}\n" +
		"  connect:\n    http_client_config: {proxy_url: 'http://127.0.0.1:3128', proxy_connect_header: {Proxy-Authorization: [Basic connect-secret-654]}}\n"
	badPath := writeTestFile(t, dir, "bad.yml", bad)
	want := []string{
		`module "cert": carries credentials (http_client_config.tls_config (a client certificate)) but lists no targets`,
		`module "connect": carries credentials (http_client_config.proxy_connect_header) but lists no targets`,
		`module "proxy": carries credentials (http_client_config.proxy_url (a password)) but lists no targets`,
	}
	secrets := []string{"proxy-pw-321", "connect-secret-654"}

	code, stdout, stderr := runCheck(t, "--config.file="+badPath)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if code != 1 || stdout != "" || len(lines) != len(want) {
		t.Fatalf("--config.check: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("--config.check line %q lacks %q", lines[i], w)
		}
	}

	start := exec.Command(binary, "--web.listen-address="+freeAddr(t), "--config.file="+badPath)
	start.Env = cleanEnv()
	var startErr bytes.Buffer
	start.Stderr = &startErr
	if err := start.Run(); err == nil || strings.Count(strings.TrimSpace(startErr.String()), "\n") != 0 || !strings.Contains(startErr.String(), "carries credentials") {
		t.Errorf("start: %v, want one line refusing the file:\n%s", err, startErr.String())
	}

	cfgPath := writeTestFile(t, dir, "config.yml", "modules:\n  default: {}\n")
	e := startExporter(t, nil, "--config.file="+cfgPath)
	writeTestFile(t, dir, "config.yml", bad)
	if code, body := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, want[0]) {
		t.Errorf("reload: %d %q", code, body)
	}
	for _, secret := range secrets {
		if strings.Contains(stderr+startErr.String()+e.stderr.String(), secret) {
			t.Errorf("a proxy secret reached the output")
		}
	}
}

// TestKeyFilesMustBeRegularFiles: a key file that is a device or a FIFO
// is refused with one line naming it at start, by --config.check and on
// reload, and the reload answers at once instead of waiting on the FIFO.
func TestKeyFilesMustBeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "key.fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	start := exec.Command(binary, "--web.listen-address="+freeAddr(t), "--api.url=http://127.0.0.1:1", "--api.key-file=/dev/zero")
	start.Env = cleanEnv()
	var startErr bytes.Buffer
	start.Stderr = &startErr
	if err := start.Run(); err == nil || strings.Count(strings.TrimSpace(startErr.String()), "\n") != 0 ||
		!strings.Contains(startErr.String(), "--api.key-file: cannot read the key file /dev/zero: it is a device, not a regular file") {
		t.Errorf("start with /dev/zero: %v\n%s", err, startErr.String())
	}

	withKey := func(file string) string {
		return "modules:\n  default:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials_file: " + file + "}}\n"
	}
	bad := writeTestFile(t, dir, "bad.yml", withKey(fifo))
	if code, _, stderr := runCheck(t, "--config.file="+bad); code != 1 || !strings.Contains(stderr, fifo+": it is a FIFO, not a regular file") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("--config.check with a FIFO: exit %d, %q", code, stderr)
	}

	writeTestFile(t, dir, "key", "key-k\n")
	cfgPath := writeTestFile(t, dir, "config.yml", withKey("key"))
	e := startExporter(t, nil, "--config.file="+cfgPath)
	writeTestFile(t, dir, "config.yml", withKey(fifo))
	for range 2 {
		if code, body := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, fifo+": it is a FIFO") {
			t.Errorf("reload with a FIFO: %d %q", code, body)
		}
	}
	writeTestFile(t, dir, "config.yml", withKey("key"))
	if code, body := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusOK {
		t.Errorf("reload after the FIFO: %d %q", code, body)
	}
}

// TestUnreadableKeyFileSaidPlainly: once the key file behind /metrics
// can no longer be read (here a FIFO took its place), nothing is sent,
// the endpoints are down, the log names the file, and no failure of the
// service or the network is counted.
func TestUnreadableKeyFileSaidPlainly(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "key-k", Locations: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	dir := t.TempDir()
	keyFile := writeTestFile(t, dir, "key", "key-k\n")
	e := startExporter(t, nil, "--api.url="+svc.URL(), "--api.key-file="+keyFile, "--api.timeout=5s")
	if _, m := e.get(t, "/metrics"); !strings.Contains(m, "deployment_service_up 1") {
		t.Fatalf("before: %s", m)
	}
	sent := svc.Service.TotalRequests()
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(keyFile); err != nil {
		t.Fatal(err)
	}
	_, m := e.get(t, "/metrics")
	for _, want := range []string{
		`deployment_service_endpoint_up{endpoint="root"} 0`,
		`deployment_service_request_errors_total{endpoint="root",reason="network"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if n := svc.Service.TotalRequests(); n != sent {
		t.Errorf("%d requests sent without a key", n-sent)
	}
	eventually(t, "the log names the key file", func() bool {
		return strings.Contains(e.stderr.String(), "cannot read the key file "+keyFile+": it is a FIFO, not a regular file")
	})
}

// runCheck runs the binary with --config.check and args.
func runCheck(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--config.check"}, args...)...)
	cmd.Env = cleanEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestConfigCheck: --config.check reads every file as a start would,
// building each HTTP client, names every problem and serves nothing.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, dir, "key", "key-k\n")
	good := writeTestFile(t, dir, "good.yml", "modules:\n  default:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials_file: key}}\n")
	twoBad := writeTestFile(t, dir, "two-bad.yml", "modules:\n"+
		"  ca:\n    targets: [https://deploy.example.com]\n    http_client_config: {tls_config: {ca_file: missing-ca.pem}, authorization: {type: Token, credentials_file: key}}\n"+
		"  fine: {}\n"+
		"  nokey:\n    targets: [https://deploy.example.com]\n    http_client_config: {authorization: {type: Token, credentials_file: missing.key}}\n")
	httpBad := writeTestFile(t, dir, "http.yml", "tls_config: {cert_file: missing-cert.pem, key_file: missing-key.pem}\n")
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantLines []string // each a fragment of one line of stderr, in order
	}{
		{"a good file", []string{"--config.file=" + good}, 0, nil},
		{"a good file and a service", []string{"--config.file=" + good, "--api.url=http://127.0.0.1:1", "--api.key-file=" + dir + "/key"}, 0, nil},
		{"the demo", []string{"--demo"}, 0, nil},
		{"every bad module", []string{"--config.file=" + twoBad}, 1, []string{`module "ca": http_client_config cannot be used`, `module "nokey": http_client_config.authorization.credentials_file`}},
		{"a missing file", []string{"--config.file=" + dir + "/none.yml"}, 1, []string{"none.yml"}},
		{"a bad HTTP client file", []string{"--api.http-config.file=" + httpBad}, 1, []string{"--api.http-config.file"}},
		{"a bad flag", []string{"--config.file=" + good, "--api.timeout=0s"}, 1, []string{"--api.timeout"}},
		{"no key for the service", []string{"--api.url=http://127.0.0.1:1"}, 1, []string{"no API key"}},
		{"nothing to check", nil, 1, []string{"no service to watch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCheck(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.wantCode, stderr)
			}
			if tt.wantCode == 0 {
				if stdout != "OK\n" || stderr != "" {
					t.Errorf("stdout %q, stderr %q; want OK alone", stdout, stderr)
				}
				return
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if stdout != "" || len(lines) != len(tt.wantLines) {
				t.Fatalf("stdout %q; stderr lines %q, want %d", stdout, lines, len(tt.wantLines))
			}
			for i, w := range tt.wantLines {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %q lacks %q", lines[i], w)
				}
			}
		})
	}
}

// TestServiceDiscovery: /sd lists each module's concrete targets with the
// labels that make Prometheus probe them with that module, and follows a
// reload.
func TestServiceDiscovery(t *testing.T) {
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "config.yml", `modules:
  default:
    targets: [https://b.example.com/, "https://*.example.com", HTTPS://A.example.com:443]
    http_client_config: {authorization: {type: Token, credentials: key-k}}
  patterns-only:
    targets: ["http://127.0.0.1:*"]
    http_client_config: {authorization: {type: Token, credentials: key-k}}
  open: {}
`)
	e := startExporter(t, nil, "--config.file="+cfg)
	want := `[{"targets":["https://b.example.com","https://a.example.com"],"labels":{"__param_module":"default","module":"default"}}]`
	checkSD(t, e, "/sd", want)
	checkSD(t, e, "/sd?module=default", want)
	checkSD(t, e, "/sd?module=open", `[]`)
	if code, body := e.get(t, "/sd?module=nope"); code != http.StatusBadRequest || !strings.Contains(body, `unknown module "nope"`) {
		t.Errorf("unknown module: %d %q", code, body)
	}
	if code, _ := e.do(t, http.MethodPost, "/sd"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /sd answered %d", code)
	}

	writeTestFile(t, dir, "config.yml", `modules:
  staging:
    targets: [http://deploy-staging.example.com:8080/deploy]
    http_client_config: {authorization: {type: Token, credentials: key-k}}
  other:
    targets: [https://c.example.com, https://d.example.com]
`)
	if code, body := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	checkSD(t, e, "/sd", `[{"targets":["https://c.example.com","https://d.example.com"],"labels":{"__param_module":"other","module":"other"}},`+
		`{"targets":["http://deploy-staging.example.com:8080/deploy"],"labels":{"__param_module":"staging","module":"staging"}}]`)
}

func checkSD(t *testing.T, e *exporter, path, want string) {
	t.Helper()
	resp, body := fetch(t, "http://"+e.addr+path, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got, exp any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, body)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, exp); g != w {
		t.Errorf("%s:\n got %s\nwant %s", path, g, w)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestEveryFileMustBeRegular: --config.file, --api.http-config.file and
// --web.config.file that are a FIFO, a device or a directory stop the
// start and --config.check at once, with one line naming the file.
func TestEveryFileMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	for _, path := range []string{fifo, "/dev/zero", dir} {
		for _, flag := range []string{"--config.file", "--api.http-config.file", "--web.config.file"} {
			args := []string{flag + "=" + path, "--api.url=http://127.0.0.1:1", "--web.listen-address=" + freeAddr(t)}
			for _, check := range []bool{false, true} {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang, not a timing
				cmd := exec.CommandContext(ctx, binary, args...)
				if check {
					cmd = exec.CommandContext(ctx, binary, append(args, "--config.check")...)
				}
				cmd.Env = append(cleanEnv(), "DEPLOYMENT_SERVICE_API_KEY=k")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				hung := ctx.Err() != nil
				cancel()
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				if err == nil || hung || len(lines) != 1 || !strings.Contains(lines[0], path+": it is") {
					t.Errorf("%s=%s (check %v): %v, want one line naming the file:\n%s", flag, path, check, err, stderr.String())
				}
			}
		}
	}
}
