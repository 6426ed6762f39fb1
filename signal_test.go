package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// caughtSignals reads the mask of signals that process pid catches.
func caughtSignals(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no SigCgt in /proc/%d/status", pid)
}

// TestSIGHUPWhileStarting: from the moment the Go runtime catches signals
// at all, a SIGHUP never ends the exporter, however early it comes; one
// that came before the configuration could be reloaded reloads it once
// the exporter serves.
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
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("exporter log:\n%s", stderr.String())
		}
	})
	// The runtime catches every signal once it has started; before that
	// no program can, so that is where the test begins.
	const hupBit = 1 << (syscall.SIGHUP - 1)
	eventually(t, "the runtime catches SIGHUP", func() bool {
		mask, err := caughtSignals(cmd.Process.Pid)
		return err == nil && mask&hupBit != 0
	})
	sent := 0
	for {
		select {
		case err := <-exited:
			t.Fatalf("the exporter ended after %d SIGHUPs while starting: %v", sent, err)
		default:
		}
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		sent++
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
	}
	eventually(t, "a SIGHUP queued during the start reloaded the file", func() bool {
		return strings.Count(stderr.String(), `msg="Configuration loaded"`) >= 2
	})
	select {
	case err := <-exited:
		t.Fatalf("the exporter ended: %v", err)
	default:
	}
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
