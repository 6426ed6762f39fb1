package sampleservice

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const testKey = "test-key"

// start runs a service for one test and closes it afterwards.
func start(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.Key == "" {
		opts.Key = testKey
	}
	srv, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := srv.Service.InFlight(); n != 0 {
			t.Errorf("%d handlers still running after Close", n)
		}
	})
	return srv
}

// response is a fully read answer.
type response struct {
	status int
	header http.Header
	body   []byte
	err    error // from reading the body
}

// noRedirects lets tests see redirects instead of following them.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// get fetches url with the test key, failing the test on transport errors.
func get(t *testing.T, url string) response {
	t.Helper()
	return do(t, context.Background(), http.MethodGet, url, "Token "+testKey)
}

func do(t *testing.T, ctx context.Context, method, url, auth string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sampleservice-test/1")
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, body, err}
}

// envelopeBody is the paginated shape, with count optional.
type envelopeBody struct {
	Count    *int64            `json:"count"`
	Next     *string           `json:"next"`
	Previous *string           `json:"previous"`
	Results  []json.RawMessage `json:"results"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %.200q: %v", b, err)
	}
	return v
}

func ids(t *testing.T, entries []json.RawMessage) []int {
	t.Helper()
	out := make([]int, len(entries))
	for i, e := range entries {
		out[i] = decode[struct{ ID int }](t, e).ID
	}
	return out
}

// walk reads a whole list, following next links when the body is an
// envelope, and returns the ids in order.
func walk(t *testing.T, url string) []int {
	t.Helper()
	var all []int
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("too many pages")
		}
		r := get(t, url)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: status %d: %s", url, r.status, r.body)
		}
		if strings.HasPrefix(string(r.body), "[") {
			return append(all, ids(t, decode[[]json.RawMessage](t, r.body))...)
		}
		env := decode[envelopeBody](t, r.body)
		all = append(all, ids(t, env.Results)...)
		if env.Next == nil {
			return all
		}
		url = *env.Next
	}
}
