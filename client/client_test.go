package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/config"
)

const testKey = "s3cr3t-test-key-4f9a"

// fakeAPI is a deployment service that checks every request it gets and
// answers from handlers keyed by path (below the prefix).
type fakeAPI struct {
	t        *testing.T
	srv      *httptest.Server
	prefix   string
	key      string
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	hits     map[string]int
	inFlight atomic.Int64
	maxIn    atomic.Int64
}

func newFakeAPI(t *testing.T, prefix string) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, prefix: prefix, key: testKey, handlers: map[string]http.HandlerFunc{}, hits: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) handle(path string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[path] = h
}

func (f *fakeAPI) json(path, body string) {
	f.handle(path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
}

func (f *fakeAPI) hitCount(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[path]
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	key := f.key
	f.mu.Unlock()
	checkRequest(f.t, r, key)
	path, ok := strings.CutPrefix(r.URL.Path, f.prefix)
	if !ok {
		f.t.Errorf("request %s misses the prefix %q", r.URL.Path, f.prefix)
	}
	f.mu.Lock()
	f.hits[path]++
	h := f.handlers[path]
	f.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h(w, r)
}

// checkRequest asserts what the contract says of every request.
func checkRequest(t *testing.T, r *http.Request, key string) {
	t.Helper()
	if r.Method != http.MethodGet {
		t.Errorf("method %s, want GET", r.Method)
	}
	if got, want := r.Header.Get("Authorization"), "Token "+key; got != want {
		t.Errorf("Authorization header is not exactly %q", "Token <key>")
	}
	if got := r.Header.Get("Accept"); got != "application/json" {
		t.Errorf("Accept %q, want application/json", got)
	}
	if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "deployment_service_exporter/") {
		t.Errorf("User-Agent %q does not name the exporter", ua)
	}
	if !strings.HasSuffix(r.URL.Path, "/") {
		t.Errorf("path %s lost its trailing slash", r.URL.Path)
	}
	if r.ContentLength > 0 {
		t.Errorf("request has a body of %d bytes", r.ContentLength)
	}
}

