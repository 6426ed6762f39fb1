package collector

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

func failed(reason client.Reason, status int) error {
	return &client.Error{Reason: reason, Status: status, Err: errors.New("boom")}
}

var (
	heldOff = &client.Error{Status: 429, Err: client.ErrHeldOff}
	refused = &client.Error{Reason: client.ReasonNetwork, Err: fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)}
)

// snapshotOf builds a snapshot whose root and lists answered with the given
// errors (nil is up) and whose detail views answered with details.
func snapshotOf(root, projects, locations error, details ...locationState) *Snapshot {
	st := func(err error) client.Result {
		var e *client.Error
		if errors.As(err, &e) {
			return client.Result{Status: e.Status, Err: err}
		}
		return client.Result{Status: 200, Err: err}
	}
	s := &Snapshot{Endpoints: map[client.Endpoint]client.Result{
		client.EndpointRoot: st(root), client.EndpointProjects: st(projects), client.EndpointLocations: st(locations),
	}, Details: details, trace: &client.Trace{}}
	if len(details) > 0 {
		// The location_detail endpoint sums up its views: the last status
		// and the first error. The summary must not trust it.
		sum := client.Result{Status: 200}
		for _, d := range details {
			if d.Err != nil && sum.Err == nil {
				sum.Err = d.Err
			}
		}
		s.Endpoints[client.EndpointLocationDetail] = sum
	}
	return s
}

func detail(id int64, status int, err error) locationState {
	return locationState{ID: id, DetailResult: client.DetailResult{Result: client.Result{Status: status, Err: err}}}
}

// latest returns the latest poll of every target kept, newest first.
func latest(l *PollLog) []*PollRecord {
	var out []*PollRecord
	for _, st := range l.Targets() {
		out = append(out, st.Latest)
	}
	slices.SortFunc(out, func(a, b *PollRecord) int { return cmp.Compare(b.ID, a.ID) })
	return out
}

func TestPollSummarySaysWhatHappened(t *testing.T) {
	ok := detail(1, 200, nil)
	until := time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC)
	withDetail := func(s *Snapshot, err error) *Snapshot {
		s.Endpoints[client.EndpointLocationDetail] = client.Result{Err: err}
		return s
	}
	heldSnap := snapshotOf(heldOff, heldOff, heldOff, detail(1, 429, heldOff))
	heldSnap.HoldOffUntil = until
	for _, tc := range []struct {
		name, state, want string
		snap              *Snapshot
	}{
		{"all well", "ok", "ok", snapshotOf(nil, nil, nil, ok, detail(2, 200, nil))},
		{
			"a failing detail view is named by its location id", "partial", "partial: location_detail 999 (1 of 3) http_status 404",
			snapshotOf(nil, nil, nil, ok, detail(999, 404, failed(client.ReasonHTTPStatus, 404)), detail(3, 200, nil)),
		},
		{
			"detail views failing in two ways, the highest status first", "partial",
			"partial: location_detail 4 (1 of 4) http_status 410, location_detail 3 (1 of 4) http_status 404, location_detail 2 (1 of 4) timeout",
			snapshotOf(nil, nil, nil, ok, detail(2, 0, failed(client.ReasonTimeout, 0)), detail(3, 404, failed(client.ReasonHTTPStatus, 404)), detail(4, 410, failed(client.ReasonHTTPStatus, 410))),
		},
		{
			"many failing detail views: a few ids and how many more", "partial", "partial: location_detail 1, 2, 3, 4, 5 and 2 more http_status 500",
			snapshotOf(nil, nil, nil, detail(1, 500, failed(client.ReasonHTTPStatus, 500)), detail(2, 500, failed(client.ReasonHTTPStatus, 500)), detail(3, 500, failed(client.ReasonHTTPStatus, 500)),
				detail(4, 500, failed(client.ReasonHTTPStatus, 500)), detail(5, 500, failed(client.ReasonHTTPStatus, 500)), detail(6, 500, failed(client.ReasonHTTPStatus, 500)), detail(7, 500, failed(client.ReasonHTTPStatus, 500))),
		},
		{
			"a list down and a detail view down: the worst status leads", "failed", "failed: locations http_status 500, location_detail 2 (1 of 2) http_status 404",
			snapshotOf(nil, nil, failed(client.ReasonHTTPStatus, 500), ok, detail(2, 404, failed(client.ReasonHTTPStatus, 404))),
		},
		{
			"a refused key: one cause, named once", "failed", "failed: root, projects, locations http_status 401",
			snapshotOf(failed(client.ReasonHTTPStatus, 401), failed(client.ReasonHTTPStatus, 401), failed(client.ReasonHTTPStatus, 401)),
		},
		{
			"nothing listening: the cause is named", "failed", "failed: root, projects, locations network (connection refused)",
			snapshotOf(refused, refused, refused),
		},
		{
			"detail views never requested are not checked", "failed", "failed: locations http_status 500; not checked: location_detail",
			withDetail(snapshotOf(nil, nil, failed(client.ReasonHTTPStatus, 500)), errNoDetail),
		},
		{"a poll that sent nothing says until when and why", "failed", "sent nothing: held off until 2026-11-22 07:00:14 UTC after a 429", heldSnap},
		{"a body that is not JSON names its 200", "failed", "failed: projects invalid_body 200", snapshotOf(nil, failed(client.ReasonInvalidBody, 200), nil)},
		{"details too late before any id was known", "partial", "partial: location_detail too late", withDetail(snapshotOf(nil, nil, nil), errTooLate)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newPollRecord("https://deploy.example.com", "", tc.snap)
			if rec.State != tc.state || rec.Summary != tc.want {
				t.Errorf("got %s %q\nwant %s %q", rec.State, rec.Summary, tc.state, tc.want)
			}
			for _, bad := range []string{"no response", "location_detail held off", "location_detail (no response)"} {
				if strings.Contains(rec.Summary, bad) {
					t.Errorf("summary %q says %q", rec.Summary, bad)
				}
			}
		})
	}
}

