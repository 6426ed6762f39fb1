package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// node is an element of a page, or a piece of text (name "#text"), as the
// strict parser saw it.
type node struct {
	name     string
	attrs    map[string]string
	children []*node
	text     string
}

// Text returns the text of n and everything inside it, in page order.
func (n *node) Text() string {
	if n.name == "#text" {
		return n.text
	}
	var b strings.Builder
	for _, c := range n.children {
		b.WriteString(c.Text())
	}
	return b.String()
}

// all returns n and every element inside it for which keep says yes.
func (n *node) all(keep func(*node) bool) []*node {
	var out []*node
	if keep(n) {
		out = append(out, n)
	}
	for _, c := range n.children {
		out = append(out, c.all(keep)...)
	}
	return out
}

func (n *node) hasClass(class string) bool {
	return slices.Contains(strings.Fields(n.attrs["class"]), class)
}

// parseHTML parses page with a strict XML parser that knows HTML's
// entities: every element must be closed and properly nested, every
// attribute quoted. The templates write void elements as <meta/>, which
// HTML5 accepts, so this check holds them to the stricter standard.
func parseHTML(t *testing.T, page string) *node {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	root := &node{name: "#document"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("page is not well-formed HTML: %v\n%s", err, page)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			top.children = append(top.children, n)
			stack = append(stack, n)
			if n.name == "script" || n.name == "link" {
				t.Errorf("page loads %s: it must carry no scripts or external assets", n.name)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.children = append(top.children, &node{name: "#text", text: string(tok)})
		}
	}
	if len(stack) != 1 {
		t.Errorf("unclosed elements %d", len(stack)-1)
	}
	return root
}

// checkHTML parses page strictly and returns its text.
func checkHTML(t *testing.T, page string) string {
	t.Helper()
	return parseHTML(t, page).Text()
}

