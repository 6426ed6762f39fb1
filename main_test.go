package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"log"
	"maps"
	"math"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/collector"
	moduleconfig "github.com/deployment-service/deployment_service_exporter/config"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// binary is the exporter built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dse-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "deployment_service_exporter")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// exporter is the binary running on a free loopback port.
type exporter struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
}

// syncBuffer is the exporter's log, read by tests while the process
// writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddr returns a loopback address nothing listens on, its port below the kernel's ephemeral range: a port
// the kernel handed out for ":0" may go to the next ":0" listener, such as the one of --demo's sample service.
func freeAddr(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if n, err := strconv.Atoi(strings.Fields(string(b) + " 0")[0]); err == nil && n > 11000 {
			low = n
		}
	}
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+mathrand.IntN(low-10000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			_ = l.Close()
			return addr
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

func startExporter(t *testing.T, env []string, args ...string) *exporter {
	t.Helper()
	e := &exporter{addr: freeAddr(t), stderr: &syncBuffer{}}
	e.cmd = exec.Command(binary, append([]string{"--web.listen-address=" + e.addr}, args...)...)
	e.cmd.Env = append(cleanEnv(), env...)
	e.cmd.Stderr = e.stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		_ = e.cmd.Wait()
		if t.Failed() {
			t.Logf("exporter log:\n%s", e.stderr)
		}
	})
	eventually(t, "the exporter became ready", func() bool {
		code, _ := e.get(t, "/-/ready")
		return code == http.StatusOK
	})
	return e
}

// eventually polls cond until it holds. The minute only turns a hang into
// a failure: a process starting or reloading takes far less, even on a
// busy machine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within a minute: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanEnv keeps the test's environment from configuring the exporter.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEPLOYMENT_SERVICE_") {
			env = append(env, kv)
		}
	}
	return env
}

func (e *exporter) get(t *testing.T, path string) (int, string) {
	t.Helper()
	return e.do(t, http.MethodGet, path)
}

func (e *exporter) do(t *testing.T, method, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+e.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDemoEndToEnd(t *testing.T) {
	e := startExporter(t, nil, "--demo", "--locations.detail-limit=3", "--locations.info-field=name")
	code, body := e.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d", code)
	}
	for _, want := range []string{
		"deployment_service_up 1",
		"deployment_service_projects 5",
		"deployment_service_locations 300",
		`deployment_service_location_up{location_id="1"} 1`,
		`deployment_service_location_up{location_id="3"} 1`,
		`deployment_service_endpoint_up{endpoint="location_detail"} 1`,
		`deployment_service_request_errors_total{endpoint="root",reason="timeout"} 0`,
		"deployment_service_exporter_build_info{",
		"deployment_service_exporter_config_last_reload_successful 1",
		"go_goroutines ",
		"process_cpu_seconds_total ",
		"promhttp_metric_handler_requests_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "Token ") {
		t.Error("/metrics shows an Authorization value")
	}
	code, landing := e.get(t, "/")
	if code != http.StatusOK || !strings.Contains(landing, `id="targets"`) || !strings.Contains(landing, `#poll-1"`) {
		t.Errorf("landing page: %d\n%s", code, landing)
	}
	if code, page := e.get(t, "/polls/1"); code != http.StatusOK || !strings.Contains(page, "/api/projects/locations/") {
		t.Errorf("poll's text: %d\n%s", code, page)
	}
	if m := regexp.MustCompile(`href="(target\?[^"#]+)"`).FindStringSubmatch(landing); m == nil {
		t.Error("the landing page links to no target's page")
	} else if code, page := e.get(t, "/"+html.UnescapeString(m[1])); code != http.StatusOK || !strings.Contains(page, `id="demo"`) {
		t.Errorf("the target's page of --demo does not say it shows the sample service: %d\n%s", code, page)
	}
	if want := "open=http://" + e.addr + "/"; !strings.Contains(e.stderr.String(), want) {
		t.Errorf("the start log of --demo does not say where to look (%s)", want)
	}
	if !strings.Contains(landing, `id="demo"`) || !strings.Contains(landing, "embedded sample service") {
		t.Errorf("the landing page of --demo does not say it shows the sample service:\n%s", landing)
	}
	for _, path := range []string{"/", "/metrics"} {
		if resp, _ := fetch(t, "http://"+e.addr+path, nil); resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s lacks the security headers: %v", path, resp.Header)
		}
	}
	if code, _ := e.get(t, "/-/healthy"); code != http.StatusOK {
		t.Errorf("/-/healthy answered %d", code)
	}
}

