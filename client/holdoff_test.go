package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/common/config"
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

// TestHoldOffBelongsToTheCredentials: a 429 holds off only the clients that send
// the origin the credentials that met it: not one without credentials, nor one
// with another key. The store keeps no secret.
func TestHoldOffBelongsToTheCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); strings.HasPrefix(r.URL.Path, "/open/") && auth == "" || auth == "Token key-a" {
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	type who struct{ prefix, key string }
	for _, tt := range []struct {
		name       string
		met        who
		held, free []who
	}{
		{"a path without credentials", who{"/open", ""}, []who{{"", ""}}, []who{{"", "key-b"}, {"/open", "key-b"}}},
		{"one key of several", who{"", "key-a"}, []who{{"/deploy", "key-a"}}, []who{{"", "key-b"}, {"", ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := NewHoldOffs()
			newClient := func(w who) *Client {
				u, _ := url.Parse(srv.URL + w.prefix)
				cfg := Config{BaseURL: u, HoldOffs: store}
				if w.key != "" {
					cfg.HTTPClientConfig.Authorization = &config.Authorization{Type: "Token", Credentials: config.Secret(w.key)}
				}
				c, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				return c
			}
			if r := newClient(tt.met).Root(context.Background()); r.Status != http.StatusTooManyRequests {
				t.Fatalf("root answered %d, want 429", r.Status)
			}
			for _, w := range tt.held {
				if r := newClient(w).Root(context.Background()); !errors.Is(r.Err, ErrHeldOff) {
					t.Errorf("%+v, the same credentials: %v, want held off", w, r.Err)
				}
			}
			for _, w := range tt.free {
				if r := newClient(w).Root(context.Background()); r.Err != nil {
					t.Errorf("%+v, other credentials: %v, want an answer", w, r.Err)
				}
			}
			for k := range store.m {
				if strings.Contains(k, "key-") {
					t.Errorf("the store keeps a key in %q", k)
				}
			}
		})
	}
}

// TestHoldOffsAreBounded: the store keeps at most maxHoldOffs origins; a
// new one drops the one ending soonest.
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
		if _, ok := h.m["http://h:1"]; ok || len(h.m) != maxHoldOffs {
			t.Errorf("%d hold-offs kept once half had ended, want %d without the one ended first", len(h.m), maxHoldOffs)
		}
	})
}
