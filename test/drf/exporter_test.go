//go:build drf

// Package drf tests the exporter binary against a real Django REST framework
// service under gunicorn. test/drf/run.sh sets the service up (test/drf/service)
// and runs this package with -tags drf; plain `go test ./...` skips it.
package drf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// facts is what the service's seed command read back from its database
// after seeding: the truth the exporter's figures are compared with.
type facts struct {
	Key            string     `json:"key"`
	InactiveKey    string     `json:"inactive_key"`
	Projects       int        `json:"projects"`
	Locations      int        `json:"locations"`
	FirstLocations []location `json:"first_locations"`
	HiddenLocation int        `json:"hidden_location"`
}

type location struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// service is the running DRF service, as run.sh describes it.
type service struct {
	url       string // http://127.0.0.1:PORT, without a prefix
	accessLog string // gunicorn's access log, one tab-separated line per request
	binary    string // the exporter
	facts     facts
}

func setup(t *testing.T) service {
	t.Helper()
	var s service
	for _, v := range []struct {
		name string
		to   *string
	}{
		{"DRF_URL", &s.url},
		{"DRF_ACCESS_LOG", &s.accessLog},
		{"EXPORTER_BIN", &s.binary},
	} {
		*v.to = os.Getenv(v.name)
		if *v.to == "" {
			t.Fatalf("%s is not set: run this test with test/drf/run.sh", v.name)
		}
	}
	raw, err := os.ReadFile(os.Getenv("DRF_FACTS"))
	if err != nil {
		t.Fatalf("reading the seeded facts (DRF_FACTS; run test/drf/run.sh): %v", err)
	}
	if err := json.Unmarshal(raw, &s.facts); err != nil {
		t.Fatalf("decoding the seeded facts: %v", err)
	}
	if s.facts.Key == "" || s.facts.Locations == 0 || len(s.facts.FirstLocations) != 5 {
		t.Fatalf("the seeded facts are incomplete: %d locations, %d first ones", s.facts.Locations, len(s.facts.FirstLocations))
	}
	return s
}

// exporter is one run of the exporter binary, watching one API prefix.
type exporter struct {
	t         *testing.T
	svc       service
	prefix    string
	key       string
	addr      string
	logPath   string
	logStart  int64 // size of the access log when the exporter started
	exited    chan struct{}
	pagesRead [][]byte // every page fetched from the exporter, searched for the key
}

// startExporter runs the exporter against {service}/{prefix} with key in
// DEPLOYMENT_SERVICE_API_KEY and waits until it is ready. It is stopped, and
// its log and pages searched for the key, when the test ends.
func startExporter(t *testing.T, svc service, prefix, key string, args ...string) *exporter {
	t.Helper()
	e := &exporter{
		t:       t,
		svc:     svc,
		prefix:  prefix,
		key:     key,
		addr:    freeAddr(t),
		logPath: filepath.Join(t.TempDir(), "exporter.log"),
		exited:  make(chan struct{}),
	}
	if fi, err := os.Stat(svc.accessLog); err == nil {
		e.logStart = fi.Size()
	}
	logFile, err := os.Create(e.logPath)
	if err != nil {
		t.Fatalf("creating the exporter's log: %v", err)
	}
	defer logFile.Close()

	cmd := exec.Command(svc.binary, append([]string{
		"--api.url=" + svc.url + "/" + prefix,
		"--web.listen-address=" + e.addr,
		"--log.level=debug",
	}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEPLOYMENT_SERVICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DEPLOYMENT_SERVICE_API_KEY="+key)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", svc.binary, err)
	}
	go func() {
		_ = cmd.Wait()
		close(e.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-e.exited
		e.checkKeyHidden()
		if t.Failed() {
			t.Logf("exporter log (%s):\n%s", strings.Join(cmd.Args[1:], " "), e.log())
		}
	})
	e.waitReady()
	return e
}

