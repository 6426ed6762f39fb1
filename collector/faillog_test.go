package collector

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// logLines sums up the log lines written since from: one entry per line,
// "LEVEL message key=value…" with only the given keys, in order.
func logLines(logs string, from int, keys ...string) []string {
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(logs[from:]), "\n") {
		if line == "" {
			continue
		}
		fields := logfmtFields(line)
		s := fields["level"] + " " + fields["msg"]
		for _, k := range keys {
			if v, ok := fields[k]; ok {
				s += " " + k + "=" + v
			}
		}
		out = append(out, s)
	}
	return out
}

// logfmtFields reads the key=value pairs of a logfmt line, unquoting
// quoted values (without escapes, which the lines under test do not have
// in the fields read).
func logfmtFields(line string) map[string]string {
	fields := map[string]string{}
	for line != "" {
		key, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && (rest[end] != '"' || rest[end-1] == '\\') {
				end++
			}
			val, line = rest[1:min(end, len(rest))], strings.TrimPrefix(rest[min(end+1, len(rest)):], " ")
		} else {
			val, line, _ = strings.Cut(rest, " ")
		}
		fields[key] = val
	}
	return fields
}

// TestFailureIsLoggedOnce scrapes a service through a revoked key, a
// change of failure and a recovery, and counts the log lines: one warn when
// a failure starts or changes, debug while it lasts, info when it ends.
func TestFailureIsLoggedOnce(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, detailIDs: []int64{1, 2}})
	key := r.svc.Key()
	step := func(name string, scrapes int, want ...string) {
		t.Helper()
		from := len(r.logs.String())
		for range scrapes {
			r.scrape(t, "")
		}
		got := logLines(r.logs.String(), from, "summary", "failed_polls")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: log lines\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	step("healthy", 2)
	r.svc.SetKey("another-key")
	step("key revoked, three scrapes", 3,
		"WARN Poll failed summary=failed: root, projects, locations, location_detail 1, 2 http_status 401",
		"DEBUG Poll still failing summary=failed: root, projects, locations, location_detail 1, 2 http_status 401 failed_polls=2",
		"DEBUG Poll still failing summary=failed: root, projects, locations, location_detail 1, 2 http_status 401 failed_polls=3",
	)
	r.svc.SetKey(key)
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 500})
	r.svc.SetDetailFault(2, sampleservice.Fault{Status: 404})
	step("key back, root at 500, one detail view at 404", 2,
		"WARN Poll failed summary=failed: root http_status 500, location_detail 2 (1 of 2) http_status 404",
		"DEBUG Poll still failing summary=failed: root http_status 500, location_detail 2 (1 of 2) http_status 404 failed_polls=5",
	)
	r.svc.ClearFaults()
	step("recovered", 2, "INFO Poll recovered failed_polls=5")
}

// TestHoldOffIsLoggedOnce: a 429 with Retry-After is one failure, which
// says until when and after what the requests it stopped wait; the scrapes
// it holds off log nothing above debug.
func TestHoldOffIsLoggedOnce(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, detailIDs: []int64{1}, client: func(c *client.Config) { c.Concurrency = 1 }})
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "120"})
	from := len(r.logs.String())
	for range 4 {
		r.scrape(t, "")
	}
	var loud []string
	for _, l := range logLines(r.logs.String(), from, "summary") {
		if !strings.HasPrefix(l, "DEBUG ") {
			loud = append(loud, l)
		}
	}
	if strings.Contains(r.logs.String(), "unknown time") {
		t.Errorf("a log line does not say until when it holds off:\n%s", r.logs.String())
	}
	if len(loud) != 1 || !strings.HasPrefix(loud[0], "WARN Poll failed") || !strings.Contains(loud[0], "held off until") || !strings.Contains(loud[0], "after a 429") {
		t.Errorf("log lines above debug:\n%s\nwant one Poll failed, held off until a time after a 429", strings.Join(loud, "\n"))
	}
}