// TestDemoFaultsEndToEnd: --demo.fault makes the demo fail as asked, in
// that view only (issue 23).
func TestDemoFaultsEndToEnd(t *testing.T) {
	tests := []struct {
		fault string
		want  []string
		check func(t *testing.T, e *exporter, body string)
	}{
		{"root:500", []string{"deployment_service_up 0", `deployment_service_endpoint_up{endpoint="root"} 0`,
			`deployment_service_endpoint_status_code{endpoint="root"} 500`, `deployment_service_endpoint_up{endpoint="projects"} 1`}, nil},
		{"root:401", []string{`deployment_service_endpoint_up{endpoint="root"} 0`, `deployment_service_endpoint_status_code{endpoint="root"} 401`}, nil},
		{"location_detail/3:404", []string{"deployment_service_up 1", `deployment_service_location_up{location_id="3"} 0`,
			`deployment_service_location_up{location_id="2"} 1`, `deployment_service_location_up{location_id="4"} 1`,
			`deployment_service_endpoint_up{endpoint="location_detail"} 0`, `deployment_service_endpoint_status_code{endpoint="location_detail"} 404`}, nil},
		{"locations:429/30", []string{`deployment_service_endpoint_up{endpoint="locations"} 0`, `deployment_service_endpoint_status_code{endpoint="locations"} 429`,
			`deployment_service_requests_total{code="429",endpoint="locations"} 1`}, func(t *testing.T, e *exporter, first string) {
			if until := sampleValue(first, "deployment_service_hold_off_until_timestamp_seconds"); !(until > float64(time.Now().Unix())) {
				t.Errorf("no hold-off after a 429 with Retry-After: 30: until %v", until)
			}
			// Held off: the next scrape sends nothing.
			_, second := e.get(t, "/metrics")
			for _, series := range []string{`deployment_service_requests_total{code="429",endpoint="locations"}`, `deployment_service_requests_total{code="200",endpoint="root"}`} {
				if a, b := sampleValue(first, series), sampleValue(second, series); a != 1 || b != 1 {
					t.Errorf("%s: %v, then %v during the hold-off; want 1 and 1", series, a, b)
				}
			}
		}},
		{"projects:delay/2.5s", []string{"deployment_service_up 1"}, func(t *testing.T, _ *exporter, body string) {
			if d := sampleValue(body, `deployment_service_endpoint_duration_seconds{endpoint="projects"}`); !(d >= 2.5) {
				t.Errorf("projects took %vs with a delay of 2.5s", d)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			t.Parallel()
			e := startExporter(t, nil, "--demo", "--demo.fault="+tt.fault)
			_, body := e.get(t, "/metrics")
			for _, want := range tt.want {
				if !strings.Contains(body, want+"\n") {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if tt.check != nil {
				tt.check(t, e, body)
			}
			if t.Failed() {
				t.Logf("/metrics:\n%s", body)
			}
		})
	}
}

// sampleValue is the value of series (a name with its labels, as exposed)
// in a text exposition; NaN when absent.
func sampleValue(body, series string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return math.NaN()
}

// TestSingleTargetEndToEnd runs the binary the way most users do: the URL
// and the key from the environment, or the key from a file that rotates.
func TestSingleTargetEndToEnd(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "single-key-one", Locations: 42, PageSize: 10, Prefix: "/deploy"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	t.Run("key from the environment", func(t *testing.T) {
		e := startExporter(t, []string{"DEPLOYMENT_SERVICE_URL=" + svc.URL(), "DEPLOYMENT_SERVICE_API_KEY=single-key-one"}, "--locations.detail-id=7")
		_, body := e.get(t, "/metrics")
		for _, want := range []string{"deployment_service_up 1", "deployment_service_locations 42", `deployment_service_location_up{location_id="7"} 1`,
			`deployment_service_target_info{url="` + svc.URL() + `"} 1`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if svc.Service.SawWrongAuth() {
			t.Error("the service saw a wrong Authorization header")
		}
		for _, rec := range svc.Service.Log() {
			if !rec.AuthOK || rec.Accept != "application/json" || !strings.HasPrefix(rec.UserAgent, "deployment_service_exporter/") || rec.Method != http.MethodGet {
				t.Errorf("request %s %s: auth ok %v, Accept %q, User-Agent %q", rec.Method, rec.Path, rec.AuthOK, rec.Accept, rec.UserAgent)
			}
		}
	})

	t.Run("key from a rotating file", func(t *testing.T) {
		dir := t.TempDir()
		keyFile := writeTestFile(t, dir, "key", "single-key-one\n")
		e := startExporter(t, nil, "--api.url="+svc.URL(), "--api.key-file="+keyFile)
		if _, body := e.get(t, "/metrics"); !strings.Contains(body, "deployment_service_up 1") {
			t.Fatalf("first key: not up\n%s", body)
		}
		// Rotate: a new file renamed over the old one, then the service
		// accepts only the new key.
		if err := os.Rename(writeTestFile(t, dir, "key.new", "single-key-two\n"), keyFile); err != nil {
			t.Fatal(err)
		}
		svc.Service.SetKey("single-key-two")
		if _, body := e.get(t, "/metrics"); !strings.Contains(body, "deployment_service_up 1") {
			t.Errorf("rotated key: not up without a restart\n%s", body)
		}
		if svc.Service.SawWrongAuth() {
			t.Error("the service saw a wrong Authorization header")
		}
	})
}

func TestProbeTwoServicesEndToEnd(t *testing.T) {
	svcA, err := sampleservice.Start(sampleservice.Options{Key: "e2e-key-alpha", Locations: 17})
	if err != nil {
		t.Fatal(err)
	}
	defer svcA.Close()
	svcB, err := sampleservice.Start(sampleservice.Options{Key: "e2e-key-bravo", Locations: 29, PageSize: 10, Prefix: "/deploy"})
	if err != nil {
		t.Fatal(err)
	}
	defer svcB.Close()

	dir := t.TempDir()
	writeTestFile(t, dir, "alpha.key", "e2e-key-alpha\n")
	writeTestFile(t, dir, "bravo.key", "e2e-key-bravo\n")
	good := `modules:
  default:
    targets: ["http://127.0.0.1:*"]
    http_client_config: {authorization: {type: Token, credentials_file: alpha.key}}
  bravo:
    targets: ["http://127.0.0.1:*/deploy"]
    http_client_config: {authorization: {type: Token, credentials_file: bravo.key}}
    locations: {detail_ids: [2]}
`
	cfgPath := writeTestFile(t, dir, "config.yml", good)
	e := startExporter(t, nil, "--config.file="+cfgPath)

	_, a := e.get(t, "/probe?target="+url.QueryEscape(svcA.URL()))
	_, b := e.get(t, "/probe?module=bravo&target="+url.QueryEscape(svcB.URL()))
	if !strings.Contains(a, "deployment_service_up 1") || !strings.Contains(a, "deployment_service_locations 17") {
		t.Errorf("probe of A:\n%s", a)
	}
	if !strings.Contains(b, "deployment_service_up 1") || !strings.Contains(b, `deployment_service_location_up{location_id="2"} 1`) {
		t.Errorf("probe of B:\n%s", b)
	}
	if svcA.Service.SawWrongAuth() || svcB.Service.SawWrongAuth() {
		t.Error("a service saw a key other than its own")
	}
	if code, msg := e.get(t, "/probe?module=nope&target="+url.QueryEscape(svcA.URL())); code != http.StatusBadRequest {
		t.Errorf("unknown module: %d %s", code, msg)
	}
	if code, msg := e.get(t, "/probe?target=ftp://x"); code != http.StatusBadRequest {
		t.Errorf("bad target: %d %s", code, msg)
	}

	// A broken file is refused over HTTP and the old modules keep serving.
	writeTestFile(t, dir, "config.yml", "modules:\n  default: {timeout: nonsense}\n")
	if code, _ := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusInternalServerError {
		t.Errorf("reload of a broken file answered %d, want 500", code)
	}
	if _, m := e.get(t, "/metrics"); !strings.Contains(m, "deployment_service_exporter_config_last_reload_successful 0") {
		t.Error("a refused reload is not reported")
	}
	if _, b := e.get(t, "/probe?module=bravo&target="+url.QueryEscape(svcB.URL())); !strings.Contains(b, "deployment_service_up 1") {
		t.Error("the old modules stopped serving after a refused reload")
	}

	// SIGHUP loads a fixed file: the bravo module is gone.
	writeTestFile(t, dir, "config.yml", "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n    http_client_config: {authorization: {type: Token, credentials_file: alpha.key}}\n")
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SIGHUP reloaded the file", func() bool {
		_, m := e.get(t, "/metrics")
		return strings.Contains(m, "deployment_service_exporter_config_last_reload_successful 1")
	})
	if code, _ := e.get(t, "/probe?module=bravo&target="+url.QueryEscape(svcB.URL())); code != http.StatusBadRequest {
		t.Errorf("a removed module still answers %d", code)
	}
	if code, _ := e.get(t, "/-/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload answered %d, want 405", code)
	}
}

// TestProbeFamiliesEndToEnd probes two services through the binary, one
// well and one failing, twice each: every answer carries the per-scrape
// families and the poll counters of its own target, names its target, and
// holds neither request families nor anything of the exporter's own;
// /metrics holds none of the targets' metrics.
func TestProbeFamiliesEndToEnd(t *testing.T) {
	good, err := sampleservice.Start(sampleservice.Options{Key: "e2e-key-fam", Locations: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bad, err := sampleservice.Start(sampleservice.Options{Key: "e2e-key-fam", Locations: 7, Prefix: "/deploy"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Service.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Status: 500})

	dir := t.TempDir()
	writeTestFile(t, dir, "key", "e2e-key-fam\n")
	cfg := writeTestFile(t, dir, "config.yml", "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\", \"http://127.0.0.1:*/deploy\"]\n    http_client_config: {authorization: {type: Token, credentials_file: key}}\n    locations: {detail_ids: [3]}\n")
	e := startExporter(t, nil, "--config.file="+cfg)

	families := []string{
		"deployment_service_up", "deployment_service_endpoint_up", "deployment_service_endpoint_duration_seconds",
		"deployment_service_endpoint_status_code", "deployment_service_location_up", "deployment_service_location_detail_duration_seconds",
		"deployment_service_location_info", "deployment_service_scrape_duration_seconds", "deployment_service_poll_timestamp_seconds",
		"deployment_service_hold_off_until_timestamp_seconds", "deployment_service_polls_total",
		"deployment_service_poll_failures_total", "deployment_service_target_info",
	}
	for _, tt := range []struct {
		name, url string
		want      []string
	}{
		{"good", good.URL(), []string{
			"deployment_service_up 1",
			"deployment_service_polls_total 2",
			"deployment_service_poll_failures_total 0",
			`deployment_service_target_info{url="` + good.URL() + `"} 1`,
		}},
		{"failing", bad.URL() + "/", []string{
			"deployment_service_up 0",
			"deployment_service_polls_total 2",
			"deployment_service_poll_failures_total 2",
			`deployment_service_endpoint_failure_info{endpoint="projects",reason="http_status"} 1`,
			`deployment_service_target_info{url="` + bad.URL() + `"} 1`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body string
			for range 2 {
				var code int
				if code, body = e.get(t, "/probe?target="+url.QueryEscape(tt.url)); code != http.StatusOK {
					t.Fatalf("probe answered %d: %s", code, body)
				}
			}
			for _, want := range tt.want {
				if !strings.Contains(body, "\n"+want+"\n") {
					t.Errorf("the second probe lacks %s", want)
				}
			}
			names := sampleNames(body)
			for _, f := range families {
				if !names[f] && !names[f+"_count"] {
					t.Errorf("the probe lacks the family %s", f)
				}
			}
			for name := range names {
				if !strings.HasPrefix(name, "deployment_service_") || strings.HasPrefix(name, "deployment_service_exporter_") {
					t.Errorf("the probe carries %s, which is the exporter's own", name)
				}
				if strings.HasPrefix(name, "deployment_service_request") {
					t.Errorf("the probe carries %s, which is for --api.url alone", name)
				}
			}
			if t.Failed() {
				t.Logf("second probe:\n%s", body)
			}
		})
	}
	_, m := e.get(t, "/metrics")
	for _, absent := range []string{"deployment_service_requests_total", "deployment_service_request_errors_total", "deployment_service_target_info", "deployment_service_up"} {
		if strings.Contains(m, absent) {
			t.Errorf("/metrics without --api.url carries %s", absent)
		}
	}
}

func TestStartupErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"nothing to watch", nil, nil, "--api.url"},
		{"no key", nil, []string{"--api.url=http://127.0.0.1:1"}, "DEPLOYMENT_SERVICE_API_KEY"},
		{"bad URL from the environment", []string{"DEPLOYMENT_SERVICE_URL=ftp://x", "DEPLOYMENT_SERVICE_API_KEY=k"}, nil, "--api.url"},
		{"unreadable key file", []string{"DEPLOYMENT_SERVICE_API_KEY_FILE=" + filepath.Join(dir, "missing")}, []string{"--api.url=http://127.0.0.1:1"}, "key file"},
		{"bad info field", []string{"DEPLOYMENT_SERVICE_API_KEY=k"}, []string{"--api.url=http://127.0.0.1:1", "--locations.info-field=__x"}, "reserved"},
		{"conflicting subset", []string{"DEPLOYMENT_SERVICE_API_KEY=k"}, []string{"--api.url=http://127.0.0.1:1", "--locations.detail-id=1", "--locations.detail-limit=2"}, "conflict"},
		{"unknown flag", nil, []string{"--api.urll=x"}, "unknown long flag"},
		{"missing config file", nil, []string{"--config.file=" + filepath.Join(dir, "none.yml")}, "none.yml"},
		{"negative max requests", nil, []string{"--demo", "--web.max-requests=-1"}, "--web.max-requests"},
		{"relative external URL", nil, []string{"--demo", "--web.external-url=/ops"}, "--web.external-url"},
		{"demo fault without demo", nil, []string{"--api.url=http://127.0.0.1:1", "--demo.fault=root:500"}, "--demo.fault makes the sample service of --demo fail"},
		{"missing HTTP config file", []string{"DEPLOYMENT_SERVICE_API_KEY=k"}, []string{"--api.url=http://127.0.0.1:1", "--api.http-config.file=" + filepath.Join(dir, "http.yml")}, "--api.http-config.file"},
		{"key in the HTTP config file and the environment", []string{"DEPLOYMENT_SERVICE_API_KEY=k"}, []string{"--api.url=http://127.0.0.1:1", "--api.http-config.file=" + writeTestFile(t, dir, "token.yml", "authorization: {type: Token, credentials: k2}\n")}, "one place"},
		{"basic auth in the HTTP config file", nil, []string{"--api.url=http://127.0.0.1:1", "--api.http-config.file=" + writeTestFile(t, dir, "basic.yml", "basic_auth: {username: u, password: p}\n")}, "--api.http-config.file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, tt.args...)
			cmd.Env = append(cleanEnv(), tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatal("the exporter started")
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("want one line mentioning %q, got:\n%s", tt.want, stderr.String())
			}
		})
	}
}