// freeAddr returns a 127.0.0.1 address nothing listens on just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls /-/ready until it answers 200; an exporter that exits
// first fails the test with its log.
func (e *exporter) waitReady() {
	e.t.Helper()
	client := &http.Client{Timeout: time.Second}
	for range 200 {
		select {
		case <-e.exited:
			e.t.Fatalf("the exporter exited before it was ready (its log follows)")
		default:
		}
		if resp, err := client.Get("http://" + e.addr + "/-/ready"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("the exporter did not answer 200 at /-/ready within 10s")
}

// log is the exporter's output with the key cut out, so it can be shown.
func (e *exporter) log() string {
	raw, err := os.ReadFile(e.logPath)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	return strings.ReplaceAll(string(raw), e.key, "<the API key>")
}

// checkKeyHidden fails the test when the key shows in the exporter's
// output or on any page it served (the key itself is never printed).
func (e *exporter) checkKeyHidden() {
	e.t.Helper()
	if resp, err := http.Get("http://" + e.addr + "/"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		e.pagesRead = append(e.pagesRead, body)
	}
	raw, err := os.ReadFile(e.logPath)
	if err != nil {
		e.t.Errorf("reading the exporter's log: %v", err)
	}
	if bytes.Contains(raw, []byte(e.key)) {
		e.t.Errorf("the API key appears in the exporter's stdout or stderr")
	}
	for _, page := range e.pagesRead {
		if bytes.Contains(page, []byte(e.key)) {
			e.t.Errorf("the API key appears on a page the exporter served (/metrics or /)")
		}
	}
}

// scrape fetches /metrics as Prometheus would and parses it.
func (e *exporter) scrape() metrics {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.addr+"/metrics", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		e.t.Fatalf("scraping the exporter: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("reading /metrics: %v", err)
	}
	e.pagesRead = append(e.pagesRead, body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("/metrics answered %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("parsing /metrics: %v", err)
	}
	m := metrics{t: e.t, samples: map[string][]*model.Sample{}}
	for _, family := range families {
		vector, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, family)
		if err != nil {
			e.t.Fatalf("reading the samples of /metrics: %v", err)
		}
		for _, s := range vector {
			name := string(s.Metric[model.MetricNameLabel])
			m.samples[name] = append(m.samples[name], s)
		}
	}
	return m
}

// request is one line of gunicorn's access log (service/gunicorn.conf.py).
type request struct {
	path, query                     string
	status, bytes                   int
	acceptEncoding, contentEncoding string
}

// requests returns the requests this exporter sent to the service, as the
// service logged them. m is a scrape taken after them: the log is read until
// it holds as many as the exporter counted (gunicorn writes a line after it
// answers, so the last may lag the scrape by a moment).
func (e *exporter) requests(m metrics) []request {
	e.t.Helper()
	want := int(m.sum("deployment_service_requests_total"))
	var got []request
	for range 200 {
		got = e.readAccessLog()
		if len(got) >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != want {
		e.t.Fatalf("the service logged %d requests of the exporter, the exporter counted %d", len(got), want)
	}
	return got
}

func (e *exporter) readAccessLog() []request {
	e.t.Helper()
	f, err := os.Open(e.svc.accessLog)
	if err != nil {
		e.t.Fatalf("opening the access log: %v", err)
	}
	defer f.Close()
	if _, err := f.Seek(e.logStart, io.SeekStart); err != nil {
		e.t.Fatalf("reading the access log: %v", err)
	}
	var got []request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// method, path, query, status, bytes, Accept-Encoding, Content-Encoding, User-Agent
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 8 || !strings.HasPrefix(fields[1], "/"+e.prefix+"/") ||
			!strings.HasPrefix(fields[7], "deployment_service_exporter/") {
			continue
		}
		if fields[0] != http.MethodGet {
			e.t.Errorf("the exporter sent %s %s; it must only GET", fields[0], fields[1])
		}
		status, _ := strconv.Atoi(fields[3])
		size, _ := strconv.Atoi(fields[4])
		got = append(got, request{
			path: fields[1], query: fields[2], status: status, bytes: size,
			acceptEncoding: dash(fields[5]), contentEncoding: dash(fields[6]),
		})
	}
	if err := sc.Err(); err != nil {
		e.t.Fatalf("reading the access log: %v", err)
	}
	return got
}

// dash maps gunicorn's "-" for a missing header to "".
func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// metrics is one parsed scrape, with assertions on it.
type metrics struct {
	t       *testing.T
	samples map[string][]*model.Sample // by metric name
}

// find returns the sample of metric name whose labels are exactly the given
// name, value pairs.
func (m metrics) find(name string, labels ...string) (float64, bool) {
	for _, s := range m.samples[name] {
		if len(s.Metric)-1 != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if v, ok := s.Metric[model.LabelName(labels[i])]; !ok || string(v) != labels[i+1] {
				match = false
				break
			}
		}
		if match {
			return float64(s.Value), true
		}
	}
	return 0, false
}

// sum adds up every sample of a gauge or counter.
func (m metrics) sum(name string) float64 {
	var total float64
	for _, s := range m.samples[name] {
		total += float64(s.Value)
	}
	return total
}

// series counts the samples of a metric.
func (m metrics) series(name string) int {
	return len(m.samples[name])
}

func (m metrics) want(want float64, name string, labels ...string) {
	m.t.Helper()
	got, ok := m.find(name, labels...)
	switch {
	case !ok:
		m.t.Errorf("%s is absent, want %v", series(name, labels), want)
	case got != want:
		m.t.Errorf("%s = %v, want %v", series(name, labels), got, want)
	}
}

func (m metrics) wantAbsent(name string, labels ...string) {
	m.t.Helper()
	if got, ok := m.find(name, labels...); ok {
		m.t.Errorf("%s = %v, want it absent", series(name, labels), got)
	}
}

func series(name string, labels []string) string {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", labels[i], labels[i+1])
		}
		b.WriteByte('}')
	}
	return b.String()
}