func (f *fakeAPI) client(t *testing.T, mod func(*Config)) *Client {
	t.Helper()
	u, err := url.Parse(f.srv.URL + f.prefix)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		BaseURL: u,
		HTTPClientConfig: config.HTTPClientConfig{
			Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(f.key)},
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func entries(from, to int) string {
	parts := make([]string, 0, to-from+1)
	for i := from; i <= to; i++ {
		parts = append(parts, fmt.Sprintf(`{"id": %d, "name": "loc-%d", "nested": {"id": "x"}}`, i, i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// pagedList serves ids 1..total as DRF envelopes of size per page.
func pagedList(f *fakeAPI, path string, total, size int, withCount bool) {
	f.handle(path, func(w http.ResponseWriter, r *http.Request) {
		page := 1
		if p := r.URL.Query().Get("page"); p != "" {
			_, _ = fmt.Sscan(p, &page)
		}
		from, to := (page-1)*size+1, min(page*size, total)
		next := "null"
		if to < total {
			next = fmt.Sprintf("%q", fmt.Sprintf("http://%s%s%s?page=%d", r.Host, f.prefix, path, page+1))
		}
		count := ""
		if withCount {
			count = fmt.Sprintf(`"count": %d, `, total)
		}
		fmt.Fprintf(w, `{%s"next": %s, "previous": null, "results": %s}`, count, next, entries(from, to))
	})
}

func TestListShapes(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(f *fakeAPI)
		wantIDs   int
		count     int64
		ids       []int64
		pages     int
		listPath  string
		listCalls int
	}{
		{
			name:    "plain array",
			setup:   func(f *fakeAPI) { f.json("/api/projects/locations/", entries(1, 7)) },
			wantIDs: 3, count: 7, ids: []int64{1, 2, 3}, pages: 1,
		},
		{
			name:    "plain array shorter than the subset",
			setup:   func(f *fakeAPI) { f.json("/api/projects/locations/", entries(1, 2)) },
			wantIDs: 5, count: 2, ids: []int64{1, 2}, pages: 1,
		},
		{
			name:  "empty plain array counts zero",
			setup: func(f *fakeAPI) { f.json("/api/projects/locations/", "[]") },
			count: 0, pages: 1,
		},
		{
			name:  "envelope with count stops after the first page",
			setup: func(f *fakeAPI) { pagedList(f, "/api/projects/locations/", 250, 100, true) },
			count: 250, pages: 1,
		},
		{
			name:    "envelope with count walks only as far as the ids",
			setup:   func(f *fakeAPI) { pagedList(f, "/api/projects/locations/", 250, 100, true) },
			wantIDs: 120, count: 250, pages: 2,
		},
		{
			name:    "envelope without count walks every page",
			setup:   func(f *fakeAPI) { pagedList(f, "/api/projects/locations/", 250, 100, false) },
			wantIDs: 2, count: 250, ids: []int64{1, 2}, pages: 3,
		},
		{
			name: "envelope without next",
			setup: func(f *fakeAPI) {
				f.json("/api/projects/locations/", `{"count": 3, "results": [{"id": 4}, {"id": 5}, {"id": 6}]}`)
			},
			wantIDs: 2, count: 3, ids: []int64{4, 5}, pages: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, "/deploy")
			tt.setup(f)
			c := f.client(t, nil)
			var streamed []int64
			res := c.Locations(context.Background(), tt.wantIDs, func(ids []int64) { streamed = append(streamed, ids...) })
			if res.Err != nil {
				t.Fatalf("Locations: %v", res.Err)
			}
			if res.Duration <= 0 {
				t.Errorf("duration %v, want the wall time of the walk", res.Duration)
			}
			if res.Count != tt.count || res.Pages != tt.pages || res.Status != 200 {
				t.Errorf("count %d pages %d status %d, want %d, %d, 200", res.Count, res.Pages, res.Status, tt.count, tt.pages)
			}
			if tt.ids != nil && fmt.Sprint(res.IDs) != fmt.Sprint(tt.ids) {
				t.Errorf("ids %v, want %v", res.IDs, tt.ids)
			}
			if len(res.IDs) != min(tt.wantIDs, int(tt.count)) {
				t.Errorf("kept %d ids, want %d", len(res.IDs), min(tt.wantIDs, int(tt.count)))
			}
			if fmt.Sprint(streamed) != fmt.Sprint(res.IDs) {
				t.Errorf("onIDs saw %v, result holds %v", streamed, res.IDs)
			}
		})
	}
}

func TestProjectsAndRoot(t *testing.T) {
	f := newFakeAPI(t, "")
	f.json("/api/", `{"projects": "x", "locations": "y"}`)
	f.json("/api/projects/projects/", `{"count": 12, "next": "http://elsewhere.invalid/?page=2", "results": [{"id": 1}]}`)
	c := f.client(t, nil)
	if r := c.Root(context.Background()); r.Err != nil || r.Status != 200 {
		t.Errorf("Root: status %d err %v", r.Status, r.Err)
	}
	// With a count and no ids wanted, the foreign next link is never followed.
	r := c.Projects(context.Background())
	if r.Err != nil || r.Count != 12 || r.Pages != 1 {
		t.Errorf("Projects: count %d pages %d err %v", r.Count, r.Pages, r.Err)
	}
}

func TestLocationDetail(t *testing.T) {
	f := newFakeAPI(t, "/prefix/deploy")
	f.json("/api/projects/locations/42/", `{"id": 42, "name": "eu-1", "replicas": 3, "active": true, "owner": {"name": "x"}, "gone": null}`)
	c := f.client(t, nil)
	r := c.LocationDetail(context.Background(), 42, []string{"name", "replicas", "active", "owner", "gone", "missing"})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := map[string]string{"name": "eu-1", "replicas": "3", "active": "true"}
	if fmt.Sprint(r.Fields) != fmt.Sprint(want) {
		t.Errorf("fields %v, want %v", r.Fields, want)
	}
}

func TestErrorReasons(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		mod     func(*Config)
		ctx     func() (context.Context, context.CancelFunc)
		reason  Reason
		status  int
	}{
		{
			name:    "server error",
			handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			reason:  ReasonHTTPStatus, status: 500,
		},
		{
			name: "key refused",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"detail":"Invalid token."}`, http.StatusUnauthorized)
			},
			reason: ReasonHTTPStatus, status: 401,
		},
		{
			name:    "malformed JSON",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`[{"id": 1},`)) },
			reason:  ReasonInvalidBody, status: 200,
		},
		{
			name:    "wrong shape",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"detail": "not a list"}`)) },
			reason:  ReasonInvalidBody, status: 200,
		},
		{
			name:    "entry that is not an object",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`[{"id": 1}, "two"]`)) },
			reason:  ReasonInvalidBody, status: 200,
		},
		{
			name:    "declared length over the limit",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(entries(1, 100))) },
			mod:     func(c *Config) { c.MaxResponseBytes = 100 },
			reason:  ReasonTooLarge, status: 200,
		},
		{
			name: "streamed body over the limit",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				for i := range 100 {
					_, _ = fmt.Fprintf(w, "%s", map[bool]string{true: "[", false: ","}[i == 0])
					_, _ = w.Write([]byte(`{"id": 1}`))
					w.(http.Flusher).Flush()
				}
				_, _ = w.Write([]byte("]"))
			},
			mod:    func(c *Config) { c.MaxResponseBytes = 300 },
			reason: ReasonTooLarge, status: 200,
		},
		{
			name: "truncated body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", "1000")
				_, _ = w.Write([]byte(`[{"id": 1}, {"id"`))
			},
			reason: ReasonNetwork, status: 200,
		},
		{
			name: "slow answer",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 100*time.Millisecond)
			},
			reason: ReasonTimeout, status: 0,
		},
		{
			name: "endless same-origin redirects",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, r.URL.Path, http.StatusFound)
			},
			reason: ReasonHTTPStatus, status: 302,
		},
		{
			name: "foreign next link",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"next": "http://127.0.0.1:1/api/projects/locations/?page=2", "results": [{"id": 1}]}`))
			},
			reason: ReasonPagination, status: 200,
		},
		{
			name: "next link loops back",
			handler: func(w http.ResponseWriter, r *http.Request) {
				next := "http://" + r.Host + r.URL.Path + "?page=2"
				if r.URL.Query().Get("page") == "2" {
					next = "http://" + r.Host + r.URL.Path
				}
				fmt.Fprintf(w, `{"next": %q, "results": [{"id": 1}]}`, next)
			},
			reason: ReasonPagination, status: 200,
		},
		{
			name: "more pages than allowed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				var page int
				_, _ = fmt.Sscan(r.URL.Query().Get("page")+"0", &page)
				fmt.Fprintf(w, `{"next": "?page=%d", "results": [{"id": 1}]}`, page/10+1)
			},
			mod:    func(c *Config) { c.MaxPages = 3 },
			reason: ReasonPagination, status: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", tt.handler)
			obs := &recordingObserver{}
			c := f.client(t, func(cfg *Config) {
				cfg.Observer = obs
				if tt.mod != nil {
					tt.mod(cfg)
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			res := c.Locations(ctx, 0, nil)
			var e *Error
			if !errors.As(res.Err, &e) {
				t.Fatalf("error %v is not an *Error", res.Err)
			}
			if e.Reason != tt.reason || e.Status != tt.status || res.Status != tt.status {
				t.Errorf("reason %s status %d/%d, want %s %d (err: %v)", e.Reason, e.Status, res.Status, tt.reason, tt.status, e)
			}
			if strings.Contains(e.Error(), testKey) {
				t.Errorf("error message carries the key")
			}
			if got := obs.errors[EndpointLocations][tt.reason]; got != 1 {
				t.Errorf("observer saw %d %s errors, want 1", got, tt.reason)
			}
		})
	}
}

func TestNetworkError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there any more
	u, _ := url.Parse(addr)
	c, err := New(Config{BaseURL: u})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Root(context.Background())
	if ReasonOf(r.Err) != ReasonNetwork || r.Status != 0 {
		t.Errorf("reason %q status %d, want network 0", ReasonOf(r.Err), r.Status)
	}
}

// keyWatcher is a foreign listener that records whether any request
// reached it and whether one carried an Authorization header.
type keyWatcher struct {
	srv      *httptest.Server
	requests atomic.Int64
	withAuth atomic.Int64
}

func newKeyWatcher(t *testing.T) *keyWatcher {
	k := &keyWatcher{}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			k.withAuth.Add(1)
		}
		_, _ = w.Write([]byte(`{"next": null, "results": []}`))
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func TestKeyNeverLeavesTheOrigin(t *testing.T) {
	tests := []struct {
		name   string
		reply  func(foreign string) http.HandlerFunc
		reason Reason
		status int
	}{
		{
			name: "next link to another port of the same host",
			reply: func(foreign string) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					fmt.Fprintf(w, `{"next": %q, "results": [{"id": 1}]}`, foreign+"/api/projects/locations/?page=2")
				}
			},
			reason: ReasonPagination, status: 200,
		},
		{
			name: "redirect to another port of the same host",
			reply: func(foreign string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, foreign+"/api/projects/locations/", http.StatusFound)
				}
			},
			reason: ReasonHTTPStatus, status: 302,
		},
		{
			name: "redirect to another host name",
			reply: func(foreign string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, strings.Replace(foreign, "127.0.0.1", "localhost", 1)+"/api/projects/locations/", http.StatusTemporaryRedirect)
				}
			},
			reason: ReasonHTTPStatus, status: 307,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			foreign := newKeyWatcher(t)
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", tt.reply(foreign.srv.URL))
			res := f.client(t, nil).Locations(context.Background(), 5, nil)
			if ReasonOf(res.Err) != tt.reason || res.Status != tt.status {
				t.Errorf("reason %q status %d, want %s %d", ReasonOf(res.Err), res.Status, tt.reason, tt.status)
			}
			if n := foreign.withAuth.Load(); n != 0 {
				t.Errorf("the foreign listener saw %d requests with an Authorization header", n)
			}
			if n := foreign.requests.Load(); n != 0 {
				t.Errorf("the foreign listener saw %d requests", n)
			}
		})
	}
}

func TestSameOriginRedirectIsFollowed(t *testing.T) {
	f := newFakeAPI(t, "")
	f.handle("/api/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v2/api/", http.StatusMovedPermanently)
	})
	f.json("/v2/api/", `{}`)
	r := f.client(t, nil).Root(context.Background())
	if r.Err != nil || r.Status != 200 || f.hitCount("/v2/api/") != 1 {
		t.Errorf("status %d err %v hits %d", r.Status, r.Err, f.hitCount("/v2/api/"))
	}
}

func TestKeyFileRotation(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("first-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFakeAPI(t, "")
	f.key = "first-key"
	f.json("/api/", `{}`)
	c := f.client(t, func(cfg *Config) {
		cfg.HTTPClientConfig.Authorization = &config.Authorization{Type: "Token", CredentialsFile: keyFile}
	})
	if r := c.Root(context.Background()); r.Err != nil {
		t.Fatalf("first key: %v", r.Err)
	}
	// Swap the file by a rename, the way Kubernetes updates a mounted Secret.
	tmp := filepath.Join(dir, "key.new")
	if err := os.WriteFile(tmp, []byte("  second-key \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, keyFile); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.key = "second-key"
	f.mu.Unlock()
	if r := c.Root(context.Background()); r.Err != nil {
		t.Fatalf("rotated key: %v", r.Err)
	}
}

func TestRetryAfterHoldsOff(t *testing.T) {
	f := newFakeAPI(t, "")
	f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	f.json("/api/projects/projects/", `[]`)
	c := f.client(t, nil)
	before := time.Now()
	r := c.Root(context.Background())
	after := time.Now()
	var e *Error
	if !errors.As(r.Err, &e) || e.Status != 429 {
		t.Fatalf("err %v, want a 429 asking for 30s", r.Err)
	}
	// 30 s after the answer came, which was during the call.
	until, status := c.HoldOff()
	if status != 429 || until.Before(before.Add(30*time.Second)) || until.After(after.Add(30*time.Second)) {
		t.Errorf("hold-off until %v after the call began (status %d), want 30s after the answer", until.Sub(before), status)
	}
	p := c.Projects(context.Background())
	if !errors.Is(p.Err, ErrHeldOff) || p.Status != 429 {
		t.Errorf("projects during hold-off: status %d err %v", p.Status, p.Err)
	}
	if n := f.hitCount("/api/projects/projects/"); n != 0 {
		t.Errorf("%d requests sent during the hold-off", n)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"junk", 0},
		{"120", 2 * time.Minute},
		{"86400", maxRetryAfter},
		{"99999999999999999999", maxRetryAfter},
		{" 30", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), maxRetryAfter},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// waitUntil polls cond until it holds. The minute only turns a hang into a
// failure: what it waits for takes microseconds.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRateLimitWaitsWithinTheDeadline(t *testing.T) {
	f := newFakeAPI(t, "")
	f.json("/api/", `{}`)
	obs := &recordingObserver{}
	// One request per 1000 s: the second turn is far past any deadline.
	c := f.client(t, func(cfg *Config) { cfg.RateLimit = 0.001; cfg.Observer = obs })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r := c.Root(ctx); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The next turn is past the deadline: the request fails as a timeout
	// at once, with the deadline still ahead, instead of being sent.
	r := c.Root(ctx)
	if ReasonOf(r.Err) != ReasonTimeout {
		t.Errorf("second request: %v, want a timeout", r.Err)
	}
	if ctx.Err() != nil {
		t.Error("the second request waited for the deadline")
	}
	if n := f.hitCount("/api/"); n != 1 {
		t.Errorf("the service saw %d requests, want 1", n)
	}
	if obs.requests != 1 {
		t.Errorf("observer saw %d requests sent, want 1", obs.requests)
	}
}

// TestRateLimitWiring checks how the rate limit is built and used rather
// than timing it: --api.rate-limit requests a second with a burst of one,
// waited for under the caller's context, so a poll that ends ends the wait.
func TestRateLimitWiring(t *testing.T) {
	f := newFakeAPI(t, "")
	f.json("/api/", `{}`)
	if c := f.client(t, nil); c.limiter != nil {
		t.Error("a limiter without a rate limit")
	}
	c := f.client(t, func(cfg *Config) { cfg.RateLimit = 5 })
	if l, b := c.limiter.Limit(), c.limiter.Burst(); l != 5 || b != 1 {
		t.Errorf("limit %v burst %d, want 5 and 1", l, b)
	}

	obs := &recordingObserver{}
	c = f.client(t, func(cfg *Config) { cfg.RateLimit = 0.001; cfg.Observer = obs })
	if r := c.Root(context.Background()); r.Err != nil {
		t.Fatal(r.Err)
	}
	// No deadline: the second request waits for its turn, 1000 s away,
	// until its context is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan Result, 1)
	go func() { second <- c.Root(ctx) }()
	waitUntil(t, func() bool { return c.limiter.Tokens() < -0.5 })
	if n := f.hitCount("/api/"); n != 1 {
		t.Errorf("the service saw %d requests while the second waited for its turn, want 1", n)
	}
	cancel()
	select {
	case r := <-second:
		if ReasonOf(r.Err) != ReasonTimeout {
			t.Errorf("second request: %v, want a timeout", r.Err)
		}
	case <-time.After(time.Minute): // only a broken wiring gets here
		t.Fatal("the wait for the turn outlived its context")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if n := f.hitCount("/api/"); n != 1 || obs.requests != 1 {
		t.Errorf("the service saw %d requests and the observer %d, want 1", n, obs.requests)
	}
}

func TestValidateBaseURL(t *testing.T) {
	for _, raw := range []string{"ftp://h/", "http://", "/relative", "http://u:p@h/", "http://h/?q=1", "http://h/#f"} {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if err := validateBaseURL(u); err == nil {
			t.Errorf("validateBaseURL(%q) accepted it", raw)
		}
	}
	u, _ := url.Parse("https://deploy.example.com/prefix/")
	if err := validateBaseURL(u); err != nil {
		t.Errorf("validateBaseURL refused a good URL: %v", err)
	}
}

type recordingObserver struct {
	mu       sync.Mutex
	requests int
	errors   map[Endpoint]map[Reason]int
}

func (o *recordingObserver) ObserveRequest(Endpoint, int, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests++
}

func (o *recordingObserver) ObserveError(ep Endpoint, r Reason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errors == nil {
		o.errors = map[Endpoint]map[Reason]int{}
	}
	if o.errors[ep] == nil {
		o.errors[ep] = map[Reason]int{}
	}
	o.errors[ep][r]++
}

func TestUnusableKeyFileSendsNothing(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("good-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFakeAPI(t, "")
	f.key = "good-key"
	f.json("/api/", `{}`)
	obs := &recordingObserver{}
	c := f.client(t, func(cfg *Config) {
		cfg.HTTPClientConfig.Authorization = &config.Authorization{Type: "Token", CredentialsFile: keyFile}
		cfg.Observer = obs
	})
	// Each way the file can fail says why, and never what it holds. Tests
	// run as root, where permissions do not stop a read: a directory in
	// the file's place, or no file, stand for the errors of reading it
	// (too many open files, permission denied…).
	for _, tc := range []struct {
		name  string
		setup func() error
		want  string
	}{
		{"emptied", func() error { return os.WriteFile(keyFile, nil, 0o600) }, "the key file " + keyFile + " is empty"},
		{"two lines", func() error { return os.WriteFile(keyFile, []byte("good-key\nother-key\n"), 0o600) },
			"the key file " + keyFile + " has control characters such as a line break inside the key"},
		{"a directory in its place", func() error {
			if err := os.Remove(keyFile); err != nil {
				return err
			}
			return os.Mkdir(keyFile, 0o700)
		}, "cannot read the key file " + keyFile + ": it is a directory, not a regular file"},
		{"a FIFO in its place", func() error {
			if err := os.Remove(keyFile); err != nil {
				return err
			}
			return mkfifo(keyFile)
		}, "cannot read the key file " + keyFile + ": it is a FIFO, not a regular file"},
		{"removed", func() error { return os.Remove(keyFile) }, "cannot read the key file " + keyFile + ": no such file or directory"},
	} {
		if err := tc.setup(); err != nil {
			t.Fatal(err)
		}
		r := c.Root(context.Background())
		// Not the service's fault, nor the network's: no reason fits.
		if ReasonOf(r.Err) != "" || !errors.Is(r.Err, ErrKeyUnavailable) {
			t.Errorf("%s key file: %v, want an error without a reason saying the key is unavailable", tc.name, r.Err)
		}
		if msg := fmt.Sprint(r.Err); !strings.Contains(msg, "the API key is unavailable: "+tc.want) || strings.Contains(msg, "other-key") {
			t.Errorf("%s key file: %q, want it to say %q", tc.name, msg, tc.want)
		}
	}
	if n := f.hitCount("/api/"); n != 0 {
		t.Errorf("%d requests sent without a usable key", n)
	}
	if obs.requests != 0 || len(obs.errors) != 0 {
		t.Errorf("%d requests counted as sent, errors counted %v", obs.requests, obs.errors)
	}
}

// TestOriginGuard sends a request to another origin straight through the
// client's transport, past the checks of pagination and redirects: the
// guard alone must stop it before the key is added.
func TestOriginGuard(t *testing.T) {
	foreign := newKeyWatcher(t)
	f := newFakeAPI(t, "")
	c := f.client(t, nil)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, foreign.srv.URL+"/api/", nil)
	resp, err := c.http.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, errForeignOrigin) {
		t.Errorf("request to another origin: %v, want errForeignOrigin", err)
	}
	if n := foreign.requests.Load(); n != 0 {
		t.Errorf("the foreign listener saw %d requests", n)
	}
}
