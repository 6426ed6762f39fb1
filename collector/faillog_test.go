package collector

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

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

// without drops the lines whose message is one of msgs.
func without(lines []string, msgs ...string) []string {
	return slices.DeleteFunc(lines, func(l string) bool {
		for _, m := range msgs {
			if strings.Contains(l, " "+m) {
				return true
			}
		}
		return false
	})
}

// TestFailureIsLoggedOnce scrapes a service through a revoked key, a
// change of failure and a recovery, and counts the log lines: warn when a
// failure starts or changes, debug while it lasts, info when it ends.
func TestFailureIsLoggedOnce(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}, detailIDs: []int64{1, 2}})
	key := r.svc.Key()
	step := func(name string, scrapes int, want ...string) {
		t.Helper()
		from := len(r.logs.String())
		for range scrapes {
			r.scrape(t, "")
		}
		got := without(logLines(r.logs.String(), from, "endpoint", "status", "previously", "failed_polls", "kinds", "failed", "location_ids"), "Location detail failed")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: log lines\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	step("healthy", 2)
	r.svc.SetKey("another-key")
	step("key revoked, three scrapes", 3,
		"WARN Endpoint failed endpoint=root status=401",
		"WARN Endpoint failed endpoint=projects status=401",
		"WARN Endpoint failed endpoint=locations status=401",
		"WARN Location details failed status=401 kinds=http_status 401 failed=2 location_ids=1,2",
		"DEBUG Endpoint still failing endpoint=root status=401 failed_polls=2",
		"DEBUG Endpoint still failing endpoint=projects status=401 failed_polls=2",
		"DEBUG Endpoint still failing endpoint=locations status=401 failed_polls=2",
		"DEBUG Location details still failing status=401 failed_polls=2 kinds=http_status 401 failed=2 location_ids=1,2",
		"DEBUG Endpoint still failing endpoint=root status=401 failed_polls=3",
		"DEBUG Endpoint still failing endpoint=projects status=401 failed_polls=3",
		"DEBUG Endpoint still failing endpoint=locations status=401 failed_polls=3",
		"DEBUG Location details still failing status=401 failed_polls=3 kinds=http_status 401 failed=2 location_ids=1,2",
	)
	r.svc.SetKey(key)
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 500})
	r.svc.SetDetailFault(2, sampleservice.Fault{Status: 404})
	step("key back, root at 500, one detail view at 404", 2,
		"WARN Endpoint failed endpoint=root status=500 previously=http_status 401",
		"INFO Endpoint recovered endpoint=projects failed_polls=3",
		"INFO Endpoint recovered endpoint=locations failed_polls=3",
		"WARN Location details failed status=404 previously=http_status 401 kinds=http_status 404 failed=1 location_ids=2",
		"DEBUG Endpoint still failing endpoint=root status=500 failed_polls=5",
		"DEBUG Location details still failing status=404 failed_polls=5 kinds=http_status 404 failed=1 location_ids=2",
	)
	r.svc.ClearFaults()
	step("recovered", 2,
		"INFO Endpoint recovered endpoint=root failed_polls=5",
		"INFO Location details recovered failed_polls=5",
	)
}

// TestHoldOffIsLoggedOnce: a 429 with Retry-After is one failure and one
// hold-off line; the scrapes it holds off log nothing above debug.
func TestHoldOffIsLoggedOnce(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10}})
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{Status: 429, RetryAfter: "120"})
	from := len(r.logs.String())
	for range 4 {
		r.scrape(t, "")
	}
	var loud []string
	for _, l := range logLines(r.logs.String(), from, "endpoint", "status") {
		if !strings.HasPrefix(l, "DEBUG ") {
			loud = append(loud, l)
		}
	}
	// The root and the projects may or may not have been sent before the
	// 429 came back; whichever were not are held off, at debug.
	want := []string{
		"WARN Endpoint failed endpoint=locations status=429",
		"WARN The service asked to hold off: no requests until then status=429",
	}
	if strings.Join(loud, "\n") != strings.Join(want, "\n") {
		t.Errorf("log lines above debug:\n%s\nwant\n%s", strings.Join(loud, "\n"), strings.Join(want, "\n"))
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
	lines := logLines(logs.String(), 0, "target", "module", "endpoint", "status")
	for _, target := range targets {
		for _, ep := range []string{"root", "projects", "locations"} {
			suffix := fmt.Sprintf(" target=%s module=default endpoint=%s status=401", target, ep)
			warn := slices.Index(lines, "WARN Endpoint failed"+suffix)
			if n := countOf(lines, "WARN Endpoint failed"+suffix); n != 1 {
				t.Errorf("%s %s: %d warn lines, want 1", target, ep, n)
			}
			if n := countOf(lines, "DEBUG Endpoint still failing"+suffix); n != 2 || warn < 0 {
				t.Errorf("%s %s: %d debug lines after the warn, want 2", target, ep, n)
			}
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

// TestFailingIDsNamesAFew: a log line names the first few failing
// locations and how many more fail.
func TestFailingIDsNamesAFew(t *testing.T) {
	for _, tc := range []struct {
		failing []int64
		want    string
	}{
		{[]int64{1, 2, 3, 5, 6, 7, 8, 9}, "1,2,3,5,6 and 3 more"},
		{[]int64{2, 9}, "2,9"},
	} {
		var details []locationState
		for id := int64(1); id <= 9; id++ {
			details = append(details, detail(id, 200, nil))
			if slices.Contains(tc.failing, id) {
				details[id-1] = detail(id, 500, failed(client.ReasonHTTPStatus, 500))
			}
		}
		var buf bytes.Buffer
		var f failureLog
		f.log(promslog.New(&promslog.Config{Writer: &buf}), snapshotOf(nil, nil, nil, details...))
		if got := logLines(buf.String(), 0, "location_ids"); !slices.Contains(got, "WARN Location details failed location_ids="+tc.want) {
			t.Errorf("log lines %q, want location_ids=%s", got, tc.want)
		}
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
	waitFor(t, func() bool { return strings.Contains(r.logs.String(), "Endpoint failed") })
	if !strings.Contains(r.logs.String(), want) {
		t.Errorf("the log does not say the scrape timeout ended the poll:\n%s", r.logs.String())
	}
}

// TestHoldOffLoggedOncePerRun: a service that keeps asking to hold off is
// warned about once; each new ask is debug, and the end is info.
func TestHoldOffLoggedOncePerRun(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 5}})
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Status: 429, RetryAfter: "1"})
	pastHoldOff := func() {
		t.Helper()
		until, _ := r.target.Client.HoldOff()
		waitFor(t, func() bool { return time.Now().After(until) })
	}
	from := len(r.logs.String())
	r.scrape(t, "") // meets the first 429
	pastHoldOff()
	r.scrape(t, "") // and another
	pastHoldOff()
	r.svc.ClearFaults()
	r.scrape(t, "") // answered well
	var got []string
	for _, l := range strings.Split(r.logs.String()[from:], "\n") {
		if strings.Contains(l, "hold off") {
			_, msg, _ := strings.Cut(l, "msg=")
			level := l[strings.Index(l, "level=")+6:]
			got = append(got, strings.Fields(level)[0]+" "+strings.SplitN(msg, `"`, 3)[1])
		}
	}
	want := []string{"WARN The service asked to hold off: no requests until then", "DEBUG The service asked again to hold off", "INFO The service no longer asks to hold off"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hold-off lines:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
