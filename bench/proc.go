//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fakeAPI is a sample service running in a process of its own
// (bench/cmd/fakeapi), so that its CPU and memory are not the exporter's.
type fakeAPI struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	URL   string `json:"url"`
	// URLs are the base URLs of every port, with -listeners > 1.
	URLs    []string `json:"urls"`
	Key     string   `json:"key"`
	Control string   `json:"control"`
}

// serviceStats is what fakeapi's GET /stats answers.
type serviceStats struct {
	Total       int64            `json:"total"`
	ByEndpoint  map[string]int64 `json:"by_endpoint"`
	MaxInFlight int64            `json:"max_in_flight"`
	BytesSent   int64            `json:"bytes_sent"`
}

func startFakeAPI(bin string, args ...string) (*fakeAPI, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &fakeAPI{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case s := <-line:
		if err := json.Unmarshal([]byte(s), f); err != nil || f.URL == "" {
			f.stop()
			return nil, fmt.Errorf("fakeapi %v did not start: %q", args, s)
		}
	case <-time.After(10 * time.Second):
		f.stop()
		return nil, fmt.Errorf("fakeapi %v did not start in 10s", args)
	}
	return f, nil
}

func (f *fakeAPI) stats() (serviceStats, error) {
	var st serviceStats
	resp, err := http.Get(f.Control + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (f *fakeAPI) reset() error {
	resp, err := http.Post(f.Control+"/reset", "text/plain", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// stop closes fakeapi's stdin, which ends it, and kills it if it lingers.
func (f *fakeAPI) stop() {
	_ = f.stdin.Close()
	stopProcess(f.cmd)
}

func stopProcess(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(3 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-done
}

// exporter is the built exporter binary watching a fakeAPI.
type exporter struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	http    *http.Client
}

func startExporter(bin, logDir string, api *fakeAPI, flags ...string) (*exporter, error) {
	return launchExporter(bin, logDir, []string{"DEPLOYMENT_SERVICE_API_KEY=" + api.Key}, append([]string{"--api.url=" + api.URL}, flags...)...)
}

// launchExporter starts the exporter with args on a free loopback port and
// waits until it is healthy.
func launchExporter(bin, logDir string, env []string, flags ...string) (*exporter, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e := &exporter{
		addr:    "127.0.0.1:" + strconv.Itoa(port),
		logPath: filepath.Join(logDir, fmt.Sprintf("exporter-%d.log", port)),
		http:    &http.Client{Timeout: 30 * time.Second},
	}
	logFile, err := os.Create(e.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := append([]string{"--web.listen-address=" + e.addr, "--log.level=warn"}, flags...)
	e.cmd = exec.Command(bin, args...)
	e.cmd.Env = append(os.Environ(), env...)
	// BENCH_EXPORTER_ENV adds variables to the exporter's environment only,
	// for experiments such as BENCH_EXPORTER_ENV="GOGC=200 GOMAXPROCS=1".
	e.cmd.Env = append(e.cmd.Env, strings.Fields(os.Getenv("BENCH_EXPORTER_ENV"))...)
	e.cmd.Stdout, e.cmd.Stderr = logFile, logFile
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := e.http.Get("http://" + e.addr + "/-/healthy")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e, nil
			}
		}
		if time.Now().After(deadline) {
			e.stop()
			log, _ := os.ReadFile(e.logPath)
			return nil, fmt.Errorf("exporter %v did not become healthy in 10s; its log:\n%s", flags, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (e *exporter) stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	stopProcess(e.cmd)
}

// scrape is what one /metrics request found.
type scrape struct {
	wall      time.Duration
	up        float64
	locations float64
	bytes     int
	// tooLarge is the exporter's count of too_large errors on the
	// location list.
	tooLarge float64
}

// scrape requests /metrics the way Prometheus does (with its timeout header
// and gzip) and checks that the service was up.
func (e *exporter) scrape(ctx context.Context) (scrape, error) {
	s, err := e.scrapeAny(ctx)
	if err == nil && s.up != 1 {
		log, _ := os.ReadFile(e.logPath)
		err = fmt.Errorf("deployment_service_up is %v, not 1; exporter log:\n%s", s.up, log)
	}
	return s, err
}

// scrapeAny requests /metrics like scrape, whatever it holds.
func (e *exporter) scrapeAny(ctx context.Context) (scrape, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+"/metrics", nil)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	start := time.Now()
	resp, err := e.http.Do(req)
	if err != nil {
		return scrape{}, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	s := scrape{wall: time.Since(start), up: -1, locations: -1, bytes: len(body)}
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("/metrics answered %s", resp.Status)
	}
	for line := range strings.Lines(string(body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		switch name {
		case "deployment_service_up":
			s.up, _ = strconv.ParseFloat(value, 64)
		case "deployment_service_locations":
			s.locations, _ = strconv.ParseFloat(value, 64)
		case `deployment_service_request_errors_total{endpoint="locations",reason="too_large"}`:
			s.tooLarge, _ = strconv.ParseFloat(value, 64)
		}
	}
	return s, nil
}

// cpu returns the CPU time the exporter has used: the sum over its threads
// of the nanoseconds they ran (/proc/PID/task/*/schedstat), which is exact
// where /proc/PID/stat counts in clock ticks of 10 ms. Go threads live as
// long as the process, so no thread's time is lost between two readings.
func (e *exporter) cpu() (time.Duration, error) { return processCPU(e.cmd.Process.Pid) }

func processCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread just exited
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("unexpected %s/%s/schedstat: %q", dir, t.Name(), b)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		total += ns
	}
	return time.Duration(total), nil
}

// memory returns the exporter's peak resident set (VmHWM) and its current
// one (VmRSS), in bytes.
func (e *exporter) memory() (peak, now int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		name, rest, _ := strings.Cut(line, ":")
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch name {
		case "VmHWM":
			peak = kb << 10
		case "VmRSS":
			now = kb << 10
		}
	}
	if peak == 0 {
		return 0, 0, errors.New("no VmHWM in /proc/PID/status")
	}
	return peak, now, nil
}
