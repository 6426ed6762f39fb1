package main

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
)

// checkHTML parses page with a strict XML parser that knows HTML's
// entities: every element must be closed and properly nested, every
// attribute quoted. The templates write void elements as <meta/>, which
// HTML5 accepts, so this check holds them to the stricter standard.
func checkHTML(t *testing.T, page string) string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	var text strings.Builder
	var stack []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("page is not well-formed HTML: %v\n%s", err, page)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
			if tok.Name.Local == "script" || tok.Name.Local == "link" {
				t.Errorf("page loads %s: it must carry no scripts or external assets", tok.Name.Local)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			text.Write(tok)
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed elements %v", stack)
	}
	return text.String()
}

func testPages(t *testing.T) (*pages, *collector.PollLog) {
	t.Helper()
	log := collector.NewPollLog(10)
	log.Add(&collector.PollRecord{
		Start: time.Unix(1700000000, 0), Duration: 42 * time.Millisecond,
		Target: "https://deploy.example.com/<b>x</b>", Module: "prod&staging", Summary: "failed: locations http_status 500",
		Requests: []client.TraceRequest{
			{Endpoint: client.EndpointLocations, Method: "GET", URL: "https://deploy.example.com/api/projects/locations/?page=2&token=REDACTED", Status: 500, Bytes: 12, Reason: client.ReasonHTTPStatus, Error: "unexpected status <Internal Server Error>", Page: 2},
			{Endpoint: client.EndpointLocations, Page: 2, Note: "walk stopped"},
		},
	})
	return &pages{
		metricsPath: "/metrics", singleTarget: "https://deploy.example.com",
		modules: func() []string { return []string{"default", "staging"} },
		recent:  log, logger: promslog.NewNopLogger(),
	}, log
}

func TestLandingPage(t *testing.T) {
	p, _ := testPages(t)
	rec := httptest.NewRecorder()
	p.landing(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("landing page: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	page := rec.Body.String()
	text := checkHTML(t, page)
	for _, want := range []string{"Recent polls", "https://deploy.example.com/<b>x</b>", "prod&staging", "failed: locations http_status 500", "42ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("landing page text lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>x</b>") {
		t.Error("a target was not escaped")
	}
	if !strings.Contains(page, `href="polls/1"`) || !strings.Contains(page, `name="viewport"`) {
		t.Error("landing page lacks the poll link or the viewport for phones")
	}
	rec = httptest.NewRecorder()
	p.landing(rec, httptest.NewRequest(http.MethodGet, "/nothing-here", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("unknown path answered %d", rec.Code)
	}
}

func TestPollPage(t *testing.T) {
	p, _ := testPages(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /polls/{id}", p.poll)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	rec := get("/polls/1")
	if rec.Code != http.StatusOK {
		t.Fatalf("poll page: %d", rec.Code)
	}
	text := checkHTML(t, rec.Body.String())
	for _, want := range []string{"Poll 1", "?page=2&token=REDACTED", "unexpected status <Internal Server Error>", "walk stopped", "500"} {
		if !strings.Contains(text, want) {
			t.Errorf("poll page text lacks %q", want)
		}
	}
	if txt := get("/polls/1?format=text"); !strings.Contains(txt.Body.String(), "locations GET https://deploy.example.com/api/projects/locations/?page=2&token=REDACTED -> status 500") {
		t.Errorf("text view:\n%s", txt.Body.String())
	}
	if rec := get("/polls/99"); rec.Code != http.StatusNotFound {
		t.Errorf("unknown poll answered %d", rec.Code)
	}
	if rec := get("/polls/x"); rec.Code != http.StatusBadRequest {
		t.Errorf("bad poll id answered %d", rec.Code)
	}
}
