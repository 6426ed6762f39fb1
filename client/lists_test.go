package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/common/config"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// startSample runs the sample service for one test and returns a client
// of it.
func startSample(t *testing.T, opts sampleservice.Options, mod func(*Config)) (*sampleservice.Server, *Client) {
	t.Helper()
	opts.Key = testKey
	srv, err := sampleservice.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		BaseURL:          u,
		HTTPClientConfig: config.HTTPClientConfig{Authorization: &config.Authorization{Type: "Token", Credentials: testKey}},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv, c
}

// TestHeaderPagination counts plain arrays paged by Link headers, as Django
// REST framework's header-based pagination serves them: every page counts.
func TestHeaderPagination(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts sampleservice.Options
	}{
		{"absolute links", sampleservice.Options{}},
		{"relative links", sampleservice.Options{RelativeLinks: true}},
		{"relative links below a prefix", sampleservice.Options{RelativeLinks: true, Prefix: "/deploy"}},
		{"gzip", sampleservice.Options{Gzip: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Locations, opts.Projects, opts.PageSize, opts.LinkHeader = 2276, 120, 100, true
			srv, c := startSample(t, opts, nil)
			var streamed []int64
			res := c.Locations(context.Background(), 5, func(ids []int64) { streamed = append(streamed, ids...) })
			if res.Err != nil {
				t.Fatalf("Locations: %v", res.Err)
			}
			if res.Count != 2276 || res.Pages != 23 || fmt.Sprint(res.IDs) != "[1 2 3 4 5]" || fmt.Sprint(streamed) != "[1 2 3 4 5]" {
				t.Errorf("count %d pages %d ids %v streamed %v, want 2276, 23, [1 2 3 4 5]", res.Count, res.Pages, res.IDs, streamed)
			}
			p := c.Projects(context.Background())
			if p.Err != nil || p.Count != 120 || p.Pages != 2 {
				t.Errorf("Projects: count %d pages %d err %v, want 120, 2", p.Count, p.Pages, p.Err)
			}
			if srv.Service.SawWrongAuth() {
				t.Error("a page was requested without the key")
			}
		})
	}
}

// TestNextResolvedAgainstTheFinalURL follows relative next links, in the
// body and in the Link header, from the page's URL after a redirect, as
// RFC 3986 says.
func TestNextResolvedAgainstTheFinalURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		page func(w http.ResponseWriter, page string)
	}{
		{"envelope", func(w http.ResponseWriter, page string) {
			if page == "" {
				fmt.Fprint(w, `{"next": "?page=2", "results": [{"id": 1}, {"id": 2}]}`)
				return
			}
			fmt.Fprint(w, `{"next": null, "results": [{"id": 3}]}`)
		}},
		{"Link header", func(w http.ResponseWriter, page string) {
			if page == "" {
				w.Header().Set("Link", `<?page=2>; rel="next"`)
				fmt.Fprint(w, `[{"id": 1}, {"id": 2}]`)
				return
			}
			fmt.Fprint(w, `[{"id": 3}]`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/v2/locations/", http.StatusMovedPermanently)
			})
			f.handle("/v2/locations/", func(w http.ResponseWriter, r *http.Request) {
				tc.page(w, r.URL.Query().Get("page"))
			})
			res := f.client(t, nil).Locations(context.Background(), 0, nil)
			if res.Err != nil || res.Count != 3 || res.Pages != 2 {
				t.Errorf("count %d pages %d err %v, want 3, 2", res.Count, res.Pages, res.Err)
			}
		})
	}
}

