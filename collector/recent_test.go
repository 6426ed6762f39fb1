package collector

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

func failed(reason client.Reason, status int) error {
	return &client.Error{Reason: reason, Status: status, Err: errors.New("boom")}
}

var heldOff = &client.Error{Status: 429, Err: client.ErrHeldOff}

// snapshotOf builds a snapshot whose root and lists answered with the given
// errors (nil is up) and whose detail views answered with details.
func snapshotOf(root, projects, locations error, details ...locationState) *Snapshot {
	st := func(err error) endpointState {
		var e *client.Error
		if errors.As(err, &e) {
			return endpointState{Status: e.Status, Err: err}
		}
		return endpointState{Status: 200, Err: err}
	}
	s := &Snapshot{Endpoints: map[client.Endpoint]endpointState{
		client.EndpointRoot: st(root), client.EndpointProjects: st(projects), client.EndpointLocations: st(locations),
	}, Details: details}
	if len(details) > 0 {
		// The location_detail endpoint as the poll sums it up today: the
		// last status and the first error. The summary must not trust it.
		sum := endpointState{Status: 200}
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
	return locationState{ID: id, Status: status, Err: err}
}

func TestPollSummaryTellsTheTruth(t *testing.T) {
	ok := detail(1, 200, nil)
	for _, tc := range []struct {
		name      string
		snap      *Snapshot
		wantState PollState
		wantUp    bool
		want      string
	}{
		{"all well", snapshotOf(nil, nil, nil, ok, detail(2, 200, nil)), PollOK, true, "ok"},
		{
			"one detail view at 404 while the last answer was a 200",
			snapshotOf(nil, nil, nil, ok, detail(2, 404, failed(client.ReasonHTTPStatus, 404)), detail(3, 200, nil)),
			PollPartial, true, "partial: location_detail (1 of 3) http_status 404",
		},
		{
			"detail views failing in two ways, the highest status first",
			snapshotOf(nil, nil, nil, ok, detail(2, 0, failed(client.ReasonTimeout, 0)), detail(3, 404, failed(client.ReasonHTTPStatus, 404)), detail(4, 410, failed(client.ReasonHTTPStatus, 410))),
			PollPartial, true, "partial: location_detail (1 of 4) http_status 410, location_detail (1 of 4) http_status 404, location_detail (1 of 4) timeout",
		},
		{
			"a list down and a detail view down: the worst status leads",
			snapshotOf(nil, nil, failed(client.ReasonHTTPStatus, 500), ok, detail(2, 404, failed(client.ReasonHTTPStatus, 404))),
			PollFailed, false, "failed: locations http_status 500, location_detail (1 of 2) http_status 404",
		},
		{
			"a refused key: one cause, named once",
			snapshotOf(failed(client.ReasonHTTPStatus, 401), failed(client.ReasonHTTPStatus, 401), failed(client.ReasonHTTPStatus, 401)),
			PollFailed, false, "failed: root, projects, locations http_status 401",
		},
		{
			"nothing listening: no status to name",
			snapshotOf(failed(client.ReasonNetwork, 0), failed(client.ReasonNetwork, 0), failed(client.ReasonNetwork, 0)),
			PollFailed, false, "failed: root, projects, locations network",
		},
		{
			"held off",
			snapshotOf(heldOff, heldOff, heldOff, detail(1, 429, heldOff), detail(2, 429, heldOff)),
			PollFailed, false, "failed: root, projects, locations, location_detail held off 429",
		},
		{
			"a body that is not JSON names its 200",
			snapshotOf(nil, failed(client.ReasonInvalidBody, 200), nil),
			PollFailed, false, "failed: projects invalid_body 200",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newPollRecord("https://deploy.example.com", "", tc.snap)
			if rec.State != tc.wantState || rec.Up != tc.wantUp || rec.Summary != tc.want {
				t.Errorf("got state %v, up %v, %q\nwant state %v, up %v, %q", rec.State, rec.Up, rec.Summary, tc.wantState, tc.wantUp, tc.want)
			}
		})
	}
}

func TestPollSummaryWithoutDetailStates(t *testing.T) {
	// A location_detail endpoint that failed with no detail view listed
	// (too late before any id was known) still makes the poll partial.
	s := snapshotOf(nil, nil, nil)
	s.Endpoints[client.EndpointLocationDetail] = endpointState{Err: errTooLate}
	rec := newPollRecord("t", "", s)
	if rec.State != PollPartial || rec.Summary != "partial: location_detail too late" {
		t.Errorf("got %v %q", rec.State, rec.Summary)
	}
}

