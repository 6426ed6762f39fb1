package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// pollRig polls a sample service for real and serves the pages of
// what it did.
type pollRig struct {
	svc    *sampleservice.Service
	srv    *httptest.Server
	client *client.Client
	poller *collector.Poller
	pages  *pages
	// name is the service's name on the pages.
	name string
}

// newPollRig watches a sample service with the given options, sending key
// and checking the given detail views, one request at a time.
func newPollRig(t *testing.T, opts sampleservice.Options, key string, detailIDs ...int64) *pollRig {
	t.Helper()
	r := &pollRig{svc: sampleservice.New(opts)}
	r.srv = httptest.NewServer(r.svc)
	t.Cleanup(r.srv.Close)
	u, err := url.Parse(r.srv.URL + r.svc.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	r.client, err = client.New(client.Config{
		BaseURL:          u,
		HTTPClientConfig: config.HTTPClientConfig{Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(key)}},
		Concurrency:      1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.client.Close)
	log := collector.NewPollLog()
	r.poller = collector.NewPoller(&collector.Target{Client: r.client, DetailIDs: detailIDs}, collector.PollerOptions{
		Timeout: 5 * time.Second, Recent: log, Name: client.RedactURL(u),
	})
	r.name = client.RedactURL(u)
	r.pages = &pages{modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
	return r
}

func (r *pollRig) poll(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.poller.Poll(ctx)
}

// text returns the text view of a poll.
func (r *pollRig) text(t *testing.T, id int) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /polls/{id}", r.pages.poll)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/polls/%d", id), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("text view of poll %d answered %d", id, rec.Code)
	}
	return rec.Body.String()
}

// section returns poll id's section of the target's page.
func (r *pollRig) section(t *testing.T, id int) *node {
	t.Helper()
	doc := render(t, r.pages, "/target?target="+url.QueryEscape(r.name))
	s := doc.all(func(n *node) bool { return n.attrs["id"] == fmt.Sprintf("poll-%d", id) })
	if len(s) != 1 {
		t.Fatalf("the target's page shows no poll %d:\n%s", id, doc.Text())
	}
	return s[0]
}

// rows returns, per endpoint, the rows of requests of a poll on its target's page.
func rows(doc *node) map[string][]string {
	out := map[string][]string{}
	for _, pre := range doc.all(func(n *node) bool { return n.name == "pre" }) {
		ep, _, _ := strings.Cut(pre.Text(), " ")
		out[ep] = append(out[ep], pre.attrs["class"]+": "+pre.Text())
	}
	return out
}

// TestRefusedKeyShowsWhatCameBack polls a service that refuses the key as
// Django REST framework does: the target's page and the text view show the
// body's bytes, its detail, its Content-Type and the WWW-Authenticate
// header that says which scheme the service wants.
func TestRefusedKeyShowsWhatCameBack(t *testing.T) {
	r := newPollRig(t, sampleservice.Options{Key: "the-right-key-3c2b1a", Locations: 5}, "a-revoked-key-9f8e7d")
	r.poll(t)
	body := `{"detail":"Invalid token."}`
	for ep, cells := range rows(r.section(t, 1)) {
		row := strings.Join(cells, "\n")
		for _, want := range []string{
			fmt.Sprintf("failed: %s GET %s", ep, r.name), fmt.Sprintf("-> status 401, %d bytes, ", len(body)),
			"http_status: unexpected status Unauthorized\n", "    Content-Type: application/json\n    WWW-Authenticate: Token\n    Body: \"Invalid token.\"",
		} {
			if !strings.Contains(row, want) {
				t.Errorf("%s: row lacks %q:\n%s", ep, want, row)
			}
		}
	}
	if p := r.section(t, 1).all(func(n *node) bool { return n.name == "p" && n.hasClass("bad") }); len(p) != 1 || !strings.HasPrefix(p[0].Text(), "The service refused the exporter's key") {
		t.Errorf("the target's page does not say plainly that the key was refused: %v", p)
	}
	text := r.text(t, 1)
	for _, ep := range []string{"root", "projects", "locations"} {
		want := fmt.Sprintf("-> status 401, %d bytes, ", len(body))
		if !strings.Contains(text, ep+" GET ") || !strings.Contains(text, want) {
			t.Errorf("text view lacks %s %q:\n%s", ep, want, text)
		}
	}
	if n := strings.Count(text, "    Content-Type: application/json\n    WWW-Authenticate: Token\n    Body: \"Invalid token.\"\n"); n != 3 || !strings.Contains(text, "failed: root, projects, locations http_status 401\n") {
		t.Errorf("text view shows the answer of %d requests, want 3:\n%s", n, text)
	}
}