// TestEnvelopeAndLinkHeader: the body's next, when the body has one (even
// null), wins over a Link header; an envelope without "next" defers to it.
func TestEnvelopeAndLinkHeader(t *testing.T) {
	for _, tc := range []struct {
		name         string
		page1        string
		count, pages int64
	}{
		{"next null wins over the header", `{"next": null, "results": [{"id": 1}]}`, 1, 1},
		{"next wins over the header", `{"next": "?page=2", "results": [{"id": 1}]}`, 2, 2},
		{"no next: the header names it", `{"results": [{"id": 1}]}`, 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Query().Get("page") {
				case "":
					w.Header().Set("Link", `<?page=9>; rel="next"`)
					fmt.Fprint(w, tc.page1)
				case "2":
					fmt.Fprint(w, `{"next": null, "results": [{"id": 2}]}`)
				case "9":
					fmt.Fprint(w, entries(2, 10))
				}
			})
			res := f.client(t, nil).Locations(context.Background(), 0, nil)
			if res.Err != nil || res.Count != tc.count || int64(res.Pages) != tc.pages {
				t.Errorf("count %d pages %d err %v, want %d, %d", res.Count, res.Pages, res.Err, tc.count, tc.pages)
			}
		})
	}
}

// TestLinkHeaderFollowsTheRules holds Link headers to the rules of an
// envelope's next: same origin, no loops, the page limit.
func TestLinkHeaderFollowsTheRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		link    func(r *http.Request, foreign string) string
		mod     func(*Config)
		wantErr string
	}{
		{
			name: "another origin",
			link: func(_ *http.Request, foreign string) string {
				return "<" + foreign + `/api/projects/locations/?page=2&token=abc>; rel="next"`
			},
			wantErr: "another origin than",
		},
		{
			name: "a loop",
			link: func(r *http.Request, _ string) string {
				if r.URL.Query().Get("page") == "3" {
					return `</api/projects/locations/?page=2>; rel="next"`
				}
				return fmt.Sprintf(`</api/projects/locations/?page=%d>; rel="next"`, pageOf(r)+1)
			},
			wantErr: "a pagination loop",
		},
		{
			name: "more pages than allowed",
			link: func(r *http.Request, _ string) string {
				return fmt.Sprintf(`<?page=%d>; rel="next"`, pageOf(r)+1)
			},
			mod:     func(c *Config) { c.MaxPages = 3 },
			wantErr: "more than 3 pages",
		},
		{
			name:    "an empty target",
			link:    func(*http.Request, string) string { return `<>; rel="next"` },
			wantErr: "next link after page 1 is empty",
		},
		{
			name:    "a malformed header",
			link:    func(*http.Request, string) string { return `<?page=2; rel="next"` },
			wantErr: "Link header of page 1 is malformed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			foreign := newKeyWatcher(t)
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", tc.link(r, foreign.srv.URL))
				fmt.Fprint(w, `[{"id": 1}]`)
			})
			obs := &recordingObserver{}
			c := f.client(t, func(cfg *Config) {
				cfg.Observer = obs
				if tc.mod != nil {
					tc.mod(cfg)
				}
			})
			res := c.Locations(context.Background(), 0, nil)
			if ReasonOf(res.Err) != ReasonPagination || !strings.Contains(res.Err.Error(), tc.wantErr) {
				t.Errorf("err %v, want pagination saying %q", res.Err, tc.wantErr)
			}
			if n := obs.errors[EndpointLocations][ReasonPagination]; n != 1 {
				t.Errorf("observer saw %d pagination errors, want 1", n)
			}
			if n := foreign.requests.Load(); n != 0 {
				t.Errorf("the foreign listener saw %d requests", n)
			}
		})
	}
}

func pageOf(r *http.Request) int {
	page := 1
	if p := r.URL.Query().Get("page"); p != "" {
		_, _ = fmt.Sscan(p, &page)
	}
	return page
}