func testPages(t *testing.T) (*pages, *collector.PollLog) {
	t.Helper()
	log := collector.NewPollLog(10)
	log.Add(&collector.PollRecord{
		Start: time.Unix(1700000000, 0), Duration: 42 * time.Millisecond,
		Target: "https://deploy.example.com/<b>x</b>", Module: "prod&staging", State: collector.PollFailed, Summary: "failed: locations http_status 500",
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", p.landing) // as routes serves it
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nothing-here", nil))
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

// render serves path through the page handlers and parses the answer.
func render(t *testing.T, p *pages, path string) *node {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /polls/{id}", p.poll)
	mux.HandleFunc("GET /target", p.target)
	mux.HandleFunc("GET /{$}", p.landing)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s answered %d", path, rec.Code)
	}
	return parseHTML(t, rec.Body.String())
}

func byLabel(label string) func(*node) bool {
	return func(n *node) bool { return n.name == "td" && n.attrs["data-label"] == label }
}

func TestResultsAreNeverGreenWithFailures(t *testing.T) {
	log := collector.NewPollLog(10)
	for _, r := range []struct {
		state   collector.PollState
		summary string
	}{
		{collector.PollOK, "ok"},
		{collector.PollPartial, "partial: location_detail (1 of 5) http_status 404"},
		{collector.PollFailed, "failed: root, projects, locations http_status 401"},
	} {
		log.Add(&collector.PollRecord{Target: "https://" + r.state.String() + ".example.com", State: r.state, Summary: r.summary})
	}
	p := &pages{metricsPath: "/metrics", modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
	cells := render(t, p, "/").all(byLabel("Result"))
	if len(cells) != 3 {
		t.Fatalf("%d result cells, want 3", len(cells))
	}
	for _, c := range cells {
		state, _, _ := strings.Cut(c.Text(), ":")
		if !c.hasClass(state) || (state != "ok" && c.hasClass("ok")) {
			t.Errorf("result %q has classes %q, want %q and not ok", c.Text(), c.attrs["class"], state)
		}
	}
	css := pagesHTML
	for _, rule := range []string{".ok{color:#1a7f37}", ".partial,.slow{color:#9a6700}", ".failed,.bad{color:#cf222e}"} {
		if !strings.Contains(css, rule) {
			t.Errorf("the page style lacks %s: each state needs a colour of its own", rule)
		}
	}
	for id, want := range map[uint64]string{2: "partial", 3: "failed"} {
		result := render(t, p, fmt.Sprintf("/polls/%d", id)).all(func(n *node) bool { return n.hasClass("result") })
		if len(result) != 1 || !result[0].hasClass(want) {
			t.Errorf("poll %d: result %v, want class %s", id, result, want)
		}
	}
}

func TestTargetsTable(t *testing.T) {
	// In the bubble the clock stands still, so the ages are exact.
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		log := collector.NewPollLog(3)
		add := func(target, module string, ago time.Duration, state collector.PollState, summary string, edit func(*collector.PollRecord)) {
			r := &collector.PollRecord{Target: target, Module: module, Start: now.Add(-ago), State: state, Summary: summary}
			if edit != nil {
				edit(r)
			}
			log.Add(r)
		}
		counts := func(r *collector.PollRecord) {
			r.Projects, r.Locations = collector.Count{Value: 5, Known: true}, collector.Count{Value: 300, Known: true}
		}
		add("https://probe.example.com", "default", 2*time.Hour, collector.PollFailed, "failed: root, projects, locations http_status 401", nil)
		add("https://probe.example.com", "default", time.Hour, collector.PollFailed, "failed: root, projects, locations network", nil)
		add("https://deploy.example.com", "", 12*time.Second, collector.PollOK, "ok", counts)
		add("https://busy.example.com", "staging", 90*time.Second, collector.PollFailed, "failed: root, projects, locations held off 429", func(r *collector.PollRecord) {
			r.HeldOff, r.HeldOffUntil = true, now.Add(4*time.Minute)
		})
		add("https://probe.example.com", "default", 3*time.Second, collector.PollPartial, "partial: location_detail (1 of 2) http_status 404", counts)
		add("https://slow.example.com", "default", 5*time.Second, collector.PollSlow, "slow: root 2.5s", counts)
		p := &pages{metricsPath: "/metrics", modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
		doc := render(t, p, "/")
		tables := doc.all(func(n *node) bool { return n.attrs["id"] == "targets" })
		if len(tables) != 1 {
			t.Fatal("the landing page has no targets table")
		}
		var rows []string
		for _, tr := range tables[0].all(func(n *node) bool { return n.name == "tr" && n.attrs["class"] != "" }) {
			var cells []string
			for _, td := range tr.all(func(n *node) bool { return n.name == "td" }) {
				cells = append(cells, td.attrs["data-label"]+"="+strings.Join(strings.Fields(td.Text()), " "))
			}
			rows = append(rows, tr.attrs["class"]+": "+strings.Join(cells, " | "))
		}
		at := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02 15:04:05") }
		want := []string{
			"ok: Target=https://deploy.example.com | Module=(flags) | State=up | Projects=5 | Locations=300 | Last poll=12s ago | Failing since=— | Held off until=—",
			"failed: Target=https://busy.example.com | Module=staging | State=down | Projects=— | Locations=— | Last poll=1m30s ago | " +
				"Failing since=" + at(-90*time.Second) + " UTC (1m30s ago), poll 4: failed: root, projects, locations held off 429 | Held off until=" + at(4*time.Minute) + " UTC (4m0s from now)",
			"partial: Target=https://probe.example.com | Module=default | State=up, some details failing | Projects=5 | Locations=300 | Last poll=3s ago | " +
				"Failing since=" + at(-2*time.Hour) + " UTC (2h0m0s ago), poll 1: failed: root, projects, locations http_status 401 | Held off until=—",
			"slow: Target=https://slow.example.com | Module=default | State=up, slow: root 2.5s | Projects=5 | Locations=300 | Last poll=5s ago | Failing since=— | Held off until=—",
		}
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			t.Errorf("targets table:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
		var links []string
		for _, a := range tables[0].all(func(n *node) bool { return n.name == "a" }) {
			links = append(links, a.attrs["href"])
		}
		if want := "target?target=https%3A%2F%2Fdeploy.example.com polls/3 " +
			"target?module=staging&target=https%3A%2F%2Fbusy.example.com polls/4 polls/4 " +
			"target?module=default&target=https%3A%2F%2Fprobe.example.com polls/5 polls/1 " +
			"target?module=default&target=https%3A%2F%2Fslow.example.com polls/6"; strings.Join(links, " ") != want {
			t.Errorf("targets table links\n%s\nwant each target's page, its last poll and its first failing one\n%s", strings.Join(links, " "), want)
		}
		// The targets come before the recent polls: they are what an
		// operator opens the page for.
		text := doc.Text()
		if strings.Index(text, "Targets") > strings.Index(text, "Recent polls") {
			t.Error("the targets table is not above the recent polls")
		}
	})
}

func TestTargetHeldOffWithoutAKnownEnd(t *testing.T) {
	log := collector.NewPollLog(3)
	log.Add(&collector.PollRecord{Target: "t", State: collector.PollFailed, Summary: "failed: root, projects, locations held off 429", HeldOff: true})
	p := &pages{modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
	cells := render(t, p, "/").all(byLabel("Held off until"))
	if len(cells) != 1 || cells[0].Text() != "held off (end not known)" {
		t.Errorf("held-off cell %v", cells)
	}
}

func TestProbeFormPreselectsTheDefaultModule(t *testing.T) {
	for _, tc := range []struct {
		modules []string
		want    string
	}{
		{[]string{"alpha", "default", "zeta"}, "default"},
		{[]string{"alpha", "beta"}, "alpha"},
	} {
		p := &pages{modules: func() []string { return tc.modules }, recent: collector.NewPollLog(1), logger: promslog.NewNopLogger()}
		selected := render(t, p, "/").all(func(n *node) bool { return n.name == "option" && n.attrs["selected"] != "" })
		if len(selected) != 1 || selected[0].Text() != tc.want {
			t.Errorf("modules %v: selected %v, want only %s", tc.modules, selected, tc.want)
		}
	}
}

// TestTablesStackOnPhones checks the markup the narrow-screen style needs:
// every cell carries its column's name, and no table hides in a sideways
// scrolling box. The browser check in test/browser measures the result.
func TestTablesStackOnPhones(t *testing.T) {
	p, _ := testPages(t)
	for _, path := range []string{"/", "/polls/1", "/target?module=prod%26staging&target=https%3A%2F%2Fdeploy.example.com%2F%3Cb%3Ex%3C%2Fb%3E"} {
		doc := render(t, p, path)
		tables := doc.all(func(n *node) bool { return n.name == "table" })
		if len(tables) == 0 {
			t.Fatalf("%s has no table", path)
		}
		for _, table := range tables {
			if !table.hasClass("stack") {
				t.Errorf("%s: a table does not stack on narrow screens", path)
			}
			for _, td := range table.all(func(n *node) bool { return n.name == "td" }) {
				if td.attrs["data-label"] == "" {
					t.Errorf("%s: cell %q has no data-label", path, td.Text())
				}
			}
		}
		if boxes := doc.all(func(n *node) bool { return n.hasClass("scroll") }); len(boxes) > 0 {
			t.Errorf("%s: a table scrolls sideways inside the page", path)
		}
	}
	if !strings.Contains(pagesHTML, "@media (max-width:48rem)") || !strings.Contains(pagesHTML, "content:attr(data-label)") {
		t.Error("the page style has no narrow-screen layout")
	}
}

func TestPollPageShowsTheAnswer(t *testing.T) {
	log := collector.NewPollLog(3)
	until := time.Date(2026, 11, 22, 7, 0, 14, 0, time.UTC)
	log.Add(&collector.PollRecord{
		Target: "https://deploy.example.com", State: collector.PollFailed, Summary: "failed: root, projects, locations http_status 401",
		HeldOffUntil: until,
		Requests: []client.TraceRequest{
			{
				Endpoint: client.EndpointRoot, Method: "GET", URL: "https://deploy.example.com/api/", Status: 401, Bytes: 27,
				Reason: client.ReasonHTTPStatus, Error: "unexpected status Unauthorized",
				ContentType: "application/json", BodyExcerpt: `Invalid token. <script>alert(1)</script>`,
			},
			{
				Endpoint: client.EndpointProjects, Method: "GET", URL: "https://deploy.example.com/api/projects/projects/", Status: 302,
				Reason: client.ReasonNetwork, Error: "redirect refused", Location: "https://other.example.com/?token=REDACTED",
			},
			{
				Endpoint: client.EndpointLocations, Method: "GET", URL: "https://deploy.example.com/api/projects/locations/", Status: 429,
				Reason: client.ReasonHTTPStatus, Error: "unexpected status Too Many Requests", RetryAfter: "14", HoldOffUntil: until,
			},
			{Endpoint: client.EndpointLocations, Method: "GET", URL: "https://deploy.example.com/api/projects/locations/?page=2", Status: 200, Bytes: 10},
		},
	})
	p := &pages{modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
	answers := render(t, p, "/polls/1").all(byLabel("Answer"))
	if len(answers) != 4 {
		t.Fatalf("%d answer cells, want 4", len(answers))
	}
	for i, want := range []string{
		"http_status: unexpected status UnauthorizedContent-Type: application/jsonInvalid token. <script>alert(1)</script>",
		"network: redirect refusedLocation: https://other.example.com/?token=REDACTED",
		"http_status: unexpected status Too Many RequestsRetry-After: 14; held off until 2026-11-22 07:00:14 UTC",
		"",
	} {
		if got := answers[i].Text(); got != want {
			t.Errorf("answer %d: %q\nwant %q", i, got, want)
		}
	}
	if ex := answers[0].all(func(n *node) bool { return n.hasClass("excerpt") }); len(ex) != 1 || ex[0].name != "pre" {
		t.Error("the body excerpt is not set apart as preformatted text")
	}
	if text := render(t, p, "/polls/1").Text(); !strings.Contains(text, "no requests until 2026-11-22 07:00:14 UTC") {
		t.Errorf("the poll page does not say until when the service asked to hold off:\n%s", text)
	}
}

// TestBreakableURL: a URL may break after "/", "?" and "&" and before "#",
// nowhere else, and stays escaped.
func TestBreakableURL(t *testing.T) {
	got := string(breakableURL(`http://127.0.0.1:19060/deploy/api/?a=1&b="2"#x`))
	want := `http:/<wbr/>/<wbr/>127.0.0.1:19060/<wbr/>deploy/<wbr/>api/<wbr/>?<wbr/>a=1&amp;<wbr/>b=&#34;2&#34;<wbr/>#x`
	if got != want {
		t.Errorf("breakableURL:\n got %s\nwant %s", got, want)
	}
}

// TestSecurityHeaders asks every path of the exporter, answers and
// refusals alike: each says nosniff, and each HTML answer forbids script
// and framing.
func TestSecurityHeaders(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "headers-key", Locations: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	f := goodFlags()
	f.apiURL, f.key = svc.URL(), "headers-key"
	f.configFile = writeTestFile(t, t.TempDir(), "modules.yml", "modules:\n  default:\n    targets: [\""+svc.URL()+"\"]\n    http_client_config: {authorization: {type: Token, credentials: headers-key}}\n")
	exp, _ := serveInProcess(t, f)
	probe := "/probe?target=" + url.QueryEscape(svc.URL())
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 200}, {"GET", probe, 200}, {"GET", probe + "&debug=true", 200}, {"GET", "/probe", 400},
		{"GET", "/sd", 200}, {"POST", "/sd", 405}, {"GET", "/-/healthy", 200}, {"GET", "/-/ready", 200},
		{"GET", "/-/reload", 405}, {"POST", "/-/reload", 200}, {"GET", "/favicon.ico", 404},
		{"GET", "/", 200}, {"GET", "/polls/1", 200}, {"GET", "/polls/1?format=text", 200},
		{"GET", "/polls/99", 404}, {"GET", "/polls/x", 400},
		{"GET", "/target?target=" + url.QueryEscape(svc.URL()), 200}, {"GET", "/target?target=nothing", 404},
	} {
		req, _ := http.NewRequest(tc.method, exp.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != tc.code || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: %d, X-Content-Type-Options %q; want %d, nosniff", tc.method, tc.path, resp.StatusCode, h.Get("X-Content-Type-Options"), tc.code)
		}
		if strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			csp := h.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") ||
				!strings.Contains(csp, "frame-ancestors 'none'") || h.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s %s: Content-Security-Policy %q, X-Frame-Options %q", tc.method, tc.path, csp, h.Get("X-Frame-Options"))
			}
		}
	}
}

// TestSecurityHeadersKeepTheWebConfigs: headers that --web.config.file's
// http_server_config sets, before the exporter's handler runs, stay.
func TestSecurityHeadersKeepTheWebConfigs(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Frame-Options", "SAMEORIGIN")
	withSecurityHeaders(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if got := rec.Header().Get("X-Frame-Options"); got != "SAMEORIGIN" {
		t.Errorf("X-Frame-Options %q, want the web config's SAMEORIGIN", got)
	}
	if got := rec.Header().Get("Content-Security-Policy"); got == "" {
		t.Error("no Content-Security-Policy beside the web config's header")
	}
}