// TestPollPageShowsRedactedAnswers has the service echo the key in an
// error body, redirect to a sign-in page with credentials in its URL, and
// name a next page on another origin.
func TestPollPageShowsRedactedAnswers(t *testing.T) {
	const key = "echoed-secret-key-5a6b7c"
	r := newPollRig(t, sampleservice.Options{Key: key, Locations: 20, PageSize: 5, OmitCount: true}, key)
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 500, Body: `{"detail":"Token ` + key + ` broke the server."}`})
	r.svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{RedirectTo: "https://user:pw@sso.example.com/login?next=%2Fapi%2F&token=" + key})
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{NextURL: "http://10.0.0.5:8000/api/projects/locations/?page=2"})
	r.poll(t)
	doc := r.section(t, 1)
	got := rows(doc)
	for ep, want := range map[string]string{
		"root":      "Token <secret> broke the server.",
		"projects":  "Location: https://sso.example.com/login?next=%2Fapi%2F&token=REDACTED",
		"locations": "walk stopped: locations: pagination (HTTP 200): next link after page 1 points to http://10.0.0.5:8000, another origin than " + r.srv.URL,
	} {
		if row := strings.Join(got[ep], "\n"); !strings.Contains(row, want) {
			t.Errorf("%s: target's page lacks %q:\n%s", ep, want, row)
		}
	}
	text := r.text(t, 1)
	for _, want := range []string{
		`    Body: "Token <secret> broke the server."`,
		"    Location: https://sso.example.com/login?next=%2Fapi%2F&token=REDACTED\n",
		"points to http://10.0.0.5:8000, another origin than",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text view lacks %q:\n%s", want, text)
		}
	}
	for where, s := range map[string]string{"target's page": doc.Text(), "text view": text} {
		if strings.Contains(s, key) || strings.Contains(s, "user:pw") {
			t.Errorf("the %s shows a credential", where)
		}
	}
}

// TestHeldOffPollLinksToThePollThatMetThe429: the poll that met a 429
// shows Retry-After and the hold-off's end; the next poll, which sends
// nothing, shows that end and links to it.
func TestHeldOffPollLinksToThePollThatMetThe429(t *testing.T) {
	r := newPollRig(t, sampleservice.Options{Key: "k-1234567890", Locations: 5}, "k-1234567890")
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{
		Status: 429, RetryAfter: "120", Body: `{"detail":"Request was throttled. Expected available in 120 seconds."}`,
	})
	r.poll(t)
	r.poll(t)
	until, status := r.client.HoldOff()
	if status != 429 || until.IsZero() {
		t.Fatalf("no hold-off in force: %v %d", until, status)
	}
	held := fmt.Sprintf(`held off until %s UTC after a 429 with Retry-After "120"`, until.UTC().Format("2006-01-02 15:04:05"))
	first := r.section(t, 1)
	if row := strings.Join(rows(first)["locations"], "\n"); !strings.Contains(row, "Retry-After: 120\n    Held off until: ") ||
		!strings.Contains(row, "Request was throttled. Expected available in 120 seconds.") {
		t.Errorf("the poll that met the 429 does not show it:\n%s", row)
	}
	if result := first.all(func(n *node) bool { return n.hasClass("result") }); len(result) != 1 || !strings.HasSuffix(result[0].Text(), "; "+held) {
		t.Errorf("the poll that met the 429 does not quote the Retry-After it obeys: %v", result)
	}
	second := r.section(t, 2)
	if result := second.all(func(n *node) bool { return n.hasClass("result") }); len(result) != 1 || result[0].Text() != "sent nothing: "+held {
		t.Errorf("the held-off poll's result %v\nwant %q", result, "sent nothing: "+held)
	}
	notes := second.all(func(n *node) bool { return n.hasClass("holdoff") })
	if len(notes) != 1 || notes[0].Text() != "Poll 1 met the answer that started the hold-off." {
		t.Fatalf("the held-off poll's page has hold-off notes %v:\n%s", notes, second.Text())
	}
	if links := notes[0].all(func(n *node) bool { return n.name == "a" }); len(links) != 1 || links[0].attrs["href"] != "polls/1" {
		t.Errorf("hold-off note links %v, want one to poll 1's text", links)
	}
	if len(rows(second)) != 0 {
		t.Error("the held-off poll's page shows requests")
	}
	if text := r.text(t, 2); !strings.Contains(text, ": sent nothing: "+held+"\nPoll 1 met the answer that started the hold-off: /polls/1\n") {
		t.Errorf("text view:\n%s", text)
	}
}

