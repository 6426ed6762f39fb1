package sampleservice

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServerURL(t *testing.T) {
	srv := start(t, Options{Prefix: "/deploy"})
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/deploy") {
		t.Errorf("URL %q", srv.URL())
	}
	if srv.URL() != "http://"+srv.Addr()+"/deploy" {
		t.Errorf("URL %q and Addr %q disagree", srv.URL(), srv.Addr())
	}
}

func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	if o.Projects != 5 || o.Locations != 300 || o.PageSize != 50 ||
		o.Latency != 5*time.Millisecond || o.Jitter != 20*time.Millisecond {
		t.Errorf("DefaultOptions %+v", o)
	}
	srv := start(t, o)
	if got := walk(t, srv.URL()+"/api/projects/locations/"); len(got) != 300 {
		t.Errorf("%d locations", len(got))
	}
}

// TestCloseEndsRequests checks that Close neither waits for nor leaks
// handlers stuck in a delay or a stream.
func TestCloseEndsRequests(t *testing.T) {
	srv, err := Start(Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	srv.Service.SetFault(EndpointRoot, Fault{Delay: time.Hour})
	srv.Service.SetFault(EndpointLocations, Fault{OversizeBytes: 1 << 40})

	errs := make(chan error, 2)
	for _, path := range []string{"/api/", "/api/projects/locations/"} {
		go func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL()+path, nil)
			req.Header.Set("Authorization", "Token "+testKey)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1)) // read a little, then stall
				time.Sleep(200 * time.Millisecond)
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	waitFor(t, func() bool { return srv.Service.InFlight() == 2 })

	t0 := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The handlers would take an hour: Close returning at all shows it
	// ended them instead of waiting. The bound only turns a hang into a
	// failure; it is far above the second Close allows for a graceful
	// shutdown, so a busy machine cannot trip it.
	if d := time.Since(t0); d > time.Minute {
		t.Errorf("Close took %v", d)
	}
	if n := srv.Service.InFlight(); n != 0 {
		t.Errorf("%d handlers running after Close", n)
	}
	for range 2 {
		if err := <-errs; err == nil {
			t.Error("a request cut short by Close succeeded")
		}
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get(srv.URL() + "/api/"); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("server still answers after Close: %v", err)
	}
}