// TestProbeFailuresAreLoggedPerTarget probes two services that refuse the
// key, in turn: each target's failure is logged once at warn, under its
// own target label, however the probes interleave.
func TestProbeFailuresAreLoggedPerTarget(t *testing.T) {
	var targets []string
	for range 2 {
		svc := sampleservice.New(sampleservice.Options{Key: "the-right-key-1234", Locations: 5})
		srv := httptest.NewServer(svc)
		t.Cleanup(srv.Close)
		targets = append(targets, srv.URL)
	}
	var logs bytes.Buffer
	level := promslog.NewLevel()
	_ = level.Set("debug")
	settings := keySettings("a-revoked-key-5678")
	settings.DetailIDs = nil
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), nil,
		promslog.New(&promslog.Config{Level: level, Writer: &syncWriter{w: &logs}}))
	for range 3 {
		for _, target := range targets {
			if code, _ := probe(t, h, "target="+url.QueryEscape(target)); code != 200 {
				t.Fatalf("probe answered %d", code)
			}
		}
	}
	lines := logLines(logs.String(), 0, "target", "module", "summary")
	for _, target := range targets {
		suffix := " target=" + target + " module=default summary=failed: root, projects, locations http_status 401"
		if n := countOf(lines, "WARN Poll failed"+suffix); n != 1 {
			t.Errorf("%s: %d warn lines, want 1", target, n)
		}
		if n := countOf(lines, "DEBUG Poll still failing"+suffix); n != 2 {
			t.Errorf("%s: %d debug lines, want 2", target, n)
		}
	}
	if t.Failed() {
		t.Logf("log lines:\n%s", strings.Join(lines, "\n"))
	}
}

func countOf(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if l == s {
			n++
		}
	}
	return n
}

// TestLogsStayBounded probes failing targets of 2 KB URLs through a
// refused connection, at the default level: a thousand probes of one
// target add under 100 KB of log, a thousand distinct targets under 1 MB,
// and every line names its cause.
func TestLogsStayBounded(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	long := closed.URL + "/" + strings.Repeat("p", 2000-len(closed.URL))
	for _, tc := range []struct {
		name   string
		target func(i int) string
		limit  int
	}{
		{"one target", func(int) string { return long }, 100 << 10},
		{"distinct targets", func(i int) string { return fmt.Sprintf("%s%d", long, i) }, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			settings := keySettings("k")
			settings.DetailIDs = nil
			h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), NewPollLog(),
				promslog.New(&promslog.Config{Writer: &syncWriter{w: &logs}}))
			for i := range 1000 {
				if code, _ := probe(t, h, "target="+url.QueryEscape(tc.target(i))); code != 200 {
					t.Fatalf("probe answered %d", code)
				}
			}
			if logs.Len() >= tc.limit || !strings.Contains(logs.String(), "(connection refused)") {
				t.Errorf("%d bytes of log, want under %d, naming the cause:\n%.2000s", logs.Len(), tc.limit, logs.String())
			}
			t.Logf("%d bytes of log", logs.Len())
		})
	}
}

// TestTimeoutNamesItsLimit: a request cut by the poll's deadline says
// which limit set it: the scrape timeout header, with its value.
func TestTimeoutNamesItsLimit(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}})
	r.hold(t, sampleservice.EndpointRoot)
	r.scrape(t, "0.3")
	// The scrape may answer before the poll has logged how it ended.
	want := `the scrape timeout of 0.3s (X-Prometheus-Scrape-Timeout-Seconds`
	waitFor(t, func() bool { return strings.Contains(r.logs.String(), "Poll failed") })
	if !strings.Contains(r.logs.String(), want) {
		t.Errorf("the log does not say the scrape timeout ended the poll:\n%s", r.logs.String())
	}
}

// TestLogNameIsBoundedAndDistinct: a long target keeps its start, stays
// valid UTF-8 and differs from another of the same start.
func TestLogNameIsBoundedAndDistinct(t *testing.T) {
	long := "https://deploy.example.com/" + strings.Repeat("é", 1000)
	for _, tc := range []struct{ a, b string }{
		{long + "1", long + "2"},
		{"https://a.example.com", "https://b.example.com"},
	} {
		a, b := bounded(tc.a, 160), bounded(tc.b, 160)
		if a == b || len(a) > 160 || !utf8.ValidString(a) || !strings.HasPrefix(tc.a, strings.TrimRight(a[:20], "…")) {
			t.Errorf("bounded(%.40q…) = %q, bounded(%.40q…) = %q", tc.a, a, tc.b, b)
		}
	}
	if got := bounded("https://a.example.com", 160); got != "https://a.example.com" {
		t.Errorf("a short name became %q", got)
	}
}
