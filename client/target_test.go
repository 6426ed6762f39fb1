package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParseTargetBounds(t *testing.T) {
	label := func(n int) string { return strings.Repeat("a", n) }
	host253 := strings.Repeat(label(63)+".", 3) + label(61) // 253 bytes
	for raw, want := range map[string]string{
		"http://[::ffff:127.0.0.1%25lo]:8080/deploy":                           "zone",
		"http://[::1%25x]/":                                                    "zone",
		"http://[fe80::1%25eth0]":                                              "zone",
		"https://" + label(64) + ".example.com":                                "label longer than 63",
		"https://" + host253 + "a":                                             "longer than 253",
		"https://h/" + strings.Repeat("p", MaxTargetBytes-len("https://h/")+1): "longer than 2048 bytes",
		"https://" + label(500_000):                                            "longer than 2048 bytes",
	} {
		u, err := ParseTarget(raw)
		if err == nil {
			t.Errorf("%.80s: accepted as %.80s", raw, u)
			continue
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), label(20)) {
			t.Errorf("%.80s: error %q, want one with %q that does not repeat the target", raw, err, want)
		}
	}
	for _, raw := range []string{
		"https://" + label(63) + ".example.com",
		"https://" + host253,
		"https://h/" + strings.Repeat("p", MaxTargetBytes-len("https://h/")),
	} {
		if _, err := ParseTarget(raw); err != nil {
			t.Errorf("%.80s: %v", raw, err)
		}
	}
}

// FuzzParseTarget: whatever a caller sends, an accepted target is within
// the bounds, has no zone, credentials, query or fragment, and is spelt
// one way: parsing its spelling gives it back.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"https://deploy.example.com", "HTTP://H:080/a/", "http://[::ffff:127.0.0.1%25lo]:8080/deploy",
		"http://[::1]:9000", "http://2130706433/", "https://h/de%2Fploy/", "https://h/%64eploy",
		"https://u:p@h", "https://h?x=1", "https://h#f", "http://*.example.com:*/x", "https://h:/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseTarget(raw)
		if err != nil {
			return
		}
		host := u.Hostname()
		switch {
		case len(raw) > MaxTargetBytes, !HostWithinBounds(host), strings.Contains(host, "%"):
			t.Fatalf("%q: accepted beyond the bounds or with a zone: %s", raw, u)
		case u.User != nil, u.RawQuery != "", u.ForceQuery, u.Fragment != "", u.Scheme != "http" && u.Scheme != "https":
			t.Fatalf("%q: accepted as %s", raw, u)
		}
		again, err := ParseTarget(u.String())
		if err != nil || again.String() != u.String() || again.Host != u.Host {
			t.Fatalf("%q: spelt %s, which parses as %v (%v)", raw, u, again, err)
		}
	})
}

// TestEscapedBasePathSentAsGiven: a base path with an escaped slash is
// requested as given, whether it came from --api.url or from /probe's
// spelling of a target, never decoded into two segments.
func TestEscapedBasePathSentAsGiven(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"id":5}`))
	}))
	defer srv.Close()
	asGiven, _ := url.Parse(srv.URL + "/de%2Fploy")
	probed, err := ParseTarget(srv.URL + "/de%2fploy/")
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []*url.URL{asGiven, probed} {
		got = nil
		c, err := New(Config{BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		c.Root(context.Background())
		c.LocationDetail(context.Background(), 5, nil)
		c.Close()
		if want := []string{"/de%2Fploy/api/", "/de%2Fploy/api/projects/locations/5/"}; !slices.Equal(got, want) {
			t.Errorf("base %s: requested %q, want %q", base, got, want)
		}
	}
}
