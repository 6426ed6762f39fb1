package collector

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

func keySettings(key string) TargetSettings {
	return TargetSettings{
		Client: client.Config{HTTPClientConfig: config.HTTPClientConfig{
			Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(key)},
		}},
		DetailIDs:  []int64{1},
		InfoFields: []string{"id"},
		Timeout:    5 * time.Second,
	}
}

func staticLookup(modules map[string]TargetSettings) func(string) (ProbeModule, error) {
	return func(name string) (ProbeModule, error) {
		if name == "" {
			name = "default"
		}
		s, ok := modules[name]
		if !ok {
			return ProbeModule{}, fmt.Errorf("unknown module %q", name)
		}
		return ProbeModule{Settings: s, Version: name}, nil
	}
}

// leaveRoom fills h's cache but for room pairs, with pairs of a module "filler" used after any other.
func leaveRoom(t *testing.T, h *ProbeHandler, room int) {
	t.Helper()
	p, err := NewTargetPoller(mustTarget(t, closedURL(t)), TargetSettings{}, PollerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &probeEntry{module: &probeModule{}, poller: p, lastUsed: time.Now().Add(time.Hour)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range maxProbeTargets - room {
		h.pollers[targetKey{target: fmt.Sprint("http://filler", i), module: "filler"}] = e
	}
}

func probe(t *testing.T, h http.Handler, query string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/probe?"+query, nil))
	return rec.Code, rec.Body.String()
}

func TestProbeTwoServicesWithTheirOwnKeys(t *testing.T) {
	a := sampleservice.New(sampleservice.Options{Key: "key-of-service-a", Locations: 11})
	b := sampleservice.New(sampleservice.Options{Key: "key-of-service-b", Locations: 22, PageSize: 5, Prefix: "/deploy"})
	srvA, srvB := httptest.NewServer(a), httptest.NewServer(b)
	defer srvA.Close()
	defer srvB.Close()
	recent := NewPollLog()
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{
		"default": keySettings("key-of-service-a"),
		"b":       keySettings("key-of-service-b"),
	}), recent, promslog.NewNopLogger())

	code, bodyA := probe(t, h, "target="+url.QueryEscape(srvA.URL))
	if code != 200 || !strings.Contains(bodyA, "deployment_service_up 1") || !strings.Contains(bodyA, "deployment_service_locations 11") {
		t.Errorf("probe of A: %d\n%s", code, bodyA)
	}
	code, bodyB := probe(t, h, "module=b&target="+url.QueryEscape(srvB.URL+"/deploy"))
	if code != 200 || !strings.Contains(bodyB, "deployment_service_up 1") || !strings.Contains(bodyB, "deployment_service_locations 22") {
		t.Errorf("probe of B: %d\n%s", code, bodyB)
	}
	if a.SawWrongAuth() || b.SawWrongAuth() {
		t.Error("a service saw a key other than its own")
	}
	if a.TotalRequests() == 0 || b.TotalRequests() == 0 {
		t.Error("a service was not polled")
	}
	for _, tt := range []struct{ body, url string }{{bodyA, srvA.URL}, {bodyB, srvB.URL + "/deploy"}} {
		for _, internal := range []string{"go_", "process_", "promhttp_", "deployment_service_exporter_"} {
			if strings.Contains(tt.body, "\n"+internal) || strings.HasPrefix(tt.body, internal) {
				t.Errorf("probe answer carries exporter-internal %s* metrics", internal)
			}
		}
		// The poll counters of each target are its own: one poll each.
		for _, want := range []string{
			`deployment_service_polls_total 1`,
			`deployment_service_target_info{url="` + tt.url + `"} 1`,
		} {
			if !strings.Contains(tt.body, "\n"+want+"\n") {
				t.Errorf("probe answer lacks %s:\n%s", want, tt.body)
			}
		}
	}
	if n := len(latest(recent)); n != 2 {
		t.Errorf("recent polls hold %d polls, want 2", n)
	}

	// The wrong module for a service is reported, not hidden.
	_, cross := probe(t, h, "module=b&target="+url.QueryEscape(srvA.URL))
	if !strings.Contains(cross, `deployment_service_endpoint_status_code{endpoint="root"} 401`) {
		t.Errorf("a refused key is not reported:\n%s", cross)
	}
}

func TestUnchangedModuleKeepsItsPoller(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-1234", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "60"})
	// Every lookup returns a fresh but equal module, as a reload of an
	// unchanged file does.
	h := NewProbeHandler(func(string) (ProbeModule, error) {
		s := keySettings("k-1234")
		return ProbeModule{Settings: s, Version: &s}, nil
	}, nil, nil)
	probe(t, h, "target="+url.QueryEscape(srv.URL))
	sent := svc.TotalRequests()
	_, body := probe(t, h, "target="+url.QueryEscape(srv.URL))
	if n := svc.TotalRequests(); n != sent {
		t.Errorf("%d requests sent: the reload dropped the hold-off", n-sent)
	}
	if !strings.Contains(body, `deployment_service_endpoint_status_code{endpoint="projects"} 429`) {
		t.Errorf("the hold-off is not reported:\n%s", body)
	}
}

