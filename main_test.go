package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	stderr *bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startExporter(t *testing.T, env []string, args ...string) *exporter {
	t.Helper()
	e := &exporter{addr: freeAddr(t), stderr: &bytes.Buffer{}}
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := e.get(t, "/-/ready"); code == http.StatusOK {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatal("the exporter did not become ready within 10s")
		}
		time.Sleep(50 * time.Millisecond)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	if code != http.StatusOK || !strings.Contains(landing, "Recent polls") || !strings.Contains(landing, `href="polls/1"`) {
		t.Errorf("landing page: %d\n%s", code, landing)
	}
	if code, page := e.get(t, "/polls/1"); code != http.StatusOK || !strings.Contains(page, "/api/projects/locations/") {
		t.Errorf("poll page: %d\n%s", code, page)
	}
	if code, _ := e.get(t, "/-/healthy"); code != http.StatusOK {
		t.Errorf("/-/healthy answered %d", code)
	}
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
		for _, want := range []string{"deployment_service_up 1", "deployment_service_locations 42", `deployment_service_location_up{location_id="7"} 1`} {
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
    http_client_config: {authorization: {type: Token, credentials_file: alpha.key}}
  bravo:
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
	writeTestFile(t, dir, "config.yml", "modules:\n  default:\n    http_client_config: {authorization: {type: Token, credentials_file: alpha.key}}\n")
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, m := e.get(t, "/metrics")
		if strings.Contains(m, "deployment_service_exporter_config_last_reload_successful 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the file")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := e.get(t, "/probe?module=bravo&target="+url.QueryEscape(svcB.URL())); code != http.StatusBadRequest {
		t.Errorf("a removed module still answers %d", code)
	}
	if code, _ := e.get(t, "/-/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload answered %d, want 405", code)
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
