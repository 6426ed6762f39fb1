//go:build unix

package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// TestSIGHUPWhileStarting sends SIGHUPs from the moment the exporter has
// read its configuration until it serves (a FIFO, refused now, can no
// longer hold the start): they never end the process, and a later one
// reloads the file. Before Go's runtime has run the exporter's first
// package, a SIGHUP ends any Go program.
func TestSIGHUPWhileStarting(t *testing.T) {
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "config.yml", "modules:\n  default: {}\n")
	addr := freeAddr(t)
	cmd := exec.Command(binary, "--web.listen-address="+addr, "--config.file="+cfg)
	cmd.Env = cleanEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("exporter log:\n%s", stderr.String())
		}
	})
	alive := func(when string) {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("the exporter ended %s: %v", when, exitErr)
		default:
		}
	}
	eventually(t, "the exporter read its configuration", func() bool {
		alive("while starting")
		return strings.Contains(stderr.String(), "Configuration loaded")
	})
	eventually(t, "the exporter became ready", func() bool {
		alive("after SIGHUPs during its start")
		_ = cmd.Process.Signal(syscall.SIGHUP)
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	writeTestFile(t, dir, "config.yml", "modules:\n  default: {}\n  second: {}\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a SIGHUP reloaded the file", func() bool {
		alive("while reloading")
		return strings.Contains(stderr.String(), `msg="Configuration loaded" file=`+cfg+` modules=2`)
	})
}

// TestReloadMethods: only POST reloads; every other method gets a 405
// that names POST.
func TestReloadMethods(t *testing.T) {
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "config.yml", "modules:\n  default: {}\n")
	e := startExporter(t, nil, "--config.file="+cfg)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		req, err := http.NewRequest(method, "http://"+e.addr+"/-/reload", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s /-/reload: %d, Allow %q", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if n := strings.Count(e.stderr.String(), `msg="Configuration loaded"`); n != 1 {
		t.Errorf("%d loads, want only the one at start", n)
	}
	if code, _ := e.do(t, http.MethodPost, "/-/reload"); code != http.StatusOK {
		t.Errorf("POST /-/reload: %d", code)
	}
}

// TestSIGTERMLogsOneLine: SIGTERM ends the exporter cleanly, with one line
// that says why.
func TestSIGTERMLogsOneLine(t *testing.T) {
	e := startExporter(t, nil, "--demo")
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Wait(); err != nil {
		t.Fatalf("the exporter ended with %v, want status 0", err)
	}
	lines := 0
	for _, l := range strings.Split(e.stderr.String(), "\n") {
		if strings.Contains(l, `msg="Shutting down"`) && strings.Contains(l, "signal=terminated") {
			lines++
		}
	}
	if lines != 1 || strings.Contains(e.stderr.String(), "level=ERROR") {
		t.Errorf("%d shutdown lines, want 1 and no error:\n%s", lines, e.stderr.String())
	}
}

// TestSIGTERMLetsScrapesAnswer: a scrape in flight when SIGTERM comes
// gets its answer before the process ends.
func TestSIGTERMLetsScrapesAnswer(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "key-term-1", Locations: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	g := svc.Service.Hold(sampleservice.EndpointRoot)
	defer g.Open()
	e := startExporter(t, []string{"DEPLOYMENT_SERVICE_API_KEY=key-term-1"}, "--api.url="+svc.URL())
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + e.addr + "/metrics")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := g.Await(ctx, func(c sampleservice.GateCounts) bool { return c.Held == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The service answers only once the exporter is shutting down.
	eventually(t, "the exporter began shutting down", func() bool {
		return strings.Contains(e.stderr.String(), `msg="Shutting down"`)
	})
	g.Open()
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the scrape in flight got %d, want 200", code)
	}
	if err := e.cmd.Wait(); err != nil {
		t.Errorf("the exporter ended with %v, want status 0", err)
	}
}