var listEndpoints = []string{"root", "projects", "locations"}

// wantCounts checks the lists: all up, counted exactly as the database does.
func wantCounts(m metrics, f facts) {
	m.t.Helper()
	m.want(1, "deployment_service_up")
	for _, ep := range listEndpoints {
		m.want(1, "deployment_service_endpoint_up", "endpoint", ep)
		m.want(200, "deployment_service_endpoint_status_code", "endpoint", ep)
	}
	m.want(float64(f.Projects), "deployment_service_projects")
	m.want(float64(f.Locations), "deployment_service_locations")
}

// wantHealthy checks a scrape of a service answering everything well, with
// --locations.detail-limit=5 --locations.info-field=name.
func wantHealthy(m metrics, f facts) {
	m.t.Helper()
	wantCounts(m, f)
	m.want(1, "deployment_service_endpoint_up", "endpoint", "location_detail")
	m.want(200, "deployment_service_endpoint_status_code", "endpoint", "location_detail")
	if n := m.series("deployment_service_location_up"); n != len(f.FirstLocations) {
		m.t.Errorf("%d deployment_service_location_up series, want %d", n, len(f.FirstLocations))
	}
	for _, l := range f.FirstLocations {
		id := strconv.Itoa(l.ID)
		m.want(1, "deployment_service_location_up", "location_id", id)
		m.want(1, "deployment_service_location_info", "location_id", id, "name", l.Name)
	}
	if errs := m.sum("deployment_service_request_errors_total"); errs != 0 {
		m.t.Errorf("deployment_service_request_errors_total adds up to %v, want 0", errs)
	}
}

var detailArgs = []string{"--locations.detail-limit=5", "--locations.info-field=name"}

