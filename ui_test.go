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
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/common/promslog"

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

func testPages(t *testing.T) (*pages, *collector.PollLog) {
	t.Helper()
	log := collector.NewPollLog()
	log.Add(&collector.PollRecord{
		Start: time.Unix(1700000000, 0), Duration: 42 * time.Millisecond,
		Target: "https://deploy.example.com/<b>x</b>", Module: "prod&staging", State: "failed", Summary: "failed: locations http_status 500",
		Rows: []collector.Row{
			{State: "failed", Text: "locations GET https://deploy.example.com/api/projects/locations/?page=2&token=REDACTED -> status 500, 12 bytes, 0s, http_status: unexpected status <Internal Server Error>"},
			{State: "ok", Text: "root GET https://deploy.example.com/api/ -> status 200, 2 bytes, 0s"},
		},
	})
	return &pages{
		metricsPath: "/metrics", singleTarget: "https://deploy.example.com",
		modules: func() []string { return []string{"default", "staging"} },
		recent:  log, logger: promslog.NewNopLogger(),
	}, log
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
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(rec.Body.String(), `name="viewport"`) {
		t.Errorf("%s: %s without a viewport for phones", path, rec.Header().Get("Content-Type"))
	}
	return parseHTML(t, rec.Body.String())
}

// TestPagesShowThePoll renders the landing page and the target's page:
// each escapes what the service sent, links where it should, and shows the
// failing row before the healthy one; /polls/<id> is the poll's text.
func TestPagesShowThePoll(t *testing.T) {
	p, _ := testPages(t)
	target := "/target?module=prod%26staging&target=https%3A%2F%2Fdeploy.example.com%2F%3Cb%3Ex%3C%2Fb%3E"
	for _, tc := range []struct {
		path  string
		want  []string
		links []string
	}{
		{"/", []string{"https://deploy.example.com/<b>x</b>", "prod&staging", "failed: locations http_status 500"}, []string{target[1:], target[1:] + "#poll-1"}},
		{target, []string{"Latest poll, first failing poll: poll 1", "took 42ms", "?page=2&token=REDACTED", "<Internal Server Error>"}, []string{"polls/1"}},
	} {
		doc := render(t, p, tc.path)
		text := doc.Text()
		for _, want := range tc.want {
			if !strings.Contains(text, want) {
				t.Errorf("%s: text lacks %q", tc.path, want)
			}
		}
		var links []string
		for _, a := range doc.all(func(n *node) bool { return n.name == "a" }) {
			links = append(links, a.attrs["href"])
		}
		for _, want := range tc.links {
			if !slices.Contains(links, want) {
				t.Errorf("%s: links %q lack %q", tc.path, links, want)
			}
		}
		if rows := doc.all(func(n *node) bool { return n.name == "pre" }); tc.path != "/" && (len(rows) != 2 || !rows[0].hasClass("failed") || !rows[1].hasClass("ok")) {
			t.Errorf("%s: rows %v, want the failing one first", tc.path, rows)
		}
	}
	var rec *httptest.ResponseRecorder
	mux := http.NewServeMux()
	mux.HandleFunc("GET /polls/{id}", p.poll)
	mux.HandleFunc("GET /{$}", p.landing) // as routes serves it
	for path, code := range map[string]int{"/nothing-here": 404, "/polls/99": 404, "/polls/x": 404} {
		rec = httptest.NewRecorder()
		if mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil)); rec.Code != code {
			t.Errorf("%s answered %d, want %d", path, rec.Code, code)
		}
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/polls/1", nil))
	if rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(rec.Body.String(), "\nlocations GET https://deploy.example.com/api/projects/locations/?page=2&token=REDACTED -> status 500") {
		t.Errorf("text view:\n%s", rec.Body.String())
	}
}

