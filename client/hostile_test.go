package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/common/config"
)

// traceSize is what a trace's records keep: the records themselves and
// their text, the shared "not kept" marker of excerpts counted once.
func traceSize(reqs []TraceRequest) int {
	n := len(reqs) * int(unsafe.Sizeof(TraceRequest{}))
	for _, r := range reqs {
		for _, s := range []string{r.URL, r.Error, r.Note, r.BodyExcerpt, r.ContentType, r.Location, r.WWWAuthenticate, r.RetryAfter} {
			if s != excerptNotKept {
				n += len(s)
			}
		}
	}
	return n
}

// maxTraceSize bounds traceSize for any service: the records, their text,
// their excerpts and the failed notes of two walks.
const maxTraceSize = maxTraceRequests*int(unsafe.Sizeof(TraceRequest{})) + maxTraceTextBytes + maxTraceExcerptBytes + 2*maxShown

// TestLongNextLinksKeepTheTraceBounded: a service whose every page names a
// 16 KiB next link (same origin, valid) fills no more of a poll's trace
// than any other; before, each page kept its link twice, 32 KiB a page.
func TestLongNextLinksKeepTheTraceBounded(t *testing.T) {
	f := newFakeAPI(t, "")
	pad := strings.Repeat("p", maxStringValue-200)
	f.handle("/api/projects/projects/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("page"))
		fmt.Fprintf(w, `{"next": "%s/api/projects/projects/?page=%d&token=x&pad=%s", "results": [{"id": 1}]}`, f.srv.URL, n+1, pad)
	})
	c := f.client(t, func(cfg *Config) { cfg.MaxPages = 200 })
	tr := &Trace{}
	res := c.Projects(WithTrace(context.Background(), tr))
	if ReasonOf(res.Err) != ReasonPagination || res.Pages != 200 {
		t.Fatalf("pages %d, err %v; want the page limit", res.Pages, res.Err)
	}
	reqs, dropped := tr.Requests()
	// Each record kept holds a link cut to maxShown bytes, so the text
	// bound keeps at most one record for each maxShown bytes of it.
	bound := maxTraceTextBytes + maxShown + (maxTraceTextBytes/maxShown+1)*int(unsafe.Sizeof(TraceRequest{}))
	if n := traceSize(reqs); n > bound || n > maxTraceSize {
		t.Errorf("the trace keeps %d bytes, more than %d", n, bound)
	}
	if last := reqs[len(reqs)-1]; dropped == 0 || !last.NoteFailed || !strings.Contains(last.Note, "page limit") {
		t.Errorf("%d records dropped, the last one kept is %+v; want the failed walk's note", dropped, last)
	}
	for _, r := range reqs {
		if len(r.URL) > maxShown || len(r.Note) > maxShown || len(r.Error) > maxShown {
			t.Fatalf("a record keeps a URL of %d bytes, a note of %d, an error of %d; want at most %d each", len(r.URL), len(r.Note), len(r.Error), maxShown)
		}
	}
	if len(res.Err.Error()) > maxShown+200 {
		t.Errorf("an error of %d bytes", len(res.Err.Error()))
	}
}

// TestResponseHeadersAreBounded: an answer whose headers pass 64 KiB is
// too_large, read no further; smaller ones are read as usual.
func TestResponseHeadersAreBounded(t *testing.T) {
	for _, tc := range []struct {
		kib    int
		reason Reason
	}{{32, ""}, {100, ReasonTooLarge}, {8 << 10, ReasonTooLarge}} {
		t.Run(strconv.Itoa(tc.kib)+"KiB", func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/", func(w http.ResponseWriter, _ *http.Request) {
				for i := range tc.kib {
					w.Header().Set("X-Pad-"+strconv.Itoa(i), strings.Repeat("h", 1000))
				}
				_, _ = w.Write([]byte(`{}`))
			})
			obs := &recordingObserver{}
			res := f.client(t, func(cfg *Config) { cfg.Observer = obs }).Root(context.Background())
			if ReasonOf(res.Err) != tc.reason {
				t.Fatalf("reason %q (err %v), want %q", ReasonOf(res.Err), res.Err, tc.reason)
			}
			if tc.reason != "" && obs.errors[EndpointRoot][tc.reason] != 1 {
				t.Errorf("observer saw %v", obs.errors)
			}
		})
	}
}