// TestHoldOffQuotesItsRetryAfter: the poll that met a 429 and the polls
// that then send nothing quote the Retry-After they obey, and the latter
// link to the former, even across targets of one origin.
func TestHoldOffQuotesItsRetryAfter(t *testing.T) {
	until := time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC)
	met := &PollRecord{Target: "svc", State: "failed", metUntil: until, HeldOffUntil: until, retryAfter: "14", heldStatus: 429, Rows: []Row{{"failed", "root"}}}
	held := func(target string) *PollRecord {
		s := snapshotOf(heldOff, heldOff, heldOff)
		s.HoldOffUntil = until
		return newPollRecord(target, "", s)
	}
	l := NewPollLog()
	l.Add(met)
	for _, target := range []string{"svc", "svc-other-module"} {
		rec := held(target)
		l.Add(rec)
		if want := `sent nothing: held off until 2026-11-22 07:00:14 UTC after a 429 with Retry-After "14"`; rec.Summary != want || rec.HoldOffPoll != met.ID {
			t.Errorf("%s: %q, links to poll %d\nwant %q, poll %d", target, rec.Summary, rec.HoldOffPoll, want, met.ID)
		}
		if st, _ := l.Target(target, ""); st.HoldOff != met {
			t.Errorf("%s keeps %v as the poll that started its hold-off, want poll %d", target, st.HoldOff, met.ID)
		}
	}
	var b strings.Builder
	_ = held("x").WriteText(&b)
	if strings.Contains(b.String(), "no response") || !strings.Contains(b.String(), "sent nothing: held off until 2026-11-22 07:00:14 UTC") {
		t.Errorf("text view of a poll that sent nothing:\n%s", b.String())
	}
}

