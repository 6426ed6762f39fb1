//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// probeTargets is the number of /probe targets of item 8, each a distinct
// origin (a port of its own) of one fakeapi process.
const probeTargets = 1000

// probeFamilies are the families every /probe answer must carry beside
// deployment_service_up: the poll counters kept per target and module,
// and the target's name.
var probeFamilies = []string{
	"deployment_service_polls_total ",
	"deployment_service_poll_failures_total ",
	"deployment_service_target_info{",
}

// probeCosts (item 8, issue 9) starts one fakeapi answering on 1,000 ports
// and an exporter with a module for them, probes every target twice the
// way Prometheus does, then reads what the exporter holds: open files,
// goroutines and resident memory.
func probeCosts(t *table, b *binaries) error {
	// fakeapi holds a listener and a connection per target; Go raises the
	// soft limit of open files to the hard one, which must allow that.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < 2*probeTargets+100 {
		t.add(row{item: "8", figure: "1,000 /probe targets",
			measured: fmt.Sprintf("not run: the open-file limit (ulimit -Hn) is %d, fakeapi needs %d", lim.Max, 2*probeTargets+100),
			target:   "≤ 1.2 files, ≤ 2.5 goroutines a target, ≤ 80 MB", status: statusNA})
		return nil
	}
	api, err := startFakeAPI(b.fakeapi, "-listeners", strconv.Itoa(probeTargets), "-page-size", "50", "-latency", "2ms", "-jitter", "10ms")
	if err != nil {
		return err
	}
	defer api.stop()
	if len(api.URLs) != probeTargets {
		return fmt.Errorf("fakeapi answers on %d ports, want %d", len(api.URLs), probeTargets)
	}
	dir := filepath.Join(b.tmp, "probe")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(api.Key+"\n"), 0o600); err != nil {
		return err
	}
	// The module of deploy/test/e2e_prometheus.sh: a key file and a detail
	// subset of 5 locations, so a poll sends 8 requests, 4 at once.
	modules := filepath.Join(dir, "modules.yml")
	if err := os.WriteFile(modules, []byte(`modules:
  default:
    targets: ["http://127.0.0.1:*"]
    http_client_config:
      authorization: {type: Token, credentials_file: key}
    timeout: 10s
    locations: {detail_limit: 5, info_fields: [name]}
`), 0o600); err != nil {
		return err
	}
	e, err := launchExporter(b.exporter, b.tmp, nil, "--config.file="+modules)
	if err != nil {
		return err
	}
	defer e.stop()
	base, err := e.openFiles()
	if err != nil {
		return err
	}
	_, idle, err := e.memory()
	if err != nil {
		return err
	}
	var carrying atomic.Int64
	for round := range 2 {
		if err := e.probeAll(api.URLs, 8, &carrying); err != nil {
			return fmt.Errorf("round %d: %w", round+1, err)
		}
	}
	fds, err := e.openFiles()
	if err != nil {
		return err
	}
	goroutines, err := e.gauge("go_goroutines")
	if err != nil {
		return err
	}
	peak, now, err := e.memory()
	if err != nil {
		return err
	}
	logf("item 8: %d open files (%d before the probes), %v goroutines, VmHWM %d, VmRSS %d", fds, base, goroutines, peak, now)
	const n = float64(probeTargets)
	t.exactly("8", "/probe answers up with the per-target families", float64(carrying.Load()), "",
		fmt.Sprintf("of %d probes: %d targets × 2", 2*probeTargets, probeTargets), 2*n)
	t.atMost("8", "open files per /probe target", float64(fds)/n, "",
		fmt.Sprintf("%d files after %d probes; %d before", fds, 2*probeTargets, base), 1.2)
	t.atMost("8", "goroutines per /probe target", goroutines/n, "",
		fmt.Sprintf("%.0f goroutines", goroutines), 2.5)
	t.atMost("8", "peak RSS with 1,000 /probe targets", float64(peak)/mb, " MB",
		fmt.Sprintf("%s MB after the probes, %s MB before: %s kB a target", num(float64(now)/mb), num(float64(idle)/mb), num(float64(now-idle)/n/1e3)), 80)
	return nil
}

// probeAll probes every target once, workers at a time, and counts in
// carrying the answers that are up and carry every family of
// probeFamilies.
func (e *exporter) probeAll(targets []string, workers int, carrying *atomic.Int64) error {
	next := make(chan string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for target := range next {
				body, err := e.get(context.Background(), "/probe?target="+url.QueryEscape(target))
				if err != nil {
					errs <- err
					for range next {
					}
					return
				}
				if carriesFamilies(body) {
					carrying.Add(1)
				}
			}
		})
	}
	for _, target := range targets {
		next <- target
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

func carriesFamilies(body string) bool {
	if !strings.Contains(body, "\ndeployment_service_up 1\n") {
		return false
	}
	for _, f := range probeFamilies {
		if !strings.Contains(body, "\n"+f) {
			return false
		}
	}
	return true
}

// get requests path of the exporter the way Prometheus does and returns
// the body of a 200 answer.
func (e *exporter) get(ctx context.Context, path string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+path, nil)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	resp, err := e.http.Do(req)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s: %s", path, resp.Status, firstLine(string(body)))
	}
	return string(body), nil
}

// gauge reads the value of an unlabelled metric from /metrics.
func (e *exporter) gauge(name string) (float64, error) {
	body, err := e.get(context.Background(), "/metrics")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, errors.New("no " + name + " on /metrics")
}

// openFiles counts the exporter's open file descriptors.
func (e *exporter) openFiles() (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", e.cmd.Process.Pid))
	return len(fds), err
}