// TestRefusedNextNamesItsOrigin: a next link to another origin, as Django
// builds behind a proxy that does not forward Host, is refused with the
// origin it named, and nothing else of it.
func TestRefusedNextNamesItsOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, base, next, want string
	}{
		{
			name: "upstream address", base: "https://deploy.example.com",
			next: "http://10.0.0.5:8000/api/projects/locations/?page=2&token=abc",
			want: "next link after page 1 points to http://10.0.0.5:8000, another origin than https://deploy.example.com:443",
		},
		{
			name: "TLS ended at the proxy", base: "https://deploy.example.com",
			next: "http://deploy.example.com/api/projects/locations/?page=2",
			want: "points to http://deploy.example.com:80, another origin than https://deploy.example.com:443",
		},
		{
			name: "credentials and IPv6", base: "https://deploy.example.com",
			next: "https://user:pw@[2001:db8::1]:8443/x?page=2#frag",
			want: "points to https://[2001:db8::1]:8443, another origin than",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := url.Parse(tc.base)
			c, err := New(Config{BaseURL: base})
			if err != nil {
				t.Fatal(err)
			}
			cur := c.endpointURL("api/projects/locations/")
			_, err = c.nextPage(cur, tc.next, map[[sha256.Size]byte]bool{}, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			for _, secret := range []string{"token", "abc", "page=2", "user", "pw", "frag", "/api", "/x"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("err %q repeats %q from the link", err, secret)
				}
			}
		})
	}
}

// TestRefusedNextFromTheService sends the foreign next through a real walk,
// body and Link header alike.
func TestRefusedNextFromTheService(t *testing.T) {
	for _, linkHeader := range []bool{false, true} {
		srv, c := startSample(t, sampleservice.Options{Locations: 250, PageSize: 100, OmitCount: true, LinkHeader: linkHeader}, nil)
		srv.Service.SetFault(sampleservice.EndpointLocations, sampleservice.Fault{NextURL: "http://10.0.0.5:8000/api/projects/locations/?page=2"})
		res := c.Locations(context.Background(), 0, nil)
		want := "next link after page 1 points to http://10.0.0.5:8000, another origin than http://" + srv.Addr()
		if ReasonOf(res.Err) != ReasonPagination || !strings.Contains(res.Err.Error(), want) {
			t.Errorf("Link header %t: err %v, want pagination saying %q", linkHeader, res.Err, want)
		}
	}
}

func TestRefusedRedirectNamesItsOrigin(t *testing.T) {
	foreign := newKeyWatcher(t)
	f := newFakeAPI(t, "")
	f.handle("/api/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, foreign.srv.URL+"/api/?token=abc", http.StatusFound)
	})
	f.handle("/api/projects/projects/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	})
	c := f.client(t, nil)
	r := c.Root(context.Background())
	want := "redirect to " + foreign.srv.URL + ", another origin than " + f.srv.URL
	if ReasonOf(r.Err) != ReasonHTTPStatus || !strings.Contains(r.Err.Error(), want) || strings.Contains(r.Err.Error(), "token") {
		t.Errorf("err %v, want http_status saying %q", r.Err, want)
	}
	p := c.Projects(context.Background())
	if ReasonOf(p.Err) != ReasonHTTPStatus || !strings.Contains(p.Err.Error(), "after 5 redirects") {
		t.Errorf("err %v, want http_status saying it stopped after 5 redirects", p.Err)
	}
	if n := foreign.requests.Load(); n != 0 {
		t.Errorf("the foreign listener saw %d requests", n)
	}
	// A 300 is a status net/http never follows: no redirects were counted.
	f.handle("/api/projects/locations/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/elsewhere/", http.StatusMultipleChoices)
	})
	l := c.Locations(context.Background(), 0, nil)
	if ReasonOf(l.Err) != ReasonHTTPStatus || strings.Contains(l.Err.Error(), "redirects") {
		t.Errorf("err %v, want http_status with no count of redirects", l.Err)
	}
}