// TestListShapes reads the same 2,276 locations through each pagination
// style DRF offers, and through none.
func TestListShapes(t *testing.T) {
	svc := setup(t)
	for _, prefix := range []string{
		"page",   // PageNumberPagination: count, next, previous, results
		"limit",  // LimitOffsetPagination
		"cursor", // CursorPagination: no count, every page walked
		"header", // a plain array per page, the next in a Link header
		"plain",  // no pagination: one array
	} {
		t.Run(prefix, func(t *testing.T) {
			e := startExporter(t, svc, prefix, svc.facts.Key, detailArgs...)
			wantHealthy(e.scrape(), svc.facts)
		})
	}
}

// TestHyperlinkedEntries reads lists of HyperlinkedModelSerializer entries,
// which carry url instead of id: they are counted; only the detail subset,
// which needs ids, fails.
func TestHyperlinkedEntries(t *testing.T) {
	svc := setup(t)
	t.Run("page pagination, detail subset", func(t *testing.T) {
		e := startExporter(t, svc, "hyperlinked", svc.facts.Key, detailArgs...)
		m := e.scrape()
		wantCounts(m, svc.facts)
		m.want(0, "deployment_service_endpoint_up", "endpoint", "location_detail")
		m.want(0, "deployment_service_endpoint_status_code", "endpoint", "location_detail")
		if n := m.series("deployment_service_location_up"); n != 0 {
			t.Errorf("%d deployment_service_location_up series without ids to name them, want 0", n)
		}
	})
	t.Run("cursor pagination, no detail subset", func(t *testing.T) {
		e := startExporter(t, svc, "hyperlinked-cursor", svc.facts.Key)
		m := e.scrape()
		wantCounts(m, svc.facts)
		if errs := m.sum("deployment_service_request_errors_total"); errs != 0 {
			t.Errorf("deployment_service_request_errors_total adds up to %v, want 0", errs)
		}
	})
}

// TestRefusedKey: DRF refuses an unknown token ("Invalid token.") and an
// inactive user's token ("User inactive or deleted.") with 401. Every
// endpoint is down, and the counts are absent, never 0. The poll page
// shows DRF's detail, and three scrapes log each failure once at warn.
func TestRefusedKey(t *testing.T) {
	svc := setup(t)
	for _, tc := range []struct{ name, key, detail string }{
		{"unknown token", "0123456789abcdef0123456789abcdef01234567", "Invalid token."},
		{"inactive user", svc.facts.InactiveKey, "User inactive or deleted."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startExporter(t, svc, "page", tc.key, detailArgs...)
			m := e.scrape()
			m.want(0, "deployment_service_up")
			for _, ep := range listEndpoints {
				m.want(0, "deployment_service_endpoint_up", "endpoint", ep)
				m.want(401, "deployment_service_endpoint_status_code", "endpoint", ep)
				if got, _ := m.find("deployment_service_request_errors_total", "endpoint", ep, "reason", "http_status"); got < 1 {
					t.Errorf(`deployment_service_request_errors_total{endpoint=%q,reason="http_status"} = %v, want at least 1`, ep, got)
				}
			}
			m.wantAbsent("deployment_service_projects")
			m.wantAbsent("deployment_service_locations")

			text := e.page("/polls/1")
			if want := fmt.Sprintf("    Body: %q\n", tc.detail); !strings.Contains(text, want) || strings.Contains(text, "status 401, 0 bytes") {
				t.Errorf("the poll's text view lacks %q or counts no bytes:\n%s", want, text)
			}
			if page := e.page(e.targetPage()); !strings.Contains(page, tc.detail) {
				t.Errorf("the target's page lacks %q", tc.detail)
			}
			e.scrape()
			e.scrape()
			// The detail subset comes from the list, which is refused: no
			// detail view is asked for.
			warned, repeated := 0, 0
			for line := range strings.SplitSeq(e.log(), "\n") {
				switch {
				case strings.Contains(line, "level=WARN") && strings.Contains(line, `msg="Poll failed"`):
					warned++
				case strings.Contains(line, "level=DEBUG") && strings.Contains(line, `msg="Poll still failing"`):
					repeated++
				}
			}
			if warned != 1 || repeated != 2 {
				t.Errorf("three scrapes logged %d failures at warn and %d at debug, want 1 (one line per poll) and 2:\n%s", warned, repeated, e.log())
			}
		})
	}
}