// TestRowsSayWhatCameBack: each request's row says what was sent and what
// came back, failing rows first, requests not sent as such, and never a
// status 0.
func TestRowsSayWhatCameBack(t *testing.T) {
	until := time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC)
	s := snapshotOf(failed(client.ReasonHTTPStatus, 401), refused, failed(client.ReasonHTTPStatus, 429))
	rec := makeRecord("svc", "", s, []client.TraceRequest{
		{Endpoint: client.EndpointLocations, Method: "GET", URL: "svc/api/projects/locations/?page=2", Status: 200, Page: 2, Duration: 2600 * time.Millisecond, Phases: client.Phases{FirstByte: 2500 * time.Millisecond}},
		{Endpoint: client.EndpointLocations, Page: 2, Note: "walk stopped: next link points to another origin", NoteFailed: true},
		{Endpoint: client.EndpointRoot, Method: "GET", URL: "svc/api/", Status: 401, Bytes: 27, Reason: client.ReasonHTTPStatus, Error: "unexpected status Unauthorized", WWWAuthenticate: "Token", ContentType: "application/json", BodyExcerpt: `Invalid token.`},
		{Endpoint: client.EndpointProjects, Method: "GET", URL: "svc/api/projects/projects/", Reason: client.ReasonNetwork, Error: "connection refused"},
		{Endpoint: client.EndpointLocations, Method: "GET", URL: "svc/api/projects/locations/", Status: 429, Reason: client.ReasonHTTPStatus, Error: "unexpected status Too Many Requests", RetryAfter: "14", HoldOffUntil: until},
		{Endpoint: client.EndpointLocationDetail, Method: "GET", URL: "svc/api/projects/locations/1/", Status: 429, Error: "holding off"},
	}, 0)
	var got []string
	for _, r := range rec.Rows {
		got = append(got, r.State+": "+r.Text)
	}
	want := []string{
		"failed: root GET svc/api/ -> status 401, 27 bytes, 0s, http_status: unexpected status Unauthorized\n    Content-Type: application/json\n    WWW-Authenticate: Token\n    Body: \"Invalid token.\"",
		"failed: projects GET svc/api/projects/projects/ -> no response, 0 bytes, 0s, network: connection refused",
		"failed: locations GET svc/api/projects/locations/ -> status 429, 0 bytes, 0s, http_status: unexpected status Too Many Requests\n    Retry-After: 14\n    Held off until: 2026-11-22 07:00:14 UTC",
		"failed: locations page 2: FAILED, pagination: walk stopped: next link points to another origin",
		"slow: locations GET svc/api/projects/locations/?page=2 -> status 200, 0 bytes, 2.6s, slow\n    First byte: 2.5s",
		`notsent: location_detail GET svc/api/projects/locations/1/ -> not sent: held off until 2026-11-22 07:00:14 UTC after a 429 with Retry-After "14"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(rec.Notes) != 1 || !strings.HasPrefix(rec.Notes[0], "The service refused the exporter's key (401 Unauthorized)") {
		t.Errorf("notes %q: a refused key is not said plainly", rec.Notes)
	}
	if want := `failed: root http_status 429, root http_status 401`; strings.Contains(rec.Summary, want) || !strings.Contains(rec.Summary, `held off until 2026-11-22 07:00:14 UTC after a 429 with Retry-After "14"`) {
		t.Errorf("summary %q does not quote the Retry-After it obeys", rec.Summary)
	}
	var b strings.Builder
	rec.ID = 7
	_ = rec.WriteText(&b)
	for _, want := range []string{"Poll 7 of svc\n", "\nroot GET svc/api/ -> status 401", "    Body: \"Invalid token.\"\n"} {
		if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "module") {
			t.Errorf("text view lacks %q, or names a module for /metrics:\n%s", want, b.String())
		}
	}
}

// TestPollWithAMissingDetailIsPartial runs a real poll in which one detail
// view of three answers 404: the poll is partial, not ok, and its summary
// names the location whichever answer came last.
func TestPollWithAMissingDetailIsPartial(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Projects: 3, Locations: 9}, detailIDs: []int64{1, 999999, 2}})
	log := NewPollLog()
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 5 * time.Second, Recent: log, Name: "svc"})
	r.gather(t)
	targets := log.Targets()
	if len(targets) != 1 || keptIDs(targets[0]) != "1/1/-" || targets[0].Latest.Projects != (Count{3, true}) || targets[0].Latest.Locations != (Count{9, true}) {
		t.Fatalf("targets: %+v", targets)
	}
	if p := targets[0].Latest; p.State != "partial" || p.Summary != "partial: location_detail 999999 (1 of 3) http_status 404" {
		t.Errorf("poll: %s %q", p.State, p.Summary)
	}
	if row := targets[0].Latest.Rows[0]; row.State != "failed" || !strings.Contains(row.Text, "/999999/ -> status 404") {
		t.Errorf("the failing row does not come first: %+v", targets[0].Latest.Rows)
	}
}

// TestNoSecretInLogsPagesOrMetrics: a service that echoes the key upper-
// cased, or 12 characters of it, in a body shows none of it in the logs,
// the metrics, or the polls kept.
func TestNoSecretInLogsPagesOrMetrics(t *testing.T) {
	const key = "rig-key-0f1e2d3c-9a8b7c6d"
	recent := NewPollLog()
	r := newRig(t, rigOptions{service: sampleservice.Options{Locations: 10, Key: key}, detailIDs: []int64{1}, infoFields: []string{"name"}})
	level := promslog.NewLevel()
	_ = level.Set("debug")
	logger := promslog.New(&promslog.Config{Level: level, Writer: r.logs})
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 30 * time.Second, Recent: recent, Logger: logger})
	r.handler = NewHandler(r.poller, r.metrics, r.stats, r.longLive, 30*time.Second, logger)
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: http.StatusUnauthorized, Body: `{"detail": "Token ` + strings.ToUpper(key) + ` refused"}`})
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Body: strings.ToUpper(key[3:16]) + " is not JSON"})
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{RedirectTo: "http://" + strings.ToUpper(key) + ".example.com/"})
	r.svc.SetFault(sampleservice.EndpointLocationDetail, sampleservice.Fault{Body: `{"name": "` + strings.ToUpper(key) + `"}`})
	body := r.scrape(t, "") + r.scrape(t, "")
	var text strings.Builder
	for _, st := range recent.Targets() {
		for _, rec := range st.Polls() {
			fmt.Fprintf(&text, "%+v\n", *rec.PollRecord)
			_ = rec.WriteText(&text)
		}
	}
	for where, s := range map[string]string{"metrics": body, "logs": r.logs.String(), "poll log": text.String()} {
		for i := 0; i+12 <= len(key); i++ {
			if strings.Contains(strings.ToLower(s), key[i:i+12]) {
				t.Errorf("the %s show %q of the key:\n%s", where, key[i:i+12], s)
				break
			}
		}
	}
	if !strings.Contains(text.String(), "<secret>") || !strings.Contains(body, `name="<secret>"`) {
		t.Errorf("nothing redacted:\n%s\n%s", text.String(), body)
	}
}

// TestPollRowsInEndpointOrder: a poll's healthy requests come in endpoint
// order, root first and the detail views by id, whichever answered first.
func TestPollRowsInEndpointOrder(t *testing.T) {
	projectsDone, detail2Done := make(chan struct{}), make(chan struct{})
	var projectsOnce, detail2Once sync.Once
	// A gate opens when the request it waits for has been answered, or
	// after a while: the order only makes the test meaningful.
	wait := func(c chan struct{}) {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
		}
	}
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			switch req.URL.Path {
			case "/api/":
				wait(projectsDone)
			case "/api/projects/locations/1/":
				wait(detail2Done)
			}
			h.ServeHTTP(w, req)
			switch req.URL.Path {
			case "/api/projects/projects/":
				projectsOnce.Do(func() { close(projectsDone) })
			case "/api/projects/locations/2/":
				detail2Once.Do(func() { close(detail2Done) })
			}
		})
	}
	r := newRig(t, rigOptions{service: sampleservice.Options{Projects: 3, Locations: 9}, detailIDs: []int64{3, 1, 2}, wrap: wrap})
	log := NewPollLog()
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 10 * time.Second, Recent: log, Name: "svc"})
	r.gather(t)
	var got []string
	for _, row := range latest(log)[0].Rows {
		if f := strings.Fields(row.Text); f[1] != "page" {
			got = append(got, fmt.Sprintf("%s/%d", f[0], detailID(f[2])))
		}
	}
	if want := "root/0 projects/0 locations/0 location_detail/1 location_detail/2 location_detail/3"; strings.Join(got, " ") != want {
		t.Errorf("requests in the order %s, want %s", strings.Join(got, " "), want)
	}
}

// TestRequestsNotSentAreNotAnswers: during a hold-off that a detail view's
// 429 started, the detail views not sent read "not sent", with the
// hold-off's end and the Retry-After obeyed, never as answers.
func TestRequestsNotSentAreNotAnswers(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 5},
		detailIDs: []int64{1, 2, 3},
		client:    func(c *client.Config) { c.Concurrency = 1 },
	})
	r.svc.SetDetailFault(1, sampleservice.Fault{Status: 429, RetryAfter: "600"})
	log := NewPollLog()
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 10 * time.Second, Recent: log, Name: "svc"})
	r.gather(t)
	rec := latest(log)[0]
	var b strings.Builder
	_ = rec.WriteText(&b)
	text := b.String()
	held := fmt.Sprintf(`held off until %s UTC after a 429 with Retry-After "600"`, rec.HeldOffUntil.UTC().Format(timeFormat))
	for _, id := range []int{2, 3} {
		want := fmt.Sprintf("location_detail GET %s/api/projects/locations/%d/ -> not sent: %s\n", r.srv.URL, id, held)
		if rec.HeldOffUntil.IsZero() || !strings.Contains(text, want) {
			t.Errorf("text view lacks %q:\n%s", want, text)
		}
	}
	if want := "partial: location_detail 1 http_status 429; not sent: location_detail; " + held; rec.Summary != want {
		t.Errorf("summary %q\nwant %q", rec.Summary, want)
	}
	if strings.Contains(text, ", : ") || strings.Contains(text, "status 429, 0 bytes") {
		t.Errorf("a request not sent reads as an answer:\n%s", text)
	}
}