// TestTargetPageKeepsTheEvidence: a target's page shows its latest poll,
// its first failing poll and the poll that met the 429 starting its
// hold-off, however many polls of other targets came since, and opening
// it sends nothing to the service.
func TestTargetPageKeepsTheEvidence(t *testing.T) {
	r := newPollRig(t, sampleservice.Options{Key: "k-1234567890", Locations: 5}, "k-1234567890")
	r.svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 500})
	r.poll(t) // 1: the first failing poll
	r.svc.ClearFaults()
	r.svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{Status: 429, RetryAfter: "120"})
	r.poll(t) // 2: meets the 429
	r.poll(t) // 3: sends nothing
	for i := range 500 {
		r.pages.recent.Add(&collector.PollRecord{Target: fmt.Sprintf("https://other%d.example.com", i%5), Module: "default", State: "ok", Summary: "ok"})
	}
	sent := r.svc.TotalRequests()
	doc := render(t, r.pages, "/target?target="+url.QueryEscape(r.name))
	if n := r.svc.TotalRequests(); n != sent {
		t.Errorf("opening the target's page sent %d requests to the service", n-sent)
	}
	var titles []string
	for _, h := range doc.all(func(n *node) bool { return n.name == "h2" }) {
		titles = append(titles, h.Text())
	}
	if want := "Latest poll: poll 3|First failing poll: poll 1|The poll that started the hold-off: poll 2"; strings.Join(titles, "|") != want {
		t.Errorf("the target's page shows\n%s\nwant\n%s", strings.Join(titles, "|"), want)
	}
	got := rows(doc)
	for ep, want := range map[string]string{"root": "-> status 500", "locations": "-> status 429"} {
		if row := strings.Join(got[ep], "\n"); !strings.Contains(row, want) {
			t.Errorf("%s: the target's page lacks %q:\n%s", ep, want, row)
		}
	}
	if doc.all(func(n *node) bool { return n.name == "meta" && n.attrs["name"] == "viewport" }) == nil {
		t.Error("the target's page has no viewport for phones")
	}
	if held := doc.all(func(n *node) bool { return n.attrs["id"] == "heldoff" }); len(held) != 1 {
		t.Errorf("the target's page does not say until when it holds off:\n%s", doc.Text())
	}
}

// TestPageShowsRequestsNotSent: detail views that a hold-off kept from
// being sent read "not sent", with the hold-off's status and end, and no
// bytes, duration or empty reason.
func TestPageShowsRequestsNotSent(t *testing.T) {
	r := newPollRig(t, sampleservice.Options{Key: "k-1234567890", Locations: 5}, "k-1234567890", 1, 2, 3)
	r.svc.SetDetailFault(1, sampleservice.Fault{Status: 429, RetryAfter: "120"})
	r.poll(t)
	until, _ := r.client.HoldOff()
	want := fmt.Sprintf(`/ -> not sent: held off until %s UTC after a 429 with Retry-After "120"`, until.UTC().Format("2006-01-02 15:04:05"))
	details := rows(r.section(t, 1))["location_detail"]
	if len(details) != 3 || !strings.Contains(details[0], "-> status 429") {
		t.Fatalf("detail rows:\n%s", strings.Join(details, "\n"))
	}
	for _, row := range details[1:] {
		if !strings.HasPrefix(row, "notsent: ") || !strings.HasSuffix(row, want) || strings.Contains(row, "bytes") {
			t.Errorf("a detail view not sent reads\n%s\nwant it to end with\n%s", row, want)
		}
	}
}

// TestPageSaysNoResponse: a request that got no answer reads "no
// response", not status 0.
func TestPageSaysNoResponse(t *testing.T) {
	r := newPollRig(t, sampleservice.Options{Key: "k-1234567890", Locations: 5}, "k-1234567890")
	r.srv.Close()
	r.poll(t)
	for ep, cells := range rows(r.section(t, 1)) {
		if row := strings.Join(cells, "\n"); !strings.Contains(row, "-> no response, ") || !strings.Contains(row, "network: ") || strings.Contains(row, "status 0") {
			t.Errorf("%s: %s", ep, row)
		}
	}
}