// leaks tells whether text shows a run of 12 characters of secret, or
// all of a shorter one, whatever their letter case.
func leaks(text, secret string) bool {
	t, s := strings.ToLower(text), strings.ToLower(secret)
	if len(s) < secretRun {
		return strings.Contains(t, s)
	}
	for i := 0; i+secretRun <= len(s); i++ {
		if strings.Contains(t, s[i:i+secretRun]) {
			return true
		}
	}
	return false
}

// The secrets of the module of TestNoSecretIsShown, each made of
// characters a host name may hold, so a service can echo it as one.
const (
	headerSecret     = "hdr-secret-0123456789abcdef"
	headerFileSecret = "file-secret-9876543210zyx"
	proxyPassword    = "proxy-pass-7777-abcdefgh"
	connectSecret    = "connect-secret-5555-qrstuv"
)

// TestNoSecretIsShown: whatever a service echoes of a module's secrets
// (the key, header secrets and files, the proxy's password and CONNECT
// headers), in any letter case or in part, and wherever (a body, a
// header, a redirect's host, a next link), no 12 characters of it reach
// an error or the trace.
func TestNoSecretIsShown(t *testing.T) {
	secrets := []string{testKey, headerSecret, headerFileSecret, proxyPassword, connectSecret}
	file := filepath.Join(t.TempDir(), "header")
	if err := os.WriteFile(file, []byte(headerFileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	forms := map[string]func(string) string{
		"as sent":    func(s string) string { return s },
		"upper case": strings.ToUpper,
		"mixed case": func(s string) string { return strings.ToUpper(s[:len(s)/2]) + s[len(s)/2:] },
		"in part":    func(s string) string { return strings.ToUpper(s[2 : 2+secretRun+3]) },
	}
	// The service is reached through a proxy, which echoes what the
	// scenario asks for.
	var echo func(w http.ResponseWriter, r *http.Request, s string)
	var shown string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != headerSecret || r.Header.Get("X-File") != headerFileSecret || r.Header.Get("Authorization") != "Token "+testKey {
			t.Errorf("the request lacks the module's headers")
		}
		if got, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Proxy-Authorization"), "Basic ")); string(got) != "u:"+proxyPassword {
			t.Errorf("Proxy-Authorization %q", got)
		}
		echo(w, r, shown)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	proxyURL.User = url.UserPassword("u", proxyPassword)
	base, _ := url.Parse("http://deploy.invalid/")
	c, err := New(Config{BaseURL: base, HTTPClientConfig: config.HTTPClientConfig{
		Authorization: &config.Authorization{Type: "Token", Credentials: config.Secret(testKey)},
		HTTPHeaders: &config.Headers{Headers: map[string]config.Header{
			"X-Api-Key": {Secrets: []config.Secret{headerSecret}},
			"X-File":    {Files: []string{file}},
		}},
		ProxyConfig: config.ProxyConfig{
			ProxyURL:           config.URL{URL: proxyURL},
			ProxyConnectHeader: config.ProxyHeader{"X-Connect": {config.Secret(connectSecret)}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	scenarios := map[string]func(w http.ResponseWriter, r *http.Request, s string){
		"a 401 body and WWW-Authenticate": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.Header().Set("WWW-Authenticate", `Token realm="`+s+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"detail": "Invalid token %s."}`, s)
		},
		"a plain error page": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "<h1>upstream said %s</h1>", s)
		},
		"Content-Encoding": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.Header().Set("Content-Encoding", s)
			_, _ = w.Write([]byte(`{}`))
		},
		"Content-Type of an invalid body": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.Header().Set("Content-Type", "text/"+s)
			_, _ = w.Write([]byte(s))
		},
		"Retry-After": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.Header().Set("Retry-After", s)
			w.WriteHeader(http.StatusBadRequest)
		},
		"a redirect's host": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.Header().Set("Location", "http://"+s+".example.com/login/?next="+s)
			w.WriteHeader(http.StatusFound)
		},
		"a same-origin redirect's path": func(w http.ResponseWriter, r *http.Request, s string) {
			if strings.Contains(r.URL.Path, "elsewhere") {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, "no page at %s", r.URL)
				return
			}
			w.Header().Set("Location", "/elsewhere/"+s+"/?q="+s)
			w.WriteHeader(http.StatusFound)
		},
		"a next link's host": func(w http.ResponseWriter, _ *http.Request, s string) {
			fmt.Fprintf(w, `{"next": "http://%s.example.com/", "results": []}`, s)
		},
		"a next link's path": func(w http.ResponseWriter, r *http.Request, s string) {
			if r.URL.Query().Has("q") {
				_, _ = w.Write([]byte(`{"next": "x", "results": []}`))
				return
			}
			fmt.Fprintf(w, `{"next": "/api/projects/projects/%s/?q=%s", "results": []}`, s, s)
		},
		"a Link header": func(w http.ResponseWriter, _ *http.Request, s string) {
			w.Header().Set("Link", "<http://"+s+".example.com/>; rel=next")
			_, _ = w.Write([]byte(`[]`))
		},
	}
	for name, scenario := range scenarios {
		for formName, form := range forms {
			for _, secret := range secrets {
				echo, shown = scenario, form(secret)
				tr := &Trace{}
				ctx := WithTrace(context.Background(), tr)
				results := []Result{c.Root(ctx), c.Projects(ctx).Result}
				var texts []string
				for _, res := range results {
					if res.Err != nil {
						texts = append(texts, res.Err.Error())
					}
				}
				reqs, _ := tr.Requests()
				for _, r := range reqs {
					texts = append(texts, r.URL, r.Error, r.Note, r.BodyExcerpt, r.ContentType, r.Location, r.WWWAuthenticate, r.RetryAfter)
				}
				all := strings.Join(texts, "\n")
				for _, s := range secrets {
					if leaks(all, s) {
						t.Errorf("%s, %s: a secret shows in:\n%s", name, formName, all)
					}
				}
				if !strings.Contains(all, "<secret>") && formName != "in part" {
					t.Errorf("%s, %s: nothing redacted in:\n%s", name, formName, all)
				}
			}
		}
	}
}

// TestRedactor checks the redaction of text alone: every occurrence of a
// secret, in any case, and every run of 12 of its characters; a short
// secret whole; a secret under 4 characters not at all.
func TestRedactor(t *testing.T) {
	const long = "Abcdefghijklmnop-0123456789" // 27 characters
	s := &secrets{fixed: []string{long, "pw42x", "ab", ""}}
	for in, want := range map[string]string{
		"":                                          "",
		"nothing here":                              "nothing here",
		"key " + long + " end":                      "key <secret> end",
		"KEY " + strings.ToUpper(long):              "KEY <secret>",
		"part " + long[3:15] + "!":                  "part <secret>!",
		"short part " + long[3:14] + "!":            "short part " + long[3:14] + "!",
		"two " + long + long[:20] + " more":         "two <secret> more",
		"escaped " + long[:13] + `\x1b` + long[13:]: "escaped <secret>" + `\x1b` + "<secret>",
		"pw: PW42X and pw42x, ab":                   "pw: <secret> and <secret>, ab",
		"kelvin " + strings.Replace(long, "k", "\u212a", 1): "kelvin <secret>",
		"é " + long + " é": "é <secret> é",
	} {
		if got := s.clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
	var none *secrets
	if got := none.clean("x " + long); got != "x "+long {
		t.Errorf("no secrets: %q", got)
	}
}