// TestFlagValueErrors checks that a flag value kingpin cannot parse stops
// the start with status 2 and one line naming the flag and what it takes.
func TestFlagValueErrors(t *testing.T) {
	tests := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--api.timeout=abc"}, `--api.timeout: "abc" is not a duration, such as 10s`},
		{nil, []string{"--api.min-interval=1"}, `--api.min-interval: "1" is not a duration, such as 10s`},
		{nil, []string{"--locations.detail-id=abc"}, `--locations.detail-id: "abc" is not a whole number`},
		{nil, []string{"--locations.detail-limit=x"}, `--locations.detail-limit: "x" is not a whole number`},
		{nil, []string{"--api.max-pages=1.5"}, `--api.max-pages: "1.5" is not a whole number`},
		{nil, []string{"--api.concurrency=2e3"}, `--api.concurrency: "2e3" is not a whole number`},
		{nil, []string{"--web.max-requests=many"}, `--web.max-requests: "many" is not a whole number`},
		{nil, []string{"--api.rate-limit=fast"}, `--api.rate-limit: "fast" is not a number`},
		{nil, []string{"--api.max-response-bytes=abc"}, `--api.max-response-bytes: "abc" is not a size in bytes`},
		{nil, []string{"--api.concurrency=99999999999999999999"}, `--api.concurrency: "99999999999999999999" is out of range`},
		{nil, []string{"--api.gzip=false"}, "--api.gzip takes no value: give --api.gzip or --no-api.gzip"},
		{nil, []string{"--no-api.gzip=true"}, "--no-api.gzip takes no value: give --api.gzip or --no-api.gzip"},
		{nil, []string{"--log.level=loud"}, "--log.level: "},
		{nil, []string{"--demo", "--demo.fault=root:418"}, `--demo.fault: "root:418": the fault is 401, 403, 404, 500, 502, 503, 429/<seconds>, 503/<seconds> or delay/<duration>`},
		{nil, []string{"--demo", "--demo.fault=api:500"}, `--demo.fault: "api:500": the endpoint is root, projects, locations, location_detail or location_detail/<id>`},
		{[]string{"DEPLOYMENT_SERVICE_URL=http://127.0.0.1:1"}, []string{"--api.timeout=10"}, `--api.timeout: "10" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command(binary, tt.args...)
			cmd.Env = append(cleanEnv(), tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Errorf("exit: %v, want status 2", err)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("want one line with %q, got:\n%s", tt.want, stderr.String())
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deployment_service_exporter, version") {
		t.Errorf("--version: %v\n%s", err, out)
	}
}

func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveInProcess wires the exporter's endpoints as run does, from flags f,
// and serves them on loopback: for tests that look at the registry or need
// no separate process.
func serveInProcess(t *testing.T, f settings) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	s, err := validate(f)
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	reg := newRegistry(!s.disableExporterMetrics)
	logger := promslog.NewNopLogger()
	store := moduleconfig.NewStore(f.configFile, reg, logger)
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	mux, _, err := routes(s, reg, store, collector.NewPollLog(), logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, reg
}

// fetch GETs url with the given headers and returns the answer, its body
// read whole.
func fetch(t *testing.T, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	// A transport of its own, so that Go does not ask for gzip and
	// decompress behind the test's back.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// The Accept headers of Prometheus 3.16: its default scrape protocols, and
// those of scrape_native_histograms: true.
const (
	prometheus3Accept       = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.7,application/openmetrics-text;version=0.0.1;q=0.6,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.3"
	prometheus3NativeAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)

// checkOpenMetrics holds body to the OpenMetrics 1.0 text format as far as
// this exporter's metrics go: families not interleaved, counters typed
// without _total and sampled with it, histogram samples with le and a +Inf
// bucket for each series, no _created, parseable values, and # EOF last.
// prometheus/common v0.72 has no OpenMetrics parser, so the rules that
// Prometheus' parser enforces and that our metrics could break are here.
func checkOpenMetrics(body string) error {
	rest, ok := strings.CutSuffix(body, "\n# EOF\n")
	if !ok {
		return errors.New("the body does not end with # EOF and a line break")
	}
	suffixes := map[string][]string{
		"counter":   {"_total"},
		"gauge":     {""},
		"unknown":   {""},
		"histogram": {"_bucket", "_count", "_sum"},
		"summary":   {"", "_count", "_sum"},
		"info":      {"_info"},
	}
	typed := map[string]bool{}
	family, kind := "", ""
	infBuckets, counts := 0, 0
	for i, line := range strings.Split(rest, "\n") {
		n := i + 1
		switch {
		case line == "":
			return fmt.Errorf("line %d is empty", n)
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				return fmt.Errorf("line %d: %q", n, line)
			}
			if typed[f[2]] {
				return fmt.Errorf("line %d: family %s appears twice", n, f[2])
			}
			if _, known := suffixes[f[3]]; !known {
				return fmt.Errorf("line %d: type %s", n, f[3])
			}
			if f[3] == "counter" && strings.HasSuffix(f[2], "_total") {
				return fmt.Errorf("line %d: counter family %s keeps its _total", n, f[2])
			}
			typed[f[2]] = true
			family, kind = f[2], f[3]
		case strings.HasPrefix(line, "# HELP "), strings.HasPrefix(line, "# UNIT "):
		case strings.HasPrefix(line, "#"):
			return fmt.Errorf("line %d: unexpected %q", n, line)
		default:
			name, labelsAndValue, _ := strings.Cut(line, "{")
			value := ""
			if end := strings.LastIndex(labelsAndValue, "} "); end >= 0 {
				value = labelsAndValue[end+2:]
			} else {
				name, value, _ = strings.Cut(line, " ")
			}
			if _, err := strconv.ParseFloat(strings.Fields(value + " x")[0], 64); err != nil {
				return fmt.Errorf("line %d: value of %q", n, line)
			}
			suffix, found := strings.CutPrefix(name, family)
			if family == "" || !found || !slices.Contains(suffixes[kind], suffix) {
				return fmt.Errorf("line %d: sample %s outside its family (now %s %s)", n, name, kind, family)
			}
			if kind == "histogram" && suffix == "_bucket" && !strings.Contains(line, `le="`) {
				return fmt.Errorf("line %d: bucket without le", n)
			}
			if kind == "histogram" && suffix == "_bucket" && strings.Contains(line, `le="+Inf"`) {
				infBuckets++
			}
			if kind == "histogram" && suffix == "_count" {
				counts++
			}
		}
	}
	if infBuckets != counts {
		return fmt.Errorf("%d histogram series with a +Inf bucket, %d with a count", infBuckets, counts)
	}
	return nil
}