func TestPollRecordKeepsCountsAndHoldOff(t *testing.T) {
	s := snapshotOf(heldOff, heldOff, heldOff)
	rec := newPollRecord("t", "m", s)
	if !rec.HeldOff || rec.Projects.Known || rec.Locations.Known {
		t.Errorf("held-off poll: held off %v, counts %+v %+v", rec.HeldOff, rec.Projects, rec.Locations)
	}
	s = snapshotOf(nil, nil, nil)
	s.Projects, s.Locations = Count{5, true}, Count{300, true}
	rec = newPollRecord("t", "m", s)
	if rec.HeldOff || rec.Projects != (Count{5, true}) || rec.Locations != (Count{300, true}) {
		t.Errorf("poll: held off %v, counts %+v %+v", rec.HeldOff, rec.Projects, rec.Locations)
	}

	until := time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC)
	reqs := []client.TraceRequest{
		{Endpoint: client.EndpointRoot, Status: 200},
		{Endpoint: client.EndpointProjects, Status: 429, RetryAfter: "14", HoldOffUntil: until},
		{Endpoint: client.EndpointLocations, Status: 429, RetryAfter: "5", HoldOffUntil: until.Add(-9 * time.Second)},
	}
	if got := holdOffEnd(reqs); !got.Equal(until) {
		t.Errorf("hold-off end %v, want the latest one, %v", got, until)
	}
	if got := holdOffEnd(reqs[:1]); !got.IsZero() {
		t.Errorf("hold-off end %v without a hold-off", got)
	}
}

func TestTextViewShowsTheAnswer(t *testing.T) {
	rec := &PollRecord{
		ID: 7, Target: "https://deploy.example.com", Summary: "failed: root, projects, locations http_status 401",
		Requests: []client.TraceRequest{
			{
				Endpoint: client.EndpointRoot, Method: "GET", URL: "https://deploy.example.com/api/", Status: 401, Bytes: 27,
				Reason: client.ReasonHTTPStatus, Error: "unexpected status Unauthorized",
				ContentType: "application/json", BodyExcerpt: "Invalid token.\n\x1b[31m",
			},
			{
				Endpoint: client.EndpointProjects, Method: "GET", URL: "https://deploy.example.com/api/projects/projects/", Status: 302,
				Reason: client.ReasonNetwork, Error: "redirect refused", Location: "https://other.example.com/?token=REDACTED",
			},
			{
				Endpoint: client.EndpointLocations, Method: "GET", URL: "https://deploy.example.com/api/projects/locations/", Status: 429,
				Reason: client.ReasonHTTPStatus, Error: "unexpected status Too Many Requests",
				RetryAfter: "14", HoldOffUntil: time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC),
			},
			{Endpoint: client.EndpointLocations, Page: 2, Note: "walk stopped: next link points to another origin https://evil.example.com"},
		},
	}
	var b strings.Builder
	if err := rec.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"root GET https://deploy.example.com/api/ -> status 401, 27 bytes, 0s, http_status: unexpected status Unauthorized\n" +
			"    Content-Type: application/json\n" +
			`    Body: "Invalid token.\n\x1b[31m"` + "\n",
		"    Location: https://other.example.com/?token=REDACTED\n",
		"    Retry-After: 14; held off until 2026-11-22T07:00:14Z\n",
		"    locations page 2: walk stopped: next link points to another origin https://evil.example.com\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text view lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Error("a control character from the service reached the text view")
	}
}

// TestPollWithAMissingDetailIsPartial runs a real poll in which one detail
// view of three answers 404: the poll is partial, not ok, and its summary
// names the 404 whichever answer came last.
func TestPollWithAMissingDetailIsPartial(t *testing.T) {
	r := newRig(t, rigOptions{service: sampleservice.Options{Projects: 3, Locations: 9}, detailIDs: []int64{1, 999999, 2}})
	log := NewPollLog(10)
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 5 * time.Second, Recent: log, Name: "svc"})
	r.gather(t)
	polls := log.Recent()
	if len(polls) != 1 {
		t.Fatalf("%d polls recorded, want 1", len(polls))
	}
	if p := polls[0]; p.State != PollPartial || !p.Up || p.Summary != "partial: location_detail (1 of 3) http_status 404" {
		t.Errorf("poll: state %v, up %v, %q", p.State, p.Up, p.Summary)
	}
	targets := log.Targets()
	if len(targets) != 1 || keptIDs(targets[0]) != "1/1/-" || targets[0].Latest.Projects != (Count{3, true}) || targets[0].Latest.Locations != (Count{9, true}) {
		t.Errorf("targets: %+v", targets)
	}
}

// TestTextViewNamesTheFlagsModule checks that the text view names the
// module of the single target as the pages and the README do.
func TestTextViewNamesTheFlagsModule(t *testing.T) {
	for module, want := range map[string]string{"": "module (flags)\n", "prod": "module prod\n"} {
		var b strings.Builder
		if err := (&PollRecord{ID: 1, Target: "svc", Module: module}).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "Poll 1 of svc, "+want) {
			t.Errorf("module %q: text view lacks %q:\n%s", module, want, b.String())
		}
	}
}