func TestProbeRefusesBadRequests(t *testing.T) {
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": keySettings("k")}), nil, nil)
	tests := []struct {
		name, query, want string
	}{
		{"no target", "", "target parameter is missing"},
		{"empty target", "target=", "target parameter is missing"},
		{"relative target", "target=deploy.example.com", "http or https"},
		{"other scheme", "target=" + url.QueryEscape("ftp://deploy.example.com"), "http or https"},
		{"credentials in target", "target=" + url.QueryEscape("http://user:hunter2@deploy.example.com"), "URL must not carry credentials: the key comes from the module's authorization"},
		{"query in target", "target=" + url.QueryEscape("http://deploy.example.com/?a=b"), "query"},
		{"bad URL", "target=" + url.QueryEscape("http://[::1"), "not a valid URL"},
		{"unknown module", "module=nope&target=" + url.QueryEscape("http://127.0.0.1:1"), `unknown module "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := probe(t, h, tt.query)
			if code != http.StatusBadRequest {
				t.Errorf("status %d, want 400", code)
			}
			if !strings.Contains(body, tt.want) || strings.Count(strings.TrimSpace(body), "\n") > 0 {
				t.Errorf("body %q: want one line with %q", body, tt.want)
			}
			if strings.Contains(body, "hunter2") {
				t.Error("the answer repeats a password from the target")
			}
		})
	}
	noDefault := NewProbeHandler(staticLookup(map[string]TargetSettings{"x": keySettings("k")}), nil, nil)
	if code, _ := probe(t, noDefault, "target="+url.QueryEscape("http://127.0.0.1:1")); code != http.StatusBadRequest {
		t.Errorf("probe without module and without a default module: %d, want 400", code)
	}
}

func TestProbeDebugView(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "debug-key-123", Locations: 12, PageSize: 5, OmitCount: true})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	settings := keySettings("debug-key-123")
	settings.Client.RateLimit, settings.DetailLimit, settings.DetailIDs = 50, 2, nil
	settings.Client.HTTPClientConfig.TLSConfig.ServerName = "deploy.example.com"
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), nil, nil)
	code, body := probe(t, h, "debug=true&target="+url.QueryEscape(srv.URL))
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{
		// The module's effective settings.
		"Module default (the scrape timeout header lowers its timeout):\n", "\ntimeout: 5s\n", "\nconcurrency: 4\n",
		"\nrate_limit: 50\n", "\ngzip: true\n", "  detail_limit: 2\n", "    type: Token\n    credentials: <secret>\n",
		"    server_name: deploy.example.com\n",
		// The poll, with the phases of each request.
		"module default", ": ok\n",
		"root GET " + srv.URL + "/api/ -> status 200",
		"locations page 1: 5 entries; following next to " + srv.URL + "/api/projects/locations/?page=2",
		"locations page 3: 2 entries; walk done, count 12",
		"location_detail GET " + srv.URL + "/api/projects/locations/1/ -> status 200",
		"    First byte: ",
		// The metrics it would have returned.
		"Metrics this probe would have returned:", "deployment_service_up 1\n", "deployment_service_locations 12\n",
		"deployment_service_polls_total 1\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("debug view lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "debug-key-123") {
		t.Error("the debug view shows the key")
	}
}

// TestProbeDebugViewDuringAHoldOff: a probe held off shows the answer
// that started the hold-off and names its poll.
func TestProbeDebugViewDuringAHoldOff(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k", Locations: 3})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Status: 429, RetryAfter: "600", Body: `{"detail": "Request was throttled. Expected available in 600 seconds."}`})
	recent := NewPollLog()
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": keySettings("k")}), recent, nil)
	probe(t, h, "target="+url.QueryEscape(srv.URL))
	_, body := probe(t, h, "debug=true&target="+url.QueryEscape(srv.URL))
	for _, want := range []string{
		`sent nothing: held off until `, ` after a 429 with Retry-After "600"`,
		"Poll 1 met the answer that started the hold-off: /polls/1\n",
		"deployment_service_hold_off_until_timestamp_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("debug view during a hold-off lacks %q:\n%s", want, body)
		}
	}
}

// TestPlantedKeyIsRedacted has the service echo the key in a next link, in
// a redirect's Location header and in a body that fails to decode; the key
// must reach no page, trace or log.
func TestPlantedKeyIsRedacted(t *testing.T) {
	const key = "planted-secret-key-9876"
	svc := sampleservice.New(sampleservice.Options{Key: key, Locations: 20, PageSize: 5, OmitCount: true})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	svc.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{NextURL: srv.URL + "/api/projects/locations/?page=2&x=" + key, OnPage: 1})
	svc.SetFault(sampleservice.EndpointProjects, sampleservice.Fault{RedirectTo: srv.URL + "/" + key + "/api/projects/projects/"})
	svc.SetFault(sampleservice.EndpointRoot, sampleservice.Fault{Body: `{"detail": "` + key + `" ` + key})
	svc.SetDetailFault(1, sampleservice.Fault{Body: key})
	svc.SetDetailFault(2, sampleservice.Fault{Body: `{"id": 2, "name": "pre-` + key + `-post"}`})

	var logs bytes.Buffer
	level := promslog.NewLevel()
	_ = level.Set("debug")
	recent := NewPollLog()
	settings := keySettings(key)
	settings.DetailIDs, settings.InfoFields = []int64{1, 2}, []string{"name"}
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), recent,
		promslog.New(&promslog.Config{Level: level, Writer: &syncWriter{w: &logs}}))
	_, metrics := probe(t, h, "target="+url.QueryEscape(srv.URL))
	_, debug := probe(t, h, "debug=true&target="+url.QueryEscape(srv.URL))
	var pages strings.Builder
	for _, r := range latest(recent) {
		_ = r.WriteText(&pages)
	}
	if !strings.Contains(metrics, `name="pre-<secret>-post"`) {
		t.Errorf("the info label with the planted key is not redacted:\n%s", metrics)
	}
	if !strings.Contains(pages.String(), "<secret>") && !strings.Contains(pages.String(), "REDACTED") {
		t.Errorf("no redaction marker in the trace; the planted key was not exercised:\n%s", pages.String())
	}
	for where, text := range map[string]string{"metrics": metrics, "debug view": debug, "recent polls": pages.String(), "logs": logs.String()} {
		if strings.Contains(text, key) {
			t.Errorf("the key appears in the %s", where)
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestProbeRefusedTargetGetsNothing: a target that the module's check
// refuses is a 403 naming the module, before any request leaves and
// before the cache makes room for it.
func TestProbeRefusedTargetGetsNothing(t *testing.T) {
	listed := sampleservice.New(sampleservice.Options{Key: "k-listed", Locations: 3})
	other := sampleservice.New(sampleservice.Options{Key: "k-listed", Locations: 3})
	srvListed, srvOther := httptest.NewServer(listed), httptest.NewServer(other)
	defer srvListed.Close()
	defer srvOther.Close()
	allowed := mustTarget(t, srvListed.URL)
	var checked []string
	h := NewProbeHandler(func(string) (ProbeModule, error) {
		return ProbeModule{Settings: keySettings("k-listed"), Version: 1, CheckTarget: func(target *url.URL) error {
			checked = append(checked, target.String())
			if target.String() != allowed.String() {
				return fmt.Errorf("not listed")
			}
			return nil
		}}, nil
	}, nil, nil)
	leaveRoom(t, h, 1)

	if code, body := probe(t, h, "target="+url.QueryEscape(srvListed.URL+"/")); code != http.StatusOK || !strings.Contains(body, "deployment_service_up 1") {
		t.Fatalf("listed target: %d\n%s", code, body)
	}
	code, body := probe(t, h, "target="+url.QueryEscape(strings.ToUpper(srvOther.URL)))
	if code != http.StatusForbidden {
		t.Errorf("unlisted target answered %d, want 403", code)
	}
	if want := `module "default" may not be used with target ` + srvOther.URL + ": not listed\n"; body != want {
		t.Errorf("403 body %q, want %q", body, want)
	}
	if n := other.TotalRequests(); n != 0 {
		t.Errorf("the unlisted target got %d requests", n)
	}
	if want := []string{allowed.String(), srvOther.URL}; fmt.Sprint(checked) != fmt.Sprint(want) {
		t.Errorf("checked %q, want the targets in /probe's spelling %q", checked, want)
	}
	h.mu.Lock()
	_, kept := h.pollers[targetKey{target: allowed.String(), module: "default"}]
	n := len(h.pollers)
	h.mu.Unlock()
	if !kept || n != maxProbeTargets {
		t.Errorf("the refused target changed the cache: listed pair kept %v, %d pairs", kept, n)
	}
}

// TestProbeBrokenModuleEvictsNothing: a pair that cannot be built leaves
// the cache as it was, even when it is full.
func TestProbeBrokenModuleEvictsNothing(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k", Locations: 3})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	broken := keySettings("k")
	broken.Client.HTTPClientConfig.TLSConfig.CAFile = "/nonexistent/ca.pem"
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": keySettings("k"), "broken": broken}), nil, nil)
	leaveRoom(t, h, 1)
	if code, _ := probe(t, h, "target="+url.QueryEscape(srv.URL)); code != http.StatusOK {
		t.Fatalf("good module: %d", code)
	}
	if code, body := probe(t, h, "module=broken&target="+url.QueryEscape(srv.URL)); code != http.StatusBadRequest || !strings.Contains(body, `module "broken"`) {
		t.Errorf("broken module: %d %s", code, body)
	}
	h.mu.Lock()
	_, kept := h.pollers[targetKey{target: mustTarget(t, srv.URL).String(), module: "default"}]
	h.mu.Unlock()
	if !kept {
		t.Error("the broken module evicted a healthy pair")
	}
}
