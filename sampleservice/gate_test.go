package sampleservice

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// await waits for cond on g, failing the test after a minute: far longer
// than anything here takes, so only a broken gate hits it.
func await(t *testing.T, g *Gate, cond func(GateCounts) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := g.Await(ctx, cond); err != nil {
		t.Fatal(err)
	}
}

func TestGateHoldsUntilLet(t *testing.T) {
	srv := start(t, Options{})
	g := srv.Service.Hold(EndpointRoot)
	answered := make(chan int, 3)
	for range 3 {
		go func() { answered <- get(t, srv.URL()+"/api/").status }()
	}
	await(t, g, func(c GateCounts) bool { return c.Held == 3 })
	if n := srv.Service.InFlight(); n != 3 {
		t.Errorf("%d requests in flight, want the 3 held", n)
	}
	if n := srv.Service.Requests(EndpointRoot); n != 3 {
		t.Errorf("%d requests counted, want the 3 held", n)
	}
	// Other endpoints pass.
	if r := get(t, srv.URL()+"/api/projects/projects/"); r.status != http.StatusOK {
		t.Errorf("projects: %d", r.status)
	}
	select {
	case s := <-answered:
		t.Fatalf("a held request was answered (%d)", s)
	default:
	}

	g.Let(1)
	if s := <-answered; s != http.StatusOK {
		t.Errorf("let through: %d", s)
	}
	if c := g.Counts(); c != (GateCounts{Arrived: 3, Passed: 1, Held: 2}) {
		t.Errorf("counts %+v after letting one through", c)
	}
	g.Open()
	for range 2 {
		<-answered
	}
	// An open gate lets later requests through too.
	if r := get(t, srv.URL()+"/api/"); r.status != http.StatusOK {
		t.Errorf("after Open: %d", r.status)
	}
	if c := g.Counts(); c != (GateCounts{Arrived: 4, Passed: 4}) {
		t.Errorf("counts %+v after opening", c)
	}
}

func TestGateLetsFutureRequestsThrough(t *testing.T) {
	srv := start(t, Options{})
	g := srv.Service.Hold()
	g.Let(2)
	for _, path := range []string{"/api/", "/api/projects/locations/"} {
		if r := get(t, srv.URL()+path); r.status != http.StatusOK {
			t.Errorf("%s: %d", path, r.status)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		get(t, srv.URL()+"/api/projects/locations/3/")
	}()
	await(t, g, func(c GateCounts) bool { return c.Held == 1 })
	g.Open()
	<-done
}

func TestGateAbandonedByTheClient(t *testing.T) {
	srv := start(t, Options{})
	g := srv.Service.Hold(EndpointLocations)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/api/projects/locations/", nil)
		req.Header.Set("Authorization", "Token "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errs <- err
	}()
	await(t, g, func(c GateCounts) bool { return c.Held == 1 })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("request: %v, want cancelled", err)
	}
	await(t, g, func(c GateCounts) bool { return c.Abandoned == 1 && c.Held == 0 })
	waitFor(t, func() bool { return srv.Service.InFlight() == 0 })
}

func TestDetailGate(t *testing.T) {
	srv := start(t, Options{Locations: 10})
	all := srv.Service.Hold(EndpointLocationDetail)
	all.Open()
	one := newGate()
	srv.Service.setDetailGate(4, one)
	if r := get(t, srv.URL()+"/api/projects/locations/3/"); r.status != http.StatusOK {
		t.Errorf("location 3: %d", r.status)
	}
	done := make(chan int, 1)
	go func() { done <- get(t, srv.URL()+"/api/projects/locations/4/").status }()
	await(t, one, func(c GateCounts) bool { return c.Held == 1 })
	srv.Service.setDetailGate(4, nil) // removing a gate lets no one through
	if c := one.Counts(); c.Held != 1 {
		t.Errorf("counts %+v", c)
	}
	one.Open()
	if s := <-done; s != http.StatusOK {
		t.Errorf("location 4: %d", s)
	}
	if c := all.Counts(); c.Arrived != 1 {
		t.Errorf("the endpoint-wide gate saw %d requests, want 1: the detail gate replaces it", c.Arrived)
	}
	srv.Service.setGate(EndpointLocationDetail, nil)
	if r := get(t, srv.URL()+"/api/projects/locations/4/"); r.status != http.StatusOK {
		t.Errorf("location 4 without gates: %d", r.status)
	}
}

func TestAwaitEndsWithItsContext(t *testing.T) {
	g := newGate()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.awaitHeld(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Await: %v", err)
	}
}

func TestSetGateRefusesUnknownEndpoints(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for an unknown endpoint")
		}
	}()
	New(Options{}).setGate("location", newGate())
}