// TestStatesAreNeverGreenWithFailures: each state has a class and colour of
// its own, and a failing target is never shown as ok.
func TestStatesAreNeverGreenWithFailures(t *testing.T) {
	log := collector.NewPollLog()
	for _, state := range []string{"ok", "partial", "failed"} {
		log.Add(&collector.PollRecord{Target: "https://" + state + ".example.com", State: state, Summary: state + ": x"})
	}
	p := &pages{metricsPath: "/metrics", modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
	cells := render(t, p, "/").all(byLabel("State"))
	var got []string
	for _, c := range cells {
		got = append(got, c.attrs["class"]+"="+c.Text())
	}
	if want := "failed=down partial=up, some details failing ok=up"; strings.Join(got, " ") != want {
		t.Errorf("state cells %q, want %q: the worst first, each with its class", strings.Join(got, " "), want)
	}
	for _, rule := range []string{".ok{color:#1a7f37}", ".partial,.slow{color:#9a6700}", ".failed,.bad{color:#cf222e}"} {
		if !strings.Contains(pagesHTML, rule) {
			t.Errorf("the page style lacks %s: each state needs a colour of its own", rule)
		}
	}
	for _, want := range []string{"partial", "failed"} {
		page := "/target?target=https%3A%2F%2F" + want + ".example.com"
		result := render(t, p, page).all(func(n *node) bool { return n.hasClass("result") })
		if len(result) != 1 || !result[0].hasClass(want) {
			t.Errorf("%s: result %v, want class %s", page, result, want)
		}
	}
}

func byLabel(label string) func(*node) bool {
	return func(n *node) bool { return n.name == "td" && n.attrs["data-label"] == label }
}

func TestTargetsTable(t *testing.T) {
	// In the bubble the clock stands still, so the ages are exact.
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		log := collector.NewPollLog()
		add := func(target, module string, ago time.Duration, state, summary string, edit func(*collector.PollRecord)) {
			r := &collector.PollRecord{Target: target, Module: module, Start: now.Add(-ago), State: state, Summary: summary}
			if edit != nil {
				edit(r)
			}
			log.Add(r)
		}
		counts := func(r *collector.PollRecord) {
			r.Projects, r.Locations = collector.Count{Value: 5, Known: true}, collector.Count{Value: 300, Known: true}
		}
		add("https://probe.example.com", "default", 2*time.Hour, "failed", "failed: root, projects, locations http_status 401", nil)
		add("https://probe.example.com", "default", time.Hour, "failed", "failed: root, projects, locations network (connection refused)", nil)
		add("https://deploy.example.com", "", 12*time.Second, "ok", "ok", counts)
		add("https://busy.example.com", "staging", 90*time.Second, "failed", "sent nothing: held off", func(r *collector.PollRecord) {
			r.HeldOffUntil = now.Add(4 * time.Minute)
		})
		add("https://probe.example.com", "default", 3*time.Second, "partial", "partial: location_detail 7 (1 of 2) http_status 404", counts)
		add("https://slow.example.com", "default", 5*time.Second, "slow", "slow: root 2.5s", counts)
		p := &pages{metricsPath: "/metrics", modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
		tables := render(t, p, "/").all(func(n *node) bool { return n.attrs["id"] == "targets" })
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
			"failed: Target=https://busy.example.com | Module=staging | State=down | Projects=— | Locations=— | Last poll=1m30s ago | " +
				"Failing since=" + at(-90*time.Second) + " UTC (1m30s ago), poll 4: sent nothing: held off | Held off until=" + at(4*time.Minute) + " UTC (4m0s from now)",
			"partial: Target=https://probe.example.com | Module=default | State=up, some details failing | Projects=5 | Locations=300 | Last poll=3s ago | " +
				"Failing since=" + at(-2*time.Hour) + " UTC (2h0m0s ago), poll 1: failed: root, projects, locations http_status 401 | Held off until=—",
			"slow: Target=https://slow.example.com | Module=default | State=up, slow: root 2.5s | Projects=5 | Locations=300 | Last poll=5s ago | Failing since=— | Held off until=—",
			"ok: Target=https://deploy.example.com | Module=— (/metrics) | State=up | Projects=5 | Locations=300 | Last poll=12s ago | Failing since=— | Held off until=—",
		}
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			t.Errorf("targets table:\n%s\nwant the failing first\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
		var links []string
		for _, a := range tables[0].all(func(n *node) bool { return n.name == "a" }) {
			links = append(links, a.attrs["href"])
		}
		busy, probe := "target?module=staging&target=https%3A%2F%2Fbusy.example.com", "target?module=default&target=https%3A%2F%2Fprobe.example.com"
		slow, metrics := "target?module=default&target=https%3A%2F%2Fslow.example.com", "target?target=https%3A%2F%2Fdeploy.example.com"
		if want := busy + " " + busy + "#poll-4 " + busy + "#poll-4 " + probe + " " + probe + "#poll-5 " + probe + "#poll-1 " +
			slow + " " + slow + "#poll-6 " + metrics + " " + metrics + "#poll-3"; strings.Join(links, " ") != want {
			t.Errorf("targets table links\n%s\nwant each target's page, its last poll and its first failing one\n%s", strings.Join(links, " "), want)
		}
	})
}

