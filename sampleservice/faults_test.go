package sampleservice

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	const list = "/api/projects/locations/"
	tests := []struct {
		name     string
		opts     Options
		endpoint string
		fault    Fault
		path     string
		check    func(t *testing.T, r response, base string)
	}{
		{
			name: "status with retry-after", endpoint: EndpointRoot, path: "/api/",
			fault: Fault{Status: 429, RetryAfter: "30"},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 429)
				if got := r.header.Get("Retry-After"); got != "30" {
					t.Errorf("Retry-After %q", got)
				}
				if !json.Valid(r.body) {
					t.Errorf("error body is not JSON: %s", r.body)
				}
			},
		},
		{
			name: "503 with http date", endpoint: EndpointProjects, path: "/api/projects/projects/",
			fault: Fault{Status: 503, RetryAfter: "Wed, 21 Oct 2037 07:28:00 GMT"},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 503)
				if got := r.header.Get("Retry-After"); got != "Wed, 21 Oct 2037 07:28:00 GMT" {
					t.Errorf("Retry-After %q", got)
				}
			},
		},
		{
			name: "401 as Django REST framework answers it", endpoint: EndpointRoot, path: "/api/",
			fault: Fault{Status: 401},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 401)
				if got := r.header.Get("WWW-Authenticate"); got != "Token" {
					t.Errorf("WWW-Authenticate %q, want Token", got)
				}
				if string(r.body) != `{"detail":"Invalid token."}` {
					t.Errorf("body %s", r.body)
				}
			},
		},
		{
			name: "raw body", endpoint: EndpointLocations, path: list,
			fault: Fault{Body: `{"results": 5`},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 200)
				if string(r.body) != `{"results": 5` {
					t.Errorf("body %q", r.body)
				}
			},
		},
		{
			name: "raw body with status", endpoint: EndpointRoot, path: "/api/",
			fault: Fault{Status: 502, Body: "<html>Bad gateway</html>"},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 502)
				if string(r.body) != "<html>Bad gateway</html>" {
					t.Errorf("body %q", r.body)
				}
			},
		},
		{
			name: "truncate list", opts: Options{Locations: 50}, endpoint: EndpointLocations, path: list,
			fault: Fault{Truncate: true},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 200)
				if !errors.Is(r.err, io.ErrUnexpectedEOF) {
					t.Errorf("reading a truncated body: err %v, want unexpected EOF", r.err)
				}
				if len(r.body) == 0 || json.Valid(r.body) {
					t.Errorf("got %d bytes, valid=%v", len(r.body), json.Valid(r.body))
				}
			},
		},
		{
			name: "truncate small object", endpoint: EndpointLocationDetail, path: list + "1/",
			fault: Fault{Truncate: true},
			check: func(t *testing.T, r response, _ string) {
				if !errors.Is(r.err, io.ErrUnexpectedEOF) {
					t.Errorf("err %v, want unexpected EOF", r.err)
				}
			},
		},
		{
			name: "oversize list", opts: Options{Locations: 3, PageSize: 2}, endpoint: EndpointLocations, path: list,
			fault: Fault{OversizeBytes: 1 << 20},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 200)
				if len(r.body) < 1<<20 || r.body[0] != '[' || !json.Valid(r.body) {
					t.Errorf("%d bytes, valid=%v", len(r.body), json.Valid(r.body))
				}
			},
		},
		{
			name: "oversize object", endpoint: EndpointLocationDetail, path: list + "2/",
			fault: Fault{OversizeBytes: 100_000},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, 200)
				var v struct {
					ID      int
					Padding string
				}
				if err := json.Unmarshal(r.body, &v); err != nil || len(r.body) < 100_000 || v.ID != 2 {
					t.Errorf("%d bytes, id %d, err %v", len(r.body), v.ID, err)
				}
			},
		},
		{
			name: "oversize root", endpoint: EndpointRoot, path: "/api/",
			fault: Fault{OversizeBytes: 5000},
			check: func(t *testing.T, r response, _ string) {
				if len(r.body) < 5000 || !json.Valid(r.body) {
					t.Errorf("%d bytes, valid=%v", len(r.body), json.Valid(r.body))
				}
			},
		},
		{
			name: "next to another origin", opts: Options{Locations: 3, PageSize: 2}, endpoint: EndpointLocations, path: list + "?page=2",
			fault: Fault{NextURL: "http://other.example/api/projects/locations/?page=3"},
			check: func(t *testing.T, r response, _ string) {
				env := decode[envelopeBody](t, r.body)
				if env.Next == nil || *env.Next != "http://other.example/api/projects/locations/?page=3" {
					t.Errorf("next %v", env.Next)
				}
			},
		},
		{
			name: "loop on last page", opts: Options{Locations: 3, PageSize: 2}, endpoint: EndpointLocations, path: list + "?page=2",
			fault: Fault{LoopNext: true},
			check: func(t *testing.T, r response, base string) {
				env := decode[envelopeBody](t, r.body)
				if env.Next == nil || *env.Next != base+list {
					t.Errorf("next %v, want %s", env.Next, base+list)
				}
			},
		},
		{
			name: "loop leaves other pages alone", opts: Options{Locations: 3, PageSize: 2}, endpoint: EndpointLocations, path: list,
			fault: Fault{LoopNext: true},
			check: func(t *testing.T, r response, base string) {
				env := decode[envelopeBody](t, r.body)
				if env.Next == nil || *env.Next != base+list+"?page=2" {
					t.Errorf("next %v", env.Next)
				}
			},
		},
		{
			name: "redirect absolute", endpoint: EndpointRoot, path: "/api/",
			fault: Fault{RedirectTo: "http://127.0.0.1:1/api/"},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, http.StatusFound)
				if got := r.header.Get("Location"); got != "http://127.0.0.1:1/api/" {
					t.Errorf("Location %q", got)
				}
			},
		},
		{
			name: "redirect relative", endpoint: EndpointProjects, path: "/api/projects/projects/",
			fault: Fault{RedirectTo: "/elsewhere/"},
			check: func(t *testing.T, r response, _ string) {
				wantStatus(t, r, http.StatusFound)
				if got := r.header.Get("Location"); got != "/elsewhere/" {
					t.Errorf("Location %q", got)
				}
			},
		},
		{
			name: "on other page", opts: Options{Locations: 6, PageSize: 2}, endpoint: EndpointLocations, path: list,
			fault: Fault{Status: 500, OnPage: 2},
			check: func(t *testing.T, r response, _ string) { wantStatus(t, r, 200) },
		},
		{
			name: "on this page", opts: Options{Locations: 6, PageSize: 2}, endpoint: EndpointLocations, path: list + "?page=2",
			fault: Fault{Status: 500, OnPage: 2},
			check: func(t *testing.T, r response, _ string) { wantStatus(t, r, 500) },
		},
		{
			name: "on page 1 of a plain array", opts: Options{Locations: 6}, endpoint: EndpointLocations, path: list + "?page=2",
			fault: Fault{Body: "[]", OnPage: 1},
			check: func(t *testing.T, r response, _ string) {
				if string(r.body) != "[]" {
					t.Errorf("body %.100s", r.body)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := start(t, tt.opts)
			srv.Service.SetFault(tt.endpoint, tt.fault)
			tt.check(t, get(t, srv.URL()+tt.path), srv.URL())

			srv.Service.ClearFaults()
			r := get(t, srv.URL()+tt.path)
			if r.status != 200 || r.err != nil || !json.Valid(r.body) {
				t.Errorf("after ClearFaults: status %d, err %v", r.status, r.err)
			}
		})
	}
}

func wantStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Errorf("status %d, want %d (body %.200s)", r.status, want, r.body)
	}
}

func TestDetailFaultOverridesEndpointFault(t *testing.T) {
	srv := start(t, Options{Locations: 5})
	s := srv.Service
	s.SetFault(EndpointLocationDetail, Fault{Status: 500})
	s.SetDetailFault(3, Fault{Status: 404})
	s.SetDetailFault(9, Fault{Status: 418}) // beyond the list: faults still apply
	for id, want := range map[string]int{"1": 500, "3": 404, "9": 418} {
		if r := get(t, srv.URL()+"/api/projects/locations/"+id+"/"); r.status != want {
			t.Errorf("id %s: status %d, want %d", id, r.status, want)
		}
	}
	s.SetFault(EndpointLocationDetail, Fault{})
	s.SetDetailFault(3, Fault{})
	for id, want := range map[string]int{"1": 200, "3": 200, "9": 418} {
		if r := get(t, srv.URL()+"/api/projects/locations/"+id+"/"); r.status != want {
			t.Errorf("after clearing, id %s: status %d, want %d", id, r.status, want)
		}
	}
}

func TestSetFaultUnknownEndpointPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	New(Options{}).SetFault("location", Fault{Status: 500})
}

func TestPaginationFaultsWalk(t *testing.T) {
	srv := start(t, Options{Locations: 5, PageSize: 2})
	srv.Service.SetFault(EndpointLocations, Fault{Status: 500, OnPage: 2})
	r := get(t, srv.URL()+"/api/projects/locations/")
	next := *decode[envelopeBody](t, r.body).Next
	if r := get(t, next); r.status != 500 {
		t.Errorf("page 2: status %d, want 500", r.status)
	}
	if r := get(t, srv.URL()+"/api/projects/locations/?page=3"); r.status != 200 {
		t.Errorf("page 3: status %d, want 200", r.status)
	}
}

func TestDelay(t *testing.T) {
	srv := start(t, Options{})
	srv.Service.SetFault(EndpointRoot, Fault{Delay: 150 * time.Millisecond})
	t0 := time.Now()
	get(t, srv.URL()+"/api/")
	if d := time.Since(t0); d < 150*time.Millisecond {
		t.Errorf("answered after %v, before the delay", d)
	}

	// A client giving up ends the handler long before the delay would.
	srv.Service.SetFault(EndpointRoot, Fault{Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/api/", nil)
	req.Header.Set("Authorization", "Token "+testKey)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded despite an hour of delay")
	}
	waitFor(t, func() bool { return srv.Service.InFlight() == 0 })
}

func TestLatencyHonoursCancellation(t *testing.T) {
	srv := start(t, Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/api/", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded despite an hour of latency")
	}
	waitFor(t, func() bool { return srv.Service.InFlight() == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOversizeIsStreamed(t *testing.T) {
	srv := start(t, Options{})
	srv.Service.SetFault(EndpointLocations, Fault{OversizeBytes: 1 << 40}) // a terabyte
	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/api/projects/locations/", nil)
	req.Header.Set("Authorization", "Token "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.CopyN(io.Discard, resp.Body, 4<<20)
	resp.Body.Close()
	if n != 4<<20 || err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	waitFor(t, func() bool { return srv.Service.InFlight() == 0 })
	if resp.Header.Get("Content-Length") != "" || !strings.Contains(strings.Join(resp.TransferEncoding, ","), "chunked") {
		t.Errorf("oversize body should be streamed chunked: %v %v", resp.Header, resp.TransferEncoding)
	}
}