// sampleNames returns the names of the samples in an exposition.
func sampleNames(body string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.Lines(body) {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return names
}

func TestCheckOpenMetricsCatchesMistakes(t *testing.T) {
	good := "# TYPE a counter\na_total 1\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 2\n# EOF\n"
	if err := checkOpenMetrics(good); err != nil {
		t.Fatalf("good exposition refused: %v", err)
	}
	for name, bad := range map[string]string{
		"no EOF":              "# TYPE a gauge\na 1\n",
		"counter with _total": "# TYPE a_total counter\na_total 1\n# EOF\n",
		"counter sample bare": "# TYPE a counter\na 1\n# EOF\n",
		"interleaved":         "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a gauge\na 2\n# EOF\n",
		"no +Inf":             "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n# EOF\n",
		"bad value":           "# TYPE a gauge\na one\n# EOF\n",
		"untyped sample":      "a 1\n# EOF\n",
	} {
		if checkOpenMetrics(bad) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestContentNegotiation scrapes every scrape endpoint as Prometheus 3,
// with and without native histograms, as curl and promtool do, and with
// each compression: OpenMetrics when asked, protobuf when asked first,
// the classic text format otherwise, zstd or gzip when asked.
func TestContentNegotiation(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "negotiation-key", Locations: 12, PageSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	dir := t.TempDir()
	writeTestFile(t, dir, "key", "negotiation-key\n")
	cfg := writeTestFile(t, dir, "modules.yml", "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n    http_client_config: {authorization: {type: Token, credentials_file: key}}\n    locations: {detail_limit: 2, info_fields: [name]}\n")

	f := goodFlags()
	f.apiURL, f.key, f.configFile = svc.URL(), "negotiation-key", cfg
	f.module.Locations.DetailLimit, f.module.Locations.InfoFields = 3, []string{"name"}
	single, _ := serveInProcess(t, f)
	f.apiURL, f.key = "", ""
	probeOnly, _ := serveInProcess(t, f)
	// marker is a metric each endpoint must serve; histogram tells
	// whether it serves the request histogram.
	type endpoint struct {
		url, marker string
		histogram   bool
	}
	endpoints := map[string]endpoint{
		"/metrics of the single target":    {single.URL + "/metrics", "deployment_service_up", true},
		"/metrics without a single target": {probeOnly.URL + "/metrics", "deployment_service_exporter_build_info", false},
		"/probe":                           {probeOnly.URL + "/probe?target=" + url.QueryEscape(svc.URL()), "deployment_service_up", false},
	}
	// The first scrape fills the histogram, so that every family shows.
	fetch(t, endpoints["/metrics of the single target"].url, nil)
	fetch(t, endpoints["/probe"].url, nil)

	zstdDecoder, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zstdDecoder.Close()
	tests := []struct {
		name, accept, encoding string
		wantType, wantEncoding string
	}{
		{"Prometheus 3", prometheus3Accept, "gzip", "application/openmetrics-text; version=1.0.0", "gzip"},
		{"Prometheus 3 with zstd-scrape", prometheus3Accept, "zstd,gzip", "application/openmetrics-text; version=1.0.0", "zstd"},
		{"Prometheus 3 with native histograms", prometheus3NativeAccept, "gzip", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited", "gzip"},
		{"OpenMetrics 0.0.1", "application/openmetrics-text;version=0.0.1", "", "application/openmetrics-text; version=0.0.1", ""},
		{"curl and promtool", "", "", "text/plain; version=0.0.4", ""},
		{"zstd alone", "", "zstd", "text/plain; version=0.0.4", "zstd"},
	}
	for name, e := range endpoints {
		_, text := fetch(t, e.url, nil)
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				h := http.Header{}
				if tt.accept != "" {
					h.Set("Accept", tt.accept)
				}
				if tt.encoding != "" {
					h.Set("Accept-Encoding", tt.encoding)
				}
				resp, body := fetch(t, e.url, h)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
					t.Errorf("Content-Type %q, want %q", ct, tt.wantType)
				}
				if ce := resp.Header.Get("Content-Encoding"); ce != tt.wantEncoding {
					t.Fatalf("Content-Encoding %q, want %q", ce, tt.wantEncoding)
				}
				switch tt.wantEncoding {
				case "gzip":
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					if body, err = io.ReadAll(zr); err != nil {
						t.Fatal(err)
					}
				case "zstd":
					if body, err = zstdDecoder.DecodeAll(body, nil); err != nil {
						t.Fatalf("zstd: %v", err)
					}
				}
				switch {
				case strings.HasPrefix(tt.wantType, "application/openmetrics-text"):
					if err := checkOpenMetrics(string(body)); err != nil {
						t.Fatalf("invalid OpenMetrics: %v\n%s", err, body)
					}
					// The same samples as in the text format: no counter
					// renamed, none lost, no _created added.
					got := sampleNames(string(body))
					if want := sampleNames(string(text)); !maps.Equal(got, want) {
						t.Errorf("OpenMetrics has samples %v,\ntext format %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
					}
				case strings.HasPrefix(tt.wantType, "application/vnd.google.protobuf"):
					checkNativeHistogram(t, body, e.histogram)
				default:
					p := expfmt.NewTextParser(model.UTF8Validation)
					if _, err := p.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
						t.Errorf("text format does not parse: %v", err)
					}
				}
				if !bytes.Contains(body, []byte(e.marker)) {
					t.Errorf("%s is missing", e.marker)
				}
			})
		}
	}
}