// TestListsWithoutIDs counts Django REST framework's hyperlinked lists,
// whose entries carry a url and no id, and reports the ids the detail
// subset needed as a location_detail error.
func TestListsWithoutIDs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    sampleservice.Options
		wantIDs int
		pages   int
	}{
		{"plain array", sampleservice.Options{}, 3, 1},
		{"envelope with count", sampleservice.Options{PageSize: 100}, 3, 1},
		{"envelope with count, ids over two pages", sampleservice.Options{PageSize: 100}, 120, 2},
		{"envelope without count", sampleservice.Options{PageSize: 100, OmitCount: true}, 3, 3},
		{"Link headers", sampleservice.Options{PageSize: 100, LinkHeader: true}, 3, 3},
		{"no ids wanted", sampleservice.Options{PageSize: 100}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Locations, opts.OmitIDs = 250, true
			obs := &recordingObserver{}
			_, c := startSample(t, opts, func(cfg *Config) { cfg.Observer = obs })
			called := false
			res := c.Locations(context.Background(), tc.wantIDs, func([]int64) { called = true })
			if res.Err != nil || res.Count != 250 || res.Pages != tc.pages {
				t.Fatalf("count %d pages %d err %v, want 250, %d", res.Count, res.Pages, res.Err, tc.pages)
			}
			if len(res.IDs) != 0 || called || res.MissingIDs != tc.wantIDs {
				t.Errorf("ids %v (onIDs called %t), %d missing; want none and %d missing", res.IDs, called, res.MissingIDs, tc.wantIDs)
			}
			if got := obs.errors[EndpointLocationDetail][ReasonInvalidBody]; got != tc.wantIDs {
				t.Errorf("observer saw %d location_detail invalid_body errors, want %d", got, tc.wantIDs)
			}
			if len(obs.errors[EndpointLocations]) != 0 {
				t.Errorf("observer saw locations errors %v", obs.errors[EndpointLocations])
			}
			if tc.wantIDs == 0 {
				if res.IDErr != nil {
					t.Errorf("IDErr %v with no ids wanted", res.IDErr)
				}
				return
			}
			var e *Error
			if !errors.As(res.IDErr, &e) || e.Endpoint != EndpointLocationDetail || e.Reason != ReasonInvalidBody || e.Status != 0 {
				t.Fatalf("IDErr %#v, want a location_detail invalid_body *Error", res.IDErr)
			}
			if want := `location list entry 0 (page 1) has no integer "id"`; !strings.Contains(e.Error(), want) {
				t.Errorf("IDErr %q does not say %q", e, want)
			}
		})
	}
	_, c := startSample(t, sampleservice.Options{Projects: 30, OmitIDs: true}, nil)
	if p := c.Projects(context.Background()); p.Err != nil || p.Count != 30 || p.IDErr != nil {
		t.Errorf("Projects: count %d err %v IDErr %v", p.Count, p.Err, p.IDErr)
	}
}

// TestSomeEntriesWithoutIDs: an entry without an id takes its place in the
// subset; the ids around it are used, and the first one missing is named.
func TestSomeEntriesWithoutIDs(t *testing.T) {
	f := newFakeAPI(t, "")
	f.handle("/api/projects/locations/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") == "2" {
			fmt.Fprint(w, `{"count": 6, "next": "?page=3", "results": [{"url": "u4"}, {"id": 5}]}`)
			return
		}
		fmt.Fprint(w, `{"count": 6, "next": "?page=2", "results": [{"id": 1}, {"id": "2"}, {"id": 3}]}`)
	})
	obs := &recordingObserver{}
	var streamed []int64
	res := f.client(t, func(c *Config) { c.Observer = obs }).Locations(context.Background(), 4,
		func(ids []int64) { streamed = append(streamed, ids...) })
	if res.Err != nil || res.Count != 6 || res.Pages != 2 {
		t.Fatalf("count %d pages %d err %v, want 6 and 2 (the third page is not needed)", res.Count, res.Pages, res.Err)
	}
	if fmt.Sprint(res.IDs) != "[1 3]" || fmt.Sprint(streamed) != "[1 3]" || res.MissingIDs != 2 {
		t.Errorf("ids %v streamed %v missing %d, want [1 3] and 2 missing", res.IDs, streamed, res.MissingIDs)
	}
	if want := `location list entry 1 (page 1) has no integer "id"`; res.IDErr == nil || !strings.Contains(res.IDErr.Error(), want) {
		t.Errorf("IDErr %v, want %q", res.IDErr, want)
	}
	if n := obs.errors[EndpointLocationDetail][ReasonInvalidBody]; n != 2 {
		t.Errorf("observer saw %d location_detail errors, want 2", n)
	}
}