// page fetches a page of the exporter, keeping it to be searched for the
// key.
// targetPage is the path of the page of the service behind /metrics.
func (e *exporter) targetPage() string {
	return "/target?target=" + url.QueryEscape(e.svc.url+"/"+e.prefix)
}

func (e *exporter) page(path string) string {
	e.t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + e.addr + path)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	e.pagesRead = append(e.pagesRead, body)
	return string(body)
}

// TestHiddenLocation asks for the detail of a location of another user's
// project: DRF answers 404, that location is down, the lists stay up.
func TestHiddenLocation(t *testing.T) {
	svc := setup(t)
	visible := svc.facts.FirstLocations[0]
	hidden := strconv.Itoa(svc.facts.HiddenLocation)
	e := startExporter(t, svc, "page", svc.facts.Key,
		"--locations.detail-id="+strconv.Itoa(visible.ID),
		"--locations.detail-id="+hidden,
		"--locations.info-field=name")
	m := e.scrape()
	wantCounts(m, svc.facts)
	m.want(1, "deployment_service_location_up", "location_id", strconv.Itoa(visible.ID))
	m.want(1, "deployment_service_location_info", "location_id", strconv.Itoa(visible.ID), "name", visible.Name)
	m.want(0, "deployment_service_location_up", "location_id", hidden)
	m.wantAbsent("deployment_service_location_info", "location_id", hidden)
	m.want(0, "deployment_service_endpoint_up", "endpoint", "location_detail")
	m.want(404, "deployment_service_endpoint_status_code", "endpoint", "location_detail")
}

// TestThrottled runs against a prefix throttled at two requests a minute
// per user, whose quota another client of the same user has just used up:
// DRF answers 429 with Retry-After, and the exporter holds off, sending
// nothing until then and reporting every endpoint down with 429.
func TestThrottled(t *testing.T) {
	svc := setup(t)
	retryAfter := useUpQuota(t, svc)
	e := startExporter(t, svc, "throttled", svc.facts.Key, detailArgs...)

	first := e.scrape()
	first.want(0, "deployment_service_up")
	for _, ep := range listEndpoints {
		first.want(0, "deployment_service_endpoint_up", "endpoint", ep)
		first.want(429, "deployment_service_endpoint_status_code", "endpoint", ep)
	}
	first.wantAbsent("deployment_service_projects")
	first.wantAbsent("deployment_service_locations")
	// The exporter's own 429s came within seconds of useUpQuota's: their
	// Retry-After ends about when that one does.
	until, ok := first.find("deployment_service_hold_off_until_timestamp_seconds")
	switch {
	case !ok:
		t.Errorf("deployment_service_hold_off_until_timestamp_seconds is absent after a 429 with Retry-After")
	case math.Abs(until-float64(retryAfter.Unix())) > 10:
		t.Errorf("deployment_service_hold_off_until_timestamp_seconds = %v, want about %d (Retry-After)", until, retryAfter.Unix())
	}
	sent := e.requests(first)

	second := e.scrape()
	if n, m := second.sum("deployment_service_requests_total"), first.sum("deployment_service_requests_total"); n != m {
		t.Errorf("the exporter sent %v requests while holding off, want none", n-m)
	}
	if again := e.readAccessLog(); len(again) != len(sent) {
		t.Errorf("the service got %d requests while the exporter held off, want none", len(again)-len(sent))
	}
	second.want(0, "deployment_service_up")
	for _, ep := range listEndpoints {
		second.want(0, "deployment_service_endpoint_up", "endpoint", ep)
		second.want(429, "deployment_service_endpoint_status_code", "endpoint", ep)
	}
	second.wantAbsent("deployment_service_projects")
	second.wantAbsent("deployment_service_locations")
	if ok {
		second.want(until, "deployment_service_hold_off_until_timestamp_seconds")
	}

	// The polls' text says what DRF answered and link the held-off poll to
	// the one that met the 429.
	if text := e.page("/polls/1"); !strings.Contains(text, `Body: "Request was throttled. Expected available in `) || !strings.Contains(text, "    Retry-After: ") {
		t.Errorf("the text view of the poll that met the 429 lacks DRF's detail or Retry-After:\n%s", text)
	}
	if text := e.page("/polls/2"); !strings.Contains(text, ": sent nothing: held off until ") || !strings.Contains(text, ` after a 429 with Retry-After "`) ||
		!strings.Contains(text, "Poll 1 met the answer that started the hold-off: /polls/1") {
		t.Errorf("the text view of the held-off poll does not name the poll that met the 429:\n%s", text)
	}
	if page := e.page(e.targetPage()); !strings.Contains(page, `<a href="polls/1">Poll 1</a> met the answer that started the hold-off.`) {
		t.Errorf("the target's page does not link the held-off poll to poll 1:\n%s", page)
	}
}

