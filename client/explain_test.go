package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// tracedRoot reads the root once with a trace and returns the result and
// the trace's only request.
func tracedRoot(t *testing.T, c *Client) (Result, TraceRequest) {
	t.Helper()
	tr := &Trace{}
	res := c.Root(WithTrace(context.Background(), tr))
	reqs, _ := tr.Requests()
	if len(reqs) != 1 {
		t.Fatalf("trace holds %d requests, want 1", len(reqs))
	}
	return res, reqs[0]
}

// TestRedirectToAnotherOrigin: a redirect to another origin names that
// origin; the trace shows the Location as it was sent.
func TestRedirectToAnotherOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, location, want string
	}{
		{"SSO login", "https://sso.example.com/login?next=/api/", "redirect to https://sso.example.com:443, another origin than"},
		{"another host", "http://10.0.0.7:8000/api/", "redirect to http://10.0.0.7:8000, another origin than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", tc.location)
				w.WriteHeader(http.StatusFound)
			})
			res, rec := tracedRoot(t, f.client(t, nil))
			if ReasonOf(res.Err) != ReasonHTTPStatus || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("error %v, want %q", res.Err, tc.want)
			}
			if rec.Location != tc.location {
				t.Errorf("trace Location %q, want %q as sent", rec.Location, tc.location)
			}
		})
	}
	// A relative Location is shown relative, as sent.
	f := newFakeAPI(t, "")
	f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "/accounts/login/?next=/api/")
		w.WriteHeader(http.StatusFound)
	})
	f.handle("/accounts/login/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "/accounts/login/?next=/api/")
		w.WriteHeader(http.StatusFound)
	})
	if _, rec := tracedRoot(t, f.client(t, nil)); rec.Location != "/accounts/login/?next=/api/" {
		t.Errorf("trace Location %q, want the relative one as sent", rec.Location)
	}
}

// TestAuthenticateHeaderShown: a 401's WWW-Authenticate reaches the trace.
func TestAuthenticateHeaderShown(t *testing.T) {
	f := newFakeAPI(t, "")
	f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Token realm="api"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"detail": "Invalid token."}`))
	})
	_, rec := tracedRoot(t, f.client(t, nil))
	if rec.WWWAuthenticate != `Token realm="api"` || rec.BodyExcerpt != "Invalid token." {
		t.Errorf("trace WWW-Authenticate %q, excerpt %q", rec.WWWAuthenticate, rec.BodyExcerpt)
	}
}

// TestPhasesTimed: a traced request records when its phases ended, and a
// second one over the same connection says it reused it.
func TestPhasesTimed(t *testing.T) {
	f := newFakeAPI(t, "")
	f.json("/api/", `{}`)
	c := f.client(t, nil)
	_, first := tracedRoot(t, c)
	if first.Phases.Reused || first.Phases.Connect <= 0 || first.Phases.FirstByte < first.Phases.Connect {
		t.Errorf("first request's phases %+v: want a new connection, connected before the first byte", first.Phases)
	}
	_, second := tracedRoot(t, c)
	if !second.Phases.Reused || second.Phases.Connect != 0 || second.Phases.FirstByte <= 0 {
		t.Errorf("second request's phases %+v: want the connection reused", second.Phases)
	}
}

// TestStoppedWalkNoteFails: the trace marks the note where a walk stopped
// as a failure, and only that one.
func TestStoppedWalkNoteFails(t *testing.T) {
	f := newFakeAPI(t, "")
	f.handle("/api/projects/locations/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") == "2" {
			_, _ = w.Write([]byte(`{"next": "?page=2", "results": [{"id": 2}]}`))
			return
		}
		_, _ = w.Write([]byte(`{"next": "?page=2", "results": [{"id": 1}]}`))
	})
	tr := &Trace{}
	res := f.client(t, nil).Locations(WithTrace(context.Background(), tr), 0, nil)
	if ReasonOf(res.Err) != ReasonPagination {
		t.Fatalf("err %v, want pagination", res.Err)
	}
	reqs, _ := tr.Requests()
	var failed []string
	for _, r := range reqs {
		if r.NoteFailed {
			failed = append(failed, r.Note)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "walk stopped") {
		t.Errorf("failed notes %q, want the stop alone", failed)
	}
}

// TestRedactURLDropsWhatItCannotRead: query pairs Go's parser cannot read
// are dropped, never shown as written, as they could hold a credential.
func TestRedactURLDropsWhatItCannotRead(t *testing.T) {
	for raw, want := range map[string]string{
		"https://h/api/?page=2;token=SECRET":     "https://h/api/",
		"https://h/login/?next=/x&sid=%ZZSECRET": "https://h/login/?next=%2Fx",
		"https://h/api/?page=2&cursor=abc":       "https://h/api/?page=2&cursor=abc",
		"https://h/api/?page=2&token=abc":        "https://h/api/?page=2&token=REDACTED",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := RedactURL(u); got != want || strings.Contains(got, "SECRET") {
			t.Errorf("RedactURL(%s) = %s, want %s", raw, got, want)
		}
	}
}
