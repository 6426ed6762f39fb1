package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"
)

// TestHoldOffBelongsToTheOrigin: a Client built after the one that met a
// 429, for the same origin (another path prefix), finds the hold-off in force and sends nothing; one of another
// origin is not held off.
func TestHoldOffBelongsToTheOrigin(t *testing.T) {
	f := newFakeAPI(t, "")
	f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	f.json("/deploy/api/", `{}`)
	store := NewHoldOffs()
	first := f.client(t, func(c *Config) { c.HoldOffs = store })
	if r := first.Root(context.Background()); r.Status != http.StatusTooManyRequests {
		t.Fatalf("root answered %d, want 429", r.Status)
	}
	first.Close()

	u, _ := url.Parse(f.srv.URL + "/deploy")
	again := f.client(t, func(c *Config) { c.BaseURL, c.HoldOffs = u, store })
	r := again.Root(context.Background())
	if !errors.Is(r.Err, ErrHeldOff) || r.Status != http.StatusTooManyRequests {
		t.Errorf("a new client of the origin: status %d, err %v; want held off with 429", r.Status, r.Err)
	}
	if n := f.hitCount("/deploy/api/"); n != 0 {
		t.Errorf("%d requests sent to the origin during its hold-off", n)
	}
	if until, _ := f.client(t, nil).HoldOff(); !until.IsZero() {
		t.Error("a client with a store of its own is held off")
	}
}

// TestHoldOffsAreBounded: the store keeps at most maxHoldOffs origins; a
// new one drops those that have ended, or else the one ending soonest.
func TestHoldOffsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHoldOffs()
		now := time.Now()
		for i := range maxHoldOffs {
			h.extend(fmt.Sprint("http://h:", i), now.Add(time.Hour+time.Duration(i)*time.Second), 429)
		}
		h.extend("http://new:1", now.Add(3*time.Hour), 503)
		if n := len(h.m); n != maxHoldOffs {
			t.Fatalf("%d hold-offs kept, want %d", n, maxHoldOffs)
		}
		if _, ok := h.m["http://h:0"]; ok {
			t.Error("the hold-off ending soonest was kept over a new one")
		}
		if got := h.m["http://h:1"]; got.status != 429 {
			t.Error("a hold-off other than the soonest was dropped")
		}
		time.Sleep(time.Hour + time.Duration(maxHoldOffs/2)*time.Second)
		h.extend("http://later:1", time.Now().Add(time.Minute), 429)
		if n, want := len(h.m), maxHoldOffs/2+1; n != want {
			t.Errorf("%d hold-offs kept once half had ended, want %d", n, want)
		}
	})
}