// checkNativeHistogram decodes a protobuf exposition and checks that the
// request histogram is there as want says, with native buckets next to the
// classic ones.
func checkNativeHistogram(t *testing.T, body []byte, want bool) {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	found := false
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("protobuf: %v", err)
		}
		if mf.GetName() != "deployment_service_request_duration_seconds" {
			continue
		}
		found = true
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h.GetSchema() == 0 && len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) == 0 {
				t.Errorf("histogram without native or classic buckets: %v", h)
			}
		}
	}
	if found != want {
		t.Errorf("request histogram present: %v, want %v", found, want)
	}
}

// gatedService answers every request once release is closed, and closes
// entered when the first request arrives: a scrape that provably holds its
// place until the test lets it go.
func gatedService(t *testing.T) (srv *httptest.Server, entered <-chan struct{}, release chan struct{}) {
	t.Helper()
	in := make(chan struct{})
	release = make(chan struct{})
	inner := sampleservice.New(sampleservice.Options{Key: "gated-key", Locations: 3})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(in) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, in, release
}

func TestMaxRequests(t *testing.T) {
	svc, entered, release := gatedService(t)
	dir := t.TempDir()
	writeTestFile(t, dir, "key", "gated-key\n")
	f := goodFlags()
	f.apiURL, f.key, f.maxRequests = svc.URL, "gated-key", 1
	f.configFile = writeTestFile(t, dir, "modules.yml", "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n    http_client_config: {authorization: {type: Token, credentials_file: key}}\n")
	exp, reg := serveInProcess(t, f)
	probe := exp.URL + "/probe?target=" + url.QueryEscape(svc.URL)

	// The first scrape takes the only place and waits in the service.
	first := make(chan int)
	go func() {
		resp, body := fetch(t, exp.URL+"/metrics", nil)
		if !bytes.Contains(body, []byte("deployment_service_up 1")) {
			t.Errorf("the first scrape:\n%s", body)
		}
		first <- resp.StatusCode
	}()
	<-entered
	if resp, body := fetch(t, exp.URL+"/metrics", nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "--web.max-requests=1") {
		t.Errorf("/metrics beyond the limit: %d %s", resp.StatusCode, body)
	}
	// Pages other than the scrape endpoints are not counted.
	if resp, _ := fetch(t, exp.URL+"/-/healthy", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/-/healthy answered %d while a scrape runs", resp.StatusCode)
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the first scrape answered %d", code)
	}
	// The place is free again.
	if resp, body := fetch(t, probe, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/probe after the first scrape: %d %s", resp.StatusCode, body)
	}
	// The refused scrape is counted, as node_exporter counts it.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP promhttp_metric_handler_requests_total Total number of scrapes by HTTP status code.
# TYPE promhttp_metric_handler_requests_total counter
promhttp_metric_handler_requests_total{code="200"} 1
promhttp_metric_handler_requests_total{code="500"} 0
promhttp_metric_handler_requests_total{code="503"} 1
`), "promhttp_metric_handler_requests_total"); err != nil {
		t.Error(err)
	}
}

// TestProbeCannotStarveMetrics fills --web.max-requests with slow probes:
// one more probe is refused, and /metrics still answers.
func TestProbeCannotStarveMetrics(t *testing.T) {
	const limit = 3
	watched, err := sampleservice.Start(sampleservice.Options{Key: "watched-key", Locations: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer watched.Close()
	// One held service behind limit+1 listeners: as many targets, each
	// with a poll of its own, which the gate holds at its one root request.
	slow := sampleservice.New(sampleservice.Options{Key: "slow-key", Locations: 3})
	gate := slow.Hold(sampleservice.EndpointRoot)
	var targets []string
	for range limit + 1 {
		srv := httptest.NewServer(slow)
		t.Cleanup(srv.Close)
		targets = append(targets, srv.URL)
	}
	f := goodFlags()
	f.apiURL, f.key, f.maxRequests = watched.URL(), "watched-key", limit
	f.configFile = writeTestFile(t, t.TempDir(), "modules.yml", "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n    http_client_config: {authorization: {type: Token, credentials: slow-key}}\n")
	exp, _ := serveInProcess(t, f)
	t.Cleanup(gate.Open) // before the exporter closes, should the test stop early
	probe := func(target string) (int, string) {
		resp, err := http.Get(exp.URL + "/probe?target=" + url.QueryEscape(target))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	codes := make(chan int, limit)
	for _, target := range targets[:limit] {
		go func() {
			code, _ := probe(target)
			codes <- code
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := gate.Await(ctx, func(c sampleservice.GateCounts) bool { return c.Held >= limit }); err != nil {
		t.Fatal(err)
	}
	if code, body := probe(targets[limit]); code != http.StatusServiceUnavailable || !strings.Contains(body, fmt.Sprintf("--web.max-requests=%d", limit)) {
		t.Errorf("a probe beyond the limit: %d %s", code, body)
	}
	if resp, body := fetch(t, exp.URL+"/metrics", nil); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("deployment_service_up 1")) {
		t.Errorf("/metrics while %d probes wait: %d\n%s", limit, resp.StatusCode, body)
	}
	gate.Open()
	for range limit {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a probe within the limit answered %d", code)
		}
	}
}

// TestTelemetryPathRoot serves the metrics at / with
// --web.telemetry-path=/: other paths, a browser's /favicon.ico among
// them, are a 404 and poll nothing, and the exporter's own paths answer.
func TestTelemetryPathRoot(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "root-key", Locations: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	f := goodFlags()
	f.apiURL, f.key, f.metricsPath = svc.URL(), "root-key", "/"
	exp, _ := serveInProcess(t, f)
	for _, path := range []string{"/favicon.ico", "/metrics", "/robots.txt", "/index.html", "/probe/x", "/-/nothing"} {
		if resp, body := fetch(t, exp.URL+path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s answered %d, want 404:\n%.200s", path, resp.StatusCode, body)
		}
	}
	if n := svc.Service.TotalRequests(); n != 0 {
		t.Errorf("paths other than / sent %d requests to the service", n)
	}
	if resp, body := fetch(t, exp.URL+"/", nil); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("deployment_service_up 1")) {
		t.Errorf("/ answered %d:\n%s", resp.StatusCode, body)
	}
	for _, path := range []string{"/-/healthy", "/-/ready", "/sd", "/polls/1"} {
		if resp, _ := fetch(t, exp.URL+path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s answered %d", path, resp.StatusCode)
		}
	}
}

// TestScrapeLimit holds n requests inside the handler at once and sends
// one more: beyond the limit it is refused at once, and with no limit
// (0) it enters too.
func TestScrapeLimit(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("limit %d", n), func(t *testing.T) {
			inside, release := make(chan struct{}), make(chan struct{})
			h := limitRequests(n, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				inside <- struct{}{}
				<-release
			}))
			held := n
			if n == 0 {
				held = 4 // more than any limit here
			}
			codes := make(chan int, held+1)
			serve := func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				codes <- rec.Code
			}
			for range held {
				go serve()
			}
			for range held {
				select {
				case <-inside:
				case code := <-codes:
					t.Fatalf("a request within the limit answered %d without entering", code)
				}
			}
			go serve()
			if n > 0 {
				if code := <-codes; code != http.StatusServiceUnavailable {
					t.Errorf("request beyond the limit: %d, want 503", code)
				}
			} else {
				select {
				case <-inside:
				case code := <-codes:
					t.Fatalf("no limit, yet a request answered %d without entering", code)
				}
				held++
			}
			close(release)
			for range held {
				if code := <-codes; code != http.StatusOK {
					t.Errorf("request within the limit: %d", code)
				}
			}
		})
	}
}

func TestDisableExporterMetrics(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "quiet-key", Locations: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled %v", disable), func(t *testing.T) {
			f := goodFlags()
			f.apiURL, f.key, f.disableExporterMetrics = svc.URL(), "quiet-key", disable
			exp, _ := serveInProcess(t, f)
			fetch(t, exp.URL+"/metrics", nil)
			_, body := fetch(t, exp.URL+"/metrics", http.Header{"Accept": {prometheus3Accept}})
			names := sampleNames(string(body))
			for _, prefix := range []string{"go_", "process_", "promhttp_"} {
				found := slices.ContainsFunc(slices.Collect(maps.Keys(names)), func(n string) bool { return strings.HasPrefix(n, prefix) })
				if found == disable {
					t.Errorf("%s* metrics present: %v", prefix, found)
				}
			}
			for _, want := range []string{
				"deployment_service_up", "deployment_service_exporter_build_info",
				"deployment_service_exporter_config_last_reload_successful",
				"deployment_service_exporter_config_last_reload_success_timestamp_seconds",
				"deployment_service_request_duration_seconds_bucket", "deployment_service_requests_total",
			} {
				if !names[want] {
					t.Errorf("%s is missing", want)
				}
			}
			if err := checkOpenMetrics(string(body)); err != nil {
				t.Errorf("invalid OpenMetrics: %v", err)
			}
		})
	}
}

// writeCertPEM writes the certificate der as a PEM file.
func writeCertPEM(t *testing.T, dir, name string, der []byte) string {
	t.Helper()
	return writeTestFile(t, dir, name, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
}

// writeClientCert writes a self-signed client certificate and its key,
// and returns the certificate for the server to trust.
func writeClientCert(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(7),
		Subject:               pkix.Name{CommonName: "exporter"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeCertPEM(t, dir, "client.pem", der)
	writeTestFile(t, dir, "client-key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestHTTPConfigFileTLS watches services behind a private CA, one of them
// asking for a client certificate too, reachable only with the settings of
// --api.http-config.file; relative paths in it are the file's directory's.
func TestHTTPConfigFileTLS(t *testing.T) {
	const key = "tls-key"
	dir := t.TempDir()
	clientCert := writeClientCert(t, dir)
	writeTestFile(t, dir, "key", key+"\n")

	plain := sampleservice.New(sampleservice.Options{Key: key, Locations: 6, PageSize: 4})
	privateCA := httptest.NewUnstartedServer(plain)
	// The refused handshakes are the point of some cases: not news.
	privateCA.Config.ErrorLog = log.New(io.Discard, "", 0)
	privateCA.StartTLS()
	defer privateCA.Close()
	writeCertPEM(t, dir, "ca.pem", privateCA.Certificate().Raw)

	strict := sampleservice.New(sampleservice.Options{Key: key, Locations: 7})
	mutual := httptest.NewUnstartedServer(strict)
	clients := x509.NewCertPool()
	clients.AddCert(clientCert)
	mutual.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients, MinVersion: tls.VersionTLS12}
	mutual.Config.ErrorLog = privateCA.Config.ErrorLog
	mutual.StartTLS()
	defer mutual.Close()
	writeCertPEM(t, dir, "mutual-ca.pem", mutual.Certificate().Raw)

	tests := []struct {
		name, url, yaml, key string
		wantUp               string
	}{
		{"no file: the CA is unknown", privateCA.URL, "", key, "0"},
		{"ca_file", privateCA.URL, "tls_config: {ca_file: ca.pem}\n", key, "1"},
		{"ca_file and the key in the file", privateCA.URL, "tls_config: {ca_file: ca.pem}\nauthorization: {type: Token, credentials_file: key}\n", "", "1"},
		{"a name the certificate lacks", privateCA.URL, "tls_config: {ca_file: ca.pem, server_name: other.example}\n", key, "0"},
		{"no client certificate", mutual.URL, "tls_config: {ca_file: mutual-ca.pem}\n", key, "0"},
		{"client certificate", mutual.URL, "tls_config: {ca_file: mutual-ca.pem, cert_file: client.pem, key_file: client-key.pem}\n", key, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			f.apiURL, f.key = tt.url, tt.key
			if tt.yaml != "" {
				f.httpConfigFile = writeTestFile(t, dir, "http.yml", tt.yaml)
			}
			exp, _ := serveInProcess(t, f)
			_, body := fetch(t, exp.URL+"/metrics", nil)
			if want := "\ndeployment_service_up " + tt.wantUp + "\n"; !strings.Contains(string(body), want) {
				t.Errorf("want %q in\n%s", strings.TrimSpace(want), body)
			}
		})
	}
	if plain.SawWrongAuth() || strict.SawWrongAuth() {
		t.Error("a service saw a wrong key")
	}
}

// TestHTTPConfigFileProxy watches a service through a forward proxy on
// loopback, which records what passed through it.
func TestHTTPConfigFileProxy(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "proxied-key", Locations: 9, PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var (
		mu   sync.Mutex
		seen []string // host and X-Tenant of each proxied request
	)
	upstream := &http.Transport{}
	defer upstream.CloseIdleConnections()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, r.URL.Host+" "+r.Header.Get("X-Tenant"))
		mu.Unlock()
		out := r.Clone(r.Context())
		out.RequestURI = ""
		resp, err := upstream.RoundTrip(out)
		if err != nil {
			http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer proxy.Close()

	dir := t.TempDir()
	for _, tt := range []struct {
		name, yaml string
		proxied    bool
	}{
		{"no file", "", false},
		{"proxy_url and a header", "proxy_url: " + proxy.URL + "\nhttp_headers: {X-Tenant: {values: [blue]}}\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			f := goodFlags()
			f.apiURL, f.key = svc.URL(), "proxied-key"
			if tt.yaml != "" {
				f.httpConfigFile = writeTestFile(t, dir, "http.yml", tt.yaml)
			}
			exp, _ := serveInProcess(t, f)
			if _, body := fetch(t, exp.URL+"/metrics", nil); !bytes.Contains(body, []byte("\ndeployment_service_up 1\n")) {
				t.Errorf("not up:\n%s", body)
			}
			mu.Lock()
			defer mu.Unlock()
			if (len(seen) > 0) != tt.proxied {
				t.Fatalf("requests through the proxy: %d, want some: %v", len(seen), tt.proxied)
			}
			for _, s := range seen {
				if s != svc.Addr()+" blue" {
					t.Errorf("proxied request: host and X-Tenant %q", s)
				}
			}
		})
	}
	if svc.Service.SawWrongAuth() {
		t.Error("the service saw a wrong key")
	}
}

// TestDemoSubsetEndToEnd runs --demo as a newcomer does, and with each
// way of saying otherwise.
func TestDemoSubsetEndToEnd(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantIDs []string // location ids with series
		info    bool     // whether location_info has a name label
	}{
		{"demo alone", nil, []string{"1", "2", "3", "4", "5"}, true},
		{"detail-limit 0 given", []string{"--locations.detail-limit=0"}, nil, false},
		{"ids given", []string{"--locations.detail-id=2", "--locations.detail-id=40"}, []string{"2", "40"}, false},
		{"info field given alone", []string{"--locations.info-field=region"}, nil, false},
		{"limit and field given", []string{"--locations.detail-limit=2", "--locations.info-field=name"}, []string{"1", "2"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startExporter(t, nil, append([]string{"--demo"}, tt.args...)...)
			_, body := e.get(t, "/metrics")
			var ids []string
			for line := range strings.Lines(body) {
				if rest, ok := strings.CutPrefix(line, `deployment_service_location_up{location_id="`); ok {
					id, _, _ := strings.Cut(rest, `"`)
					ids = append(ids, id)
					if !strings.HasSuffix(line, "} 1\n") {
						t.Errorf("location down: %s", line)
					}
				}
			}
			slices.SortFunc(ids, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
			if !slices.Equal(ids, tt.wantIDs) {
				t.Errorf("locations with details %v, want %v", ids, tt.wantIDs)
			}
			if got := strings.Contains(body, `deployment_service_location_info{location_id="1",name="`); got != tt.info {
				t.Errorf("location_info with a name: %v, want %v", got, tt.info)
			}
			if !strings.Contains(body, "\ndeployment_service_up 1\n") {
				t.Error("the demo is not up")
			}
		})
	}
}