// useUpQuota sends requests to the throttled API root with the key, as
// another client of the same user would, until DRF answers 429, and returns
// when its Retry-After ends. (DRF's throttle is not atomic: the requests of
// one poll, sent at once, can all pass, so the quota is used up beforehand.)
func useUpQuota(t *testing.T, svc service) time.Time {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	for range 10 {
		req, err := http.NewRequest(http.MethodGet, svc.url+"/throttled/api/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Token "+svc.facts.Key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /throttled/api/: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || secs <= 0 {
				t.Fatalf("DRF answered 429 with Retry-After %q, want seconds", resp.Header.Get("Retry-After"))
			}
			return time.Now().Add(time.Duration(secs) * time.Second)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /throttled/api/ answered %s, want 200 until 429", resp.Status)
		}
	}
	t.Fatalf("the throttled API never answered 429")
	return time.Time{}
}

// TestGzip reads the unpaginated 2,276-entry list (about 110 KB as JSON)
// with gzip, the default, and without: Django's GZipMiddleware compresses
// it when asked, the counts are right either way, and gzip cuts the bytes on
// the wire.
func TestGzip(t *testing.T) {
	svc := setup(t)
	const list = "/plain/api/projects/locations/"
	t.Run("service", func(t *testing.T) {
		// The service itself compresses when asked, whatever the exporter does.
		req, err := http.NewRequest(http.MethodGet, svc.url+list, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Token "+svc.facts.Key)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", list, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("GET %s with Accept-Encoding gzip: %s, Content-Encoding %q; want 200, gzip",
				list, resp.Status, resp.Header.Get("Content-Encoding"))
		}
	})
	wire := map[bool]int{}
	for _, gzip := range []bool{true, false} {
		name, args := "gzip", detailArgs
		if !gzip {
			name, args = "identity", append([]string{"--no-api.gzip"}, detailArgs...)
		}
		t.Run(name, func(t *testing.T) {
			e := startExporter(t, svc, "plain", svc.facts.Key, args...)
			m := e.scrape()
			wantHealthy(m, svc.facts)
			for _, r := range e.requests(m) {
				if asked := strings.Contains(r.acceptEncoding, "gzip"); asked != gzip {
					t.Errorf("GET %s: Accept-Encoding %q, want gzip asked: %v", r.path, r.acceptEncoding, gzip)
				}
				if r.path != list {
					continue
				}
				wire[gzip] = r.bytes
				if got := r.contentEncoding == "gzip"; got != gzip {
					t.Errorf("GET %s: Content-Encoding %q, want gzip: %v", r.path, r.contentEncoding, gzip)
				}
			}
			t.Logf("the list took %d bytes on the wire", wire[gzip])
		})
	}
	if wire[true] == 0 || wire[false] == 0 {
		t.Fatalf("the list's bytes on the wire were not seen both ways: %v", wire)
	}
	if wire[true]*3 > wire[false] {
		t.Errorf("the list took %d bytes with gzip, %d without: want gzip below a third", wire[true], wire[false])
	}
}
