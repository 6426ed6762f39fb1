package client

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// statusObserver records the status of every request sent.
type statusObserver struct {
	mu       sync.Mutex
	statuses []int
	reasons  []Reason
}

func (o *statusObserver) ObserveRequest(_ Endpoint, status int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.statuses = append(o.statuses, status)
}

func (o *statusObserver) ObserveError(_ Endpoint, r Reason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reasons = append(o.reasons, r)
}

// TestUnfollowedRedirectKeepsItsStatus: a redirect whose Location is no
// usable URL is not followed, and is reported with its own status and
// reason http_status, as any redirect not followed.
func TestUnfollowedRedirectKeepsItsStatus(t *testing.T) {
	for name, loc := range map[string]string{
		"a tab":               "/api/\tnext/", // the one control character HTTP lets through
		"a control character": "/api/\x01next/",
		"a delete":            "/api/\x7fnext/",
		"a broken host":       "http://[::1/api/",
		"a bad escape":        "/api/%zz/",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) { // written raw: net/http would not send all of these
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_, _ = buf.WriteString("HTTP/1.1 307 Temporary Redirect\r\nLocation: " + loc + "\r\nContent-Length: 0\r\n\r\n")
				_ = buf.Flush()
			})
			obs := &statusObserver{}
			r := f.client(t, func(c *Config) { c.Observer = obs }).Root(context.Background())
			if r.Status != 307 || ReasonOf(r.Err) != ReasonHTTPStatus {
				t.Errorf("status %d reason %q (%v), want 307 http_status", r.Status, ReasonOf(r.Err), r.Err)
			}
			if len(obs.statuses) != 1 || obs.statuses[0] != 307 || len(obs.reasons) != 1 || obs.reasons[0] != ReasonHTTPStatus {
				t.Errorf("observed statuses %v reasons %v, want [307] [http_status]", obs.statuses, obs.reasons)
			}
		})
	}
}