func TestDisableExporterMetricsEndToEnd(t *testing.T) {
	e := startExporter(t, nil, "--demo", "--web.disable-exporter-metrics")
	e.get(t, "/metrics")
	_, body := e.get(t, "/metrics")
	for _, unwanted := range []string{"\ngo_", "\nprocess_", "\npromhttp_"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("/metrics has %s* metrics", strings.TrimSpace(unwanted))
		}
	}
	for _, want := range []string{"\ndeployment_service_up 1\n", "\ndeployment_service_exporter_build_info{", "\ndeployment_service_exporter_config_last_reload_successful 1\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestLocationsFlagsGiven: any --locations.* flag on the command line, even
// at its default, counts as given, so that --demo takes what they say.
func TestLocationsFlagsGiven(t *testing.T) {
	for args, want := range map[string]bool{
		"--demo":                             false,
		"--demo --locations.detail-limit=0":  true,
		"--demo --locations.detail-id=3":     true,
		"--demo --locations.info-field=name": true,
	} {
		cmd, err := parseArgs(strings.Fields(args))
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if cmd.locationsGiven != want {
			t.Errorf("%s: locations given %v, want %v", args, cmd.locationsGiven, want)
		}
	}
}

// TestRegistryLeavesOutAllocTotal: the Go collector's counter that would make one OpenMetrics family twice is left out, the gauge kept.
func TestRegistryLeavesOutAllocTotal(t *testing.T) {
	mfs, err := newRegistry(true).Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	if names["go_memstats_alloc_bytes_total"] || !names["go_memstats_alloc_bytes"] || !names["go_gc_heap_allocs_bytes_total"] {
		t.Errorf("go_memstats_alloc_bytes_total %v (want false), go_memstats_alloc_bytes %v, go_gc_heap_allocs_bytes_total %v (want true)",
			names["go_memstats_alloc_bytes_total"], names["go_memstats_alloc_bytes"], names["go_gc_heap_allocs_bytes_total"])
	}
}
