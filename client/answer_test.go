package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTraceShowsTheAnswer checks what the trace keeps of each answer: the
// bytes read, the Content-Type, a redirect's Location, Retry-After and the
// hold-off's end, and an excerpt of the body, redacted and bounded.
func TestTraceShowsTheAnswer(t *testing.T) {
	drf := func(status int, detail string, headers ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			for i := 0; i+1 < len(headers); i += 2 {
				w.Header().Set(headers[i], headers[i+1])
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"detail":"` + detail + `"}`))
		}
	}
	long := strings.Repeat("x", 300) + testKey + strings.Repeat("y", 9000)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		// bytes is the body bytes the trace must count, -1 for "more
		// than 0 and at most 8 KiB".
		bytes       int64
		excerpt     string
		contentType string
		location    string
		retryAfter  string
		holdOff     time.Duration
		reason      Reason
	}{
		{
			name:    "a refused key",
			handler: drf(http.StatusUnauthorized, "Invalid token.", "WWW-Authenticate", "Token"),
			bytes:   int64(len(`{"detail":"Invalid token."}`)), excerpt: "Invalid token.", contentType: "application/json", reason: ReasonHTTPStatus,
		},
		{
			name:    "a hidden location",
			handler: drf(http.StatusNotFound, "Not found."),
			bytes:   int64(len(`{"detail":"Not found."}`)), excerpt: "Not found.", contentType: "application/json", reason: ReasonHTTPStatus,
		},
		{
			name:    "throttled",
			handler: drf(http.StatusTooManyRequests, "Request was throttled. Expected available in 14 seconds.", "Retry-After", "14"),
			bytes:   int64(len(`{"detail":"Request was throttled. Expected available in 14 seconds."}`)),
			excerpt: "Request was throttled. Expected available in 14 seconds.", contentType: "application/json",
			retryAfter: "14", holdOff: 14 * time.Second, reason: ReasonHTTPStatus,
		},
		{
			name:    "the key echoed in the detail",
			handler: drf(http.StatusForbidden, "Token "+testKey+" is not allowed here."),
			bytes:   -1, excerpt: "Token <secret> is not allowed here.", contentType: "application/json", reason: ReasonHTTPStatus,
		},
		{
			name: "a message field, not detail",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte(`{"error":{"code":1},"message":"upstream down"}`))
			},
			bytes: -1, excerpt: "upstream down", contentType: "text/plain; charset=utf-8", reason: ReasonHTTPStatus,
		},
		{
			name: "a long page with the key across the excerpt's end",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(long))
			},
			// 1 KiB read for the excerpt, 4 KiB drained.
			bytes:   5 << 10,
			excerpt: strings.Repeat("x", 300) + "<secret>" + strings.Repeat("y", 512-300-len("<secret>")-len("…")) + "…", contentType: "text/html", reason: ReasonHTTPStatus,
		},
		{
			name: "control characters",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("  down\x1b[31m\tfor\nmaintenance\r\n"))
			},
			bytes: -1, excerpt: "down\uFFFD[31m\uFFFDfor\nmaintenance", contentType: "text/plain; charset=utf-8", reason: ReasonHTTPStatus,
		},
		{
			name: "a gzip error body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				_, _ = zw.Write([]byte(`{"detail":"Service in maintenance."}`))
				_ = zw.Close()
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "soon")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write(b.Bytes())
			},
			bytes: -1, excerpt: "Service in maintenance.", contentType: "application/json", retryAfter: "soon", reason: ReasonHTTPStatus,
		},
		{
			name: "a redirect to another origin",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", "https://user:pw@sso.example.com/login?next=%2Fapi%2F&access_token="+testKey)
				w.WriteHeader(http.StatusFound)
			},
			bytes: 0, contentType: "", location: "https://sso.example.com/login?access_token=REDACTED&next=%2Fapi%2F", reason: ReasonHTTPStatus,
		},
		{
			name: "a login page served with 200",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<html><body>Please sign in</body></html>"))
			},
			bytes: -1, excerpt: "<html><body>Please sign in</body></html>", contentType: "text/html", reason: ReasonInvalidBody,
		},
		{
			name: "a good answer: no excerpt",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"projects":"x"}`))
			},
			bytes: int64(len(`{"projects":"x"}`)), contentType: "application/json",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/", tc.handler)
			c := f.client(t, nil)
			tr := &Trace{}
			start := time.Now()
			res := c.Root(WithTrace(context.Background(), tr))
			if ReasonOf(res.Err) != tc.reason {
				t.Fatalf("reason %q, want %q (err %v)", ReasonOf(res.Err), tc.reason, res.Err)
			}
			reqs, _ := tr.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests traced, want 1", len(reqs))
			}
			r := reqs[0]
			switch {
			case tc.bytes >= 0 && r.Bytes != tc.bytes:
				t.Errorf("bytes %d, want %d", r.Bytes, tc.bytes)
			case tc.bytes < 0 && (r.Bytes <= 0 || r.Bytes > 8<<10):
				t.Errorf("bytes %d, want the body's", r.Bytes)
			}
			if r.BodyExcerpt != tc.excerpt {
				t.Errorf("excerpt %q\nwant %q", r.BodyExcerpt, tc.excerpt)
			}
			if len(r.BodyExcerpt) > maxExcerpt {
				t.Errorf("excerpt of %d bytes, more than %d", len(r.BodyExcerpt), maxExcerpt)
			}
			if r.ContentType != tc.contentType || r.Location != tc.location || r.RetryAfter != tc.retryAfter {
				t.Errorf("Content-Type %q, Location %q, Retry-After %q\nwant %q, %q, %q", r.ContentType, r.Location, r.RetryAfter, tc.contentType, tc.location, tc.retryAfter)
			}
			if tc.holdOff == 0 && !r.HoldOffUntil.IsZero() {
				t.Errorf("hold-off until %v, want none", r.HoldOffUntil)
			}
			if tc.holdOff > 0 {
				until, _ := c.HoldOff()
				if !r.HoldOffUntil.Equal(until) || r.HoldOffUntil.Before(start.Add(tc.holdOff)) || r.HoldOffUntil.After(time.Now().Add(tc.holdOff)) {
					t.Errorf("hold-off until %v, want the client's, %v, %s after the request", r.HoldOffUntil, until, tc.holdOff)
				}
			}
			// The excerpt lives in the trace only.
			if res.Err != nil && tc.excerpt != "" && strings.Contains(res.Err.Error(), tc.excerpt) {
				t.Errorf("the error %q repeats the body", res.Err)
			}
			for _, s := range []string{r.BodyExcerpt, r.Location, r.URL, r.Error} {
				if strings.Contains(s, testKey) {
					t.Errorf("the trace shows the key: %q", s)
				}
			}
		})
	}
}