// TestNoSecretInLogsPagesOrMetrics: a service that echoes the key upper-
// cased, or 12 characters of it, in a body shows none of it in the logs,
// the metrics, the poll log's text views or the target's state.
func TestNoSecretInLogsPagesOrMetrics(t *testing.T) {
	const key = "rig-key-0f1e2d3c-9a8b7c6d"
	recent := NewPollLog(10)
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
		for _, rec := range []*PollRecord{st.Latest, st.Failing} {
			fmt.Fprintf(&text, "%+v\n", *rec)
			if err := rec.WriteText(&text); err != nil {
				t.Fatal(err)
			}
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

// TestPollRowsInEndpointOrder: a poll's requests come in endpoint order,
// root first and the detail views by id, whichever answered first.
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
	log := NewPollLog(10)
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 10 * time.Second, Recent: log, Name: "svc"})
	r.gather(t)
	var got []string
	for _, q := range log.Recent()[0].Requests {
		if q.Note == "" {
			got = append(got, fmt.Sprintf("%s/%d", q.Endpoint, detailID(q.URL)))
		}
	}
	if want := "root/0 projects/0 locations/0 location_detail/1 location_detail/2 location_detail/3"; strings.Join(got, " ") != want {
		t.Errorf("requests in the order %s, want %s", strings.Join(got, " "), want)
	}
}

// TestRequestsNotSentAreNotAnswers: during a hold-off that a detail view's
// 429 started, the detail views not sent read "not sent", with the
// hold-off's status and end, never as answers with an empty reason.
func TestRequestsNotSentAreNotAnswers(t *testing.T) {
	r := newRig(t, rigOptions{
		service:   sampleservice.Options{Locations: 5},
		detailIDs: []int64{1, 2, 3},
		client:    func(c *client.Config) { c.Concurrency = 1 },
	})
	r.svc.SetDetailFault(1, sampleservice.Fault{Status: 429, RetryAfter: "600"})
	log := NewPollLog(10)
	r.poller = NewPoller(r.target, PollerOptions{Timeout: 10 * time.Second, Recent: log, Name: "svc"})
	r.gather(t)
	rec := log.Recent()[0]
	var b strings.Builder
	if err := rec.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	until := rec.HeldOffUntil.UTC().Format("2006-01-02 15:04:05") + " UTC"
	for _, id := range []int{2, 3} {
		want := fmt.Sprintf("location_detail GET %s/api/projects/locations/%d/ -> not sent: the service had asked to hold off (status 429) until %s\n", r.srv.URL, id, until)
		if rec.HeldOffUntil.IsZero() || !strings.Contains(text, want) {
			t.Errorf("text view lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, ", : ") || strings.Contains(text, "status 429, 0 bytes") {
		t.Errorf("a request not sent reads as an answer:\n%s", text)
	}
}

// TestTextViewSaysWhatAStatusMeans: a 401 says plainly that the key was
// refused, a request without an answer reads "no response", and a slow
// answer is marked.
func TestTextViewSaysWhatAStatusMeans(t *testing.T) {
	rec := &PollRecord{ID: 3, Target: "svc", Requests: []client.TraceRequest{
		{Endpoint: client.EndpointRoot, Method: "GET", URL: "svc/api/", Status: 401, Reason: client.ReasonHTTPStatus, Error: "unexpected status Unauthorized", WWWAuthenticate: "Token"},
		{Endpoint: client.EndpointProjects, Method: "GET", URL: "svc/api/projects/projects/", Reason: client.ReasonNetwork, Error: "connection refused"},
		{Endpoint: client.EndpointLocations, Method: "GET", URL: "svc/api/projects/locations/", Status: 200, Duration: 2600 * time.Millisecond, Phases: client.Phases{FirstByte: 2500 * time.Millisecond}},
	}}
	var b strings.Builder
	if err := rec.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nThe service refused the exporter's key (401 Unauthorized): ",
		"root GET svc/api/ -> status 401, 0 bytes, 0s, http_status: unexpected status Unauthorized\n",
		"projects GET svc/api/projects/projects/ -> no response, 0 bytes, 0s, network: connection refused\n",
		"locations GET svc/api/projects/locations/ -> status 200, 0 bytes, 2.6s, slow\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text view lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "status 0") {
		t.Errorf("text view shows a status 0:\n%s", b.String())
	}
}

// TestSlowPollIsNotOK: a poll whose every request answered well, one of
// them after more than 2 s, is slow, and says where; a failed one says so
// after its failures.
func TestSlowPollIsNotOK(t *testing.T) {
	slow := []client.TraceRequest{
		{Endpoint: client.EndpointRoot, Status: 200, Phases: client.Phases{FirstByte: 100 * time.Millisecond}},
		{Endpoint: client.EndpointProjects, Status: 200, Phases: client.Phases{FirstByte: 2500 * time.Millisecond}},
		{Endpoint: client.EndpointProjects, Status: 200, Page: 2, Phases: client.Phases{FirstByte: 2501 * time.Millisecond}},
	}
	for _, tc := range []struct {
		snap      *Snapshot
		wantState PollState
		want      string
	}{
		{snapshotOf(nil, nil, nil), PollSlow, "slow: projects 2.501s"},
		{snapshotOf(nil, nil, failed(client.ReasonHTTPStatus, 500)), PollFailed, "failed: locations http_status 500; slow: projects 2.501s"},
	} {
		got := &PollRecord{Requests: slow}
		if got.sum(tc.snap); got.State != tc.wantState || got.Summary != tc.want {
			t.Errorf("got %v %q, want %v %q", got.State, got.Summary, tc.wantState, tc.want)
		}
	}
}