// TestMetricsTargetIsCalledByItsURL: the service behind /metrics is named
// by its URL on its page and in its text view, never "module (flags)".
func TestMetricsTargetIsCalledByItsURL(t *testing.T) {
	log := collector.NewPollLog()
	log.Add(&collector.PollRecord{Target: "https://deploy.example.com", State: "ok", Summary: "ok"})
	p := &pages{modules: func() []string { return nil }, recent: log, logger: promslog.NewNopLogger()}
	h1 := render(t, p, "/target?target=https%3A%2F%2Fdeploy.example.com").all(func(n *node) bool { return n.name == "h1" })
	var text strings.Builder
	rec, _ := log.Get(1)
	_ = rec.WriteText(&text)
	if len(h1) != 1 || h1[0].Text() != "Target https://deploy.example.com" || strings.Contains(text.String(), "flags") {
		t.Errorf("the /metrics target is called %v on its page and\n%s", h1, text.String())
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
		p := &pages{modules: func() []string { return tc.modules }, recent: collector.NewPollLog(), logger: promslog.NewNopLogger()}
		options := render(t, p, "/").all(func(n *node) bool { return n.name == "option" })
		selected := slices.DeleteFunc(slices.Clone(options), func(n *node) bool { return n.attrs["selected"] == "" })
		if len(selected) == 0 { // a browser shows the first option
			selected = options[:1]
		}
		if len(selected) != 1 || selected[0].Text() != tc.want {
			t.Errorf("modules %v: selected %v, want only %s", tc.modules, selected, tc.want)
		}
	}
}

// TestPagesFitAPhone checks the markup the narrow-screen style needs: every
// cell carries its column's name, rows of requests wrap, and nothing
// scrolls sideways. The browser check in test/browser measures the result.
func TestPagesFitAPhone(t *testing.T) {
	p, _ := testPages(t)
	for _, path := range []string{"/", "/target?module=prod%26staging&target=https%3A%2F%2Fdeploy.example.com%2F%3Cb%3Ex%3C%2Fb%3E"} {
		doc := render(t, p, path)
		for _, table := range doc.all(func(n *node) bool { return n.name == "table" }) {
			if !table.hasClass("stack") {
				t.Errorf("%s: a table does not stack on narrow screens", path)
			}
			for _, td := range table.all(func(n *node) bool { return n.name == "td" }) {
				if td.attrs["data-label"] == "" {
					t.Errorf("%s: cell %q has no data-label", path, td.Text())
				}
			}
		}
	}
	for _, rule := range []string{"@media (max-width:48rem)", "content:attr(data-label)", "pre{white-space:pre-wrap;overflow-wrap:anywhere"} {
		if !strings.Contains(pagesHTML, rule) {
			t.Errorf("the page style lacks %s", rule)
		}
	}
}

// hangUp is a client that left: every write fails as a closed connection does.
type hangUp struct{ *httptest.ResponseRecorder }

func (hangUp) Write([]byte) (int, error) { return 0, fmt.Errorf("write tcp: %w", syscall.EPIPE) }

// TestClientHangingUpIsNoError: a client that hangs up while a page is
// sent (curl | head) is logged at debug at most.
func TestClientHangingUpIsNoError(t *testing.T) {
	p, _ := testPages(t)
	var logs strings.Builder
	level := promslog.NewLevel()
	_ = level.Set("debug")
	p.logger = promslog.New(&promslog.Config{Level: level, Writer: &logs})
	p.landing(hangUp{httptest.NewRecorder()}, httptest.NewRequest(http.MethodGet, "/", nil))
	if !strings.Contains(logs.String(), "level=DEBUG") || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a client hanging up is logged as:\n%s", logs.String())
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
		{"GET", "/polls/99", 404}, {"GET", "/polls/x", 404},
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
