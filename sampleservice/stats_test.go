package sampleservice

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRequestRecording(t *testing.T) {
	srv := start(t, Options{Key: testKey, Locations: 3, PageSize: 2})
	s := srv.Service
	get(t, srv.URL()+"/api/")
	get(t, srv.URL()+"/api/projects/locations/?page=2")
	get(t, srv.URL()+"/api/projects/locations/1/")
	get(t, srv.URL()+"/api/projects/locations/1/")
	get(t, srv.URL()+"/nowhere/")
	if s.SawWrongAuth() {
		t.Error("SawWrongAuth after correct requests only")
	}
	for endpoint, want := range map[string]int64{
		EndpointRoot: 1, EndpointProjects: 0, EndpointLocations: 1, EndpointLocationDetail: 2, "": 1,
	} {
		if got := s.Requests(endpoint); got != want {
			t.Errorf("Requests(%q) = %d, want %d", endpoint, got, want)
		}
	}
	if got := s.TotalRequests(); got != 5 {
		t.Errorf("TotalRequests = %d, want 5", got)
	}

	log := s.Log()
	if len(log) != 5 {
		t.Fatalf("%d records, want 5", len(log))
	}
	want := RequestRecord{Method: "GET", Path: "/api/projects/locations/", RawQuery: "page=2",
		Endpoint: EndpointLocations, AuthPresent: true, AuthOK: true,
		Accept: "application/json", UserAgent: "sampleservice-test/1", AcceptEncoding: "gzip"}
	got := log[1]
	got.Time = time.Time{}
	if got != want {
		t.Errorf("record\n got %+v\nwant %+v", got, want)
	}
	if !strings.Contains(fmt.Sprintf("%+v", log), "nowhere") || strings.Contains(fmt.Sprintf("%+v", log), testKey) {
		t.Error("log should hold paths but never the key")
	}

	do(t, context.Background(), "GET", srv.URL()+"/api/", "Token wrong")
	do(t, context.Background(), "GET", srv.URL()+"/api/", "")
	log = s.Log()
	if r := log[len(log)-2]; !r.AuthPresent || r.AuthOK {
		t.Errorf("wrong key recorded as %+v", r)
	}
	if r := log[len(log)-1]; r.AuthPresent || r.AuthOK {
		t.Errorf("missing key recorded as %+v", r)
	}
	if !s.SawWrongAuth() {
		t.Error("SawWrongAuth false after a wrong key")
	}

	s.ResetStats()
	if s.TotalRequests() != 0 || s.Requests(EndpointRoot) != 0 || len(s.Log()) != 0 || s.SawWrongAuth() || s.MaxInFlight() != 0 {
		t.Error("ResetStats left something behind")
	}
}

func TestLogIsBounded(t *testing.T) {
	s := New(Options{Key: testKey})
	for i := range maxLog + 10 {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://x/api/?n=%d", i), nil)
		s.stats.begin(req, EndpointRoot, true)
		s.stats.end()
	}
	log := s.Log()
	if len(log) != maxLog || log[0].RawQuery != "n=10" || log[maxLog-1].RawQuery != fmt.Sprintf("n=%d", maxLog+9) {
		t.Errorf("%d records, first %q, last %q", len(log), log[0].RawQuery, log[len(log)-1].RawQuery)
	}
	if s.TotalRequests() != maxLog+10 {
		t.Errorf("TotalRequests %d", s.TotalRequests())
	}
}

func TestMaxInFlight(t *testing.T) {
	srv := start(t, Options{})
	// The gate keeps all of them in flight at once, however slowly they
	// come.
	g := srv.Service.Hold(EndpointRoot)
	const n = 6
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { get(t, srv.URL()+"/api/") })
	}
	await(t, g, func(c GateCounts) bool { return c.Held == n })
	if got := srv.Service.InFlight(); got != n {
		t.Errorf("InFlight %d, want %d", got, n)
	}
	g.Open()
	wg.Wait()
	if got := srv.Service.MaxInFlight(); got != n {
		t.Errorf("MaxInFlight %d, want %d", got, n)
	}
	if got := srv.Service.InFlight(); got != 0 {
		t.Errorf("InFlight %d after all answered", got)
	}
}
