package collector

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	if len(targets) != 1 || targets[0].State != PollPartial || targets[0].Projects != (Count{3, true}) || targets[0].Locations != (Count{9, true}) || targets[0].FailingID != 1 {
		t.Errorf("targets: %+v", targets)
	}
}

// TestHeldOffPollNamesThePollThatMetThe429 checks the link from a poll
// that sent nothing to the one whose answer started the hold-off, even
// when the held-off poll was recorded first, and only within one target.
func TestHeldOffPollNamesThePollThatMetThe429(t *testing.T) {
	until := time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC)
	held := snapshotOf(heldOff, heldOff, heldOff)
	held.HoldOffUntil = until
	log := NewPollLog(10)
	log.Add(newPollRecord("svc", "", held)) // 1: recorded before the poll that met the 429
	log.Add(&PollRecord{Target: "other", Requests: []client.TraceRequest{{Status: 429, HoldOffUntil: until}}})
	log.Add(&PollRecord{Target: "svc", Requests: []client.TraceRequest{{Status: 200}, {Status: 429, RetryAfter: "14", HoldOffUntil: until}}})
	log.Add(&PollRecord{Target: "svc", Requests: []client.TraceRequest{{Status: 429, HoldOffUntil: until.Add(-time.Second)}}})
	rec, ok := log.Get(1)
	if !ok || !rec.HeldOff || rec.HoldOffStatus != 429 || !rec.HeldOffUntil.Equal(until) || !rec.SentNothing() {
		t.Fatalf("held-off poll %+v", rec)
	}
	if rec.HoldOffPollID != 3 {
		t.Errorf("held-off poll links to poll %d, want 3", rec.HoldOffPollID)
	}
	if kept, _ := log.Get(1); kept == rec {
		t.Error("Get hands out the shared record instead of a copy")
	}
	var b strings.Builder
	if err := rec.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "Sent nothing: the service asked to hold off (status 429) until 2026-11-22T07:00:14Z; poll 3 met that answer.\n"; !strings.Contains(b.String(), want) {
		t.Errorf("text view lacks %q:\n%s", want, b.String())
	}
	if rec, _ := log.Get(3); rec.HoldOffPollID != 0 || rec.SentNothing() {
		t.Errorf("the poll that met the 429 links to %d", rec.HoldOffPollID)
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
	r.handler = NewHandler(r.poller, r.metrics, r.longLive, 30*time.Second, logger)
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: http.StatusUnauthorized, Body: `{"detail": "Token ` + strings.ToUpper(key) + ` refused"}`})
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{Body: strings.ToUpper(key[3:16]) + " is not JSON"})
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{RedirectTo: "http://" + strings.ToUpper(key) + ".example.com/"})
	r.svc.SetFault(sampleservice.EndpointLocationDetail, sampleservice.Fault{Body: `{"name": "` + strings.ToUpper(key) + `"}`})
	body := r.scrape(t, "") + r.scrape(t, "")
	var text strings.Builder
	for _, rec := range recent.Recent() {
		if err := rec.WriteText(&text); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range recent.Targets() {
		fmt.Fprintf(&text, "%+v\n", st)
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