// TestLongInfoField: a detail view with a long free-text field is up, and
// the field is cut.
func TestLongInfoField(t *testing.T) {
	for _, size := range []int{20 << 10, 10 << 20} {
		_, c := startSample(t, sampleservice.Options{Locations: 3, DescriptionBytes: size}, nil)
		r := c.LocationDetail(context.Background(), 2, []string{"description", "name"})
		if r.Err != nil {
			t.Fatalf("%d bytes: %v", size, r.Err)
		}
		d := r.Fields["description"]
		if !strings.HasSuffix(d, "…") || len(d) > maxFieldValue+len("…") || len(d) < maxFieldValue-3+len("…") || r.Fields["name"] == "" {
			t.Errorf("%d bytes: description of %d bytes ending %q, name %q", size, len(d), d[max(len(d)-8, 0):], r.Fields["name"])
		}
	}
}

// TestEmptyNextIsALoop: an empty next names the page itself. Without a
// count, the list is a pagination failure, never a count of one page;
// only null or no link ends it. With a count and the ids needed, the walk
// has no reason to follow it.
func TestEmptyNextIsALoop(t *testing.T) {
	for _, tc := range []struct {
		name, body, link string
		wantCount        int64 // -1: a pagination failure
	}{
		{"an envelope without a count", `{"next": "", "previous": null, "results": [{"id": 1}, {"id": 2}, {"id": 3}]}`, "", -1},
		{"an envelope with blanks for a link", `{"next": "  ", "results": [{"id": 1}]}`, "", -1},
		{"a plain array with an empty Link", `[{"id": 1}, {"id": 2}, {"id": 3}]`, `<>; rel="next"`, -1},
		{"an envelope with null", `{"next": null, "results": [{"id": 1}, {"id": 2}, {"id": 3}]}`, "", 3},
		{"an envelope without next", `{"results": [{"id": 1}, {"id": 2}, {"id": 3}]}`, "", 3},
		{"a plain array without a Link", `[{"id": 1}, {"id": 2}, {"id": 3}]`, "", 3},
		{"a plain array with another relation", `[{"id": 1}, {"id": 2}, {"id": 3}]`, `<>; rel="prev"`, 3},
		{"an envelope with a count", `{"count": 7, "next": "", "results": [{"id": 1}]}`, "", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", func(w http.ResponseWriter, _ *http.Request) {
				if tc.link != "" {
					w.Header().Set("Link", tc.link)
				}
				fmt.Fprint(w, tc.body)
			})
			res := f.client(t, nil).Locations(context.Background(), 0, nil)
			if tc.wantCount < 0 {
				if ReasonOf(res.Err) != ReasonPagination || !strings.Contains(res.Err.Error(), "empty") {
					t.Errorf("count %d, err %v; want a pagination failure saying the link is empty", res.Count, res.Err)
				}
				return
			}
			if res.Err != nil || res.Count != tc.wantCount {
				t.Errorf("count %d, err %v; want %d", res.Count, res.Err, tc.wantCount)
			}
		})
	}
}

// TestNegativeIDsAreNotRequested: a negative id, which the flags refuse,
// is no id: its entry is counted among those without one.
func TestNegativeIDsAreNotRequested(t *testing.T) {
	f := newFakeAPI(t, "")
	f.json("/api/projects/locations/", `[{"id": -5}, {"id": 0}, {"id": 3}, {"id": -9223372036854775808}]`)
	res := f.client(t, nil).Locations(context.Background(), 4, nil)
	if res.Err != nil || res.Count != 4 {
		t.Fatalf("count %d, err %v", res.Count, res.Err)
	}
	if fmt.Sprint(res.IDs) != "[0 3]" || res.MissingIDs != 2 {
		t.Errorf("ids %v, %d missing; want [0 3] and 2 missing", res.IDs, res.MissingIDs)
	}
	if want := `location list entry 0 (page 1) has no integer "id"`; res.IDErr == nil || !strings.Contains(res.IDErr.Error(), want) {
		t.Errorf("IDErr %v, want %q", res.IDErr, want)
	}
}