func TestCutText(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"one more char", 10, "one mor…"},
		{"ééééé", 8, "éé…"},
	} {
		if got := cutText(tc.in, tc.limit); got != tc.want || len(got) > tc.limit {
			t.Errorf("cutText(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// TestTraceBoundsItsExcerpts: identical excerpts share their bytes, and
// distinct ones stop being kept past the trace's bound.
func TestTraceBoundsItsExcerpts(t *testing.T) {
	tr := &Trace{}
	for i := range 400 {
		tr.add(TraceRequest{Endpoint: EndpointLocationDetail, BodyExcerpt: "Not found."})
		tr.add(TraceRequest{Endpoint: EndpointLocationDetail, BodyExcerpt: fmt.Sprintf("%03d %s", i, strings.Repeat("x", 496))})
	}
	reqs, dropped := tr.Requests()
	if len(reqs) != maxTraceRequests || dropped != 800-maxTraceRequests {
		t.Fatalf("%d requests kept, %d dropped", len(reqs), dropped)
	}
	distinct, notKept, notFound := map[string]bool{}, 0, 0
	for _, r := range reqs {
		switch r.BodyExcerpt {
		case excerptNotKept:
			notKept++
		case "Not found.":
			notFound++
		default:
			distinct[r.BodyExcerpt] = true
		}
	}
	total := len("Not found.")
	for e := range distinct {
		total += len(e)
	}
	if notFound != maxTraceRequests/2 || total > maxTraceExcerptBytes || notKept == 0 || len(distinct) < 60 {
		t.Errorf("%d \"Not found.\", %d distinct excerpts of %d bytes in all, %d not kept", notFound, len(distinct), total, notKept)
	}
}
