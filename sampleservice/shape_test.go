package sampleservice

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// raw fetches url with the test key and the given headers, without Go's
// transparent decompression, so tests see the body as it was sent.
func raw(t *testing.T, u string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Token "+testKey)
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, body, err}
}

var linkRE = regexp.MustCompile(`<([^>]*)>; rel="(\w+)"`)

// links reads the Link header the service writes.
func links(t *testing.T, h http.Header) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range linkRE.FindAllStringSubmatch(h.Get("Link"), -1) {
		out[m[2]] = m[1]
	}
	return out
}

func TestLinkHeaderPagination(t *testing.T) {
	for _, relative := range []bool{false, true} {
		t.Run(map[bool]string{false: "absolute", true: "relative"}[relative], func(t *testing.T) {
			srv := start(t, Options{Prefix: "/deploy", Locations: 25, PageSize: 10, LinkHeader: true, RelativeLinks: relative})
			next := srv.URL() + locationsPath
			var all []int
			for page := 1; next != ""; page++ {
				r := raw(t, next, nil)
				wantStatus(t, r, 200)
				entries := decode[[]json.RawMessage](t, r.body)
				all = append(all, ids(t, entries)...)
				l := links(t, r.header)
				if l["first"] == "" || l["last"] == "" || (page > 1) != (l["prev"] != "") {
					t.Errorf("page %d: Link %q", page, r.header.Get("Link"))
				}
				next = l["next"]
				if next == "" {
					break
				}
				if strings.HasPrefix(next, "http") == relative || !strings.Contains(next, "/deploy/api/") {
					t.Fatalf("page %d: next link %q", page, next)
				}
				base, _ := url.Parse(srv.URL() + locationsPath)
				ref, err := url.Parse(next)
				if err != nil {
					t.Fatal(err)
				}
				next = base.ResolveReference(ref).String()
			}
			if len(all) != 25 || all[0] != 1 || all[24] != 25 {
				t.Errorf("walked ids %v", all)
			}
		})
	}
}

func TestLinkFaultsApplyToLinkHeaders(t *testing.T) {
	srv := start(t, Options{Locations: 25, PageSize: 10, LinkHeader: true})
	srv.Service.SetFault(EndpointLocations, Fault{NextURL: "http://10.0.0.5:8000/api/projects/locations/?page=2"})
	if l := links(t, raw(t, srv.URL()+locationsPath, nil).header); l["next"] != "http://10.0.0.5:8000/api/projects/locations/?page=2" {
		t.Errorf("next %q", l["next"])
	}
	srv.Service.SetFault(EndpointLocations, Fault{LoopNext: true})
	if l := links(t, raw(t, srv.URL()+locationsPath+"?page=3", nil).header); l["next"] != srv.URL()+locationsPath {
		t.Errorf("next of the last page %q", l["next"])
	}
}

func TestRelativeLinksInEnvelopes(t *testing.T) {
	srv := start(t, Options{Prefix: "/deploy", Locations: 25, PageSize: 10, RelativeLinks: true})
	env := decode[envelopeBody](t, raw(t, srv.URL()+locationsPath+"?page=2", nil).body)
	if env.Next == nil || *env.Next != "/deploy/api/projects/locations/?page=3" ||
		env.Previous == nil || *env.Previous != "/deploy/api/projects/locations/" {
		t.Errorf("next %v previous %v", env.Next, env.Previous)
	}
}

func TestLinksFollowTheHostHeader(t *testing.T) {
	// Behind a proxy that does not forward Host, the service sees the
	// upstream's address and builds its links from it.
	srv := start(t, Options{Locations: 25, PageSize: 10})
	r := raw(t, srv.URL()+locationsPath, map[string]string{"Host": "10.0.0.5:8000"})
	env := decode[envelopeBody](t, r.body)
	if env.Next == nil || *env.Next != "http://10.0.0.5:8000/api/projects/locations/?page=2" {
		t.Errorf("next %v", env.Next)
	}
}

func TestOmitIDs(t *testing.T) {
	srv := start(t, Options{Locations: 3, Projects: 2, OmitIDs: true})
	for _, path := range []string{projectsPath, locationsPath} {
		entries := decode[[]map[string]any](t, raw(t, srv.URL()+path, nil).body)
		for _, e := range entries {
			if _, ok := e["id"]; ok {
				t.Errorf("%s: entry has an id: %v", path, e)
			}
			if u, _ := e["url"].(string); !strings.HasPrefix(u, srv.URL()+path) {
				t.Errorf("%s: entry url %q", path, u)
			}
			if e["name"] == nil {
				t.Errorf("%s: entry lost its other fields: %v", path, e)
			}
		}
	}
	detail := decode[map[string]any](t, raw(t, srv.URL()+locationsPath+"2/", nil).body)
	if _, ok := detail["id"]; ok || detail["url"] == nil || detail["hosts"] == nil {
		t.Errorf("detail view %v", detail)
	}
}

func TestDescriptionBytes(t *testing.T) {
	srv := start(t, Options{Locations: 3, DescriptionBytes: 20 << 10})
	detail := decode[struct{ Description string }](t, raw(t, srv.URL()+locationsPath+"2/", nil).body)
	d := detail.Description
	if len(d) > 20<<10 || len(d) < 20<<10-3 || !utf8.ValidString(d) || utf8.RuneCountInString(d) == len(d) {
		t.Errorf("description of %d bytes, %d characters", len(d), utf8.RuneCountInString(d))
	}
	// Lists keep their short descriptions.
	entries := decode[[]struct{ Description string }](t, raw(t, srv.URL()+locationsPath, nil).body)
	if len(entries[0].Description) > 1000 {
		t.Errorf("list entry description of %d bytes", len(entries[0].Description))
	}
}

func TestGzip(t *testing.T) {
	srv := start(t, Options{Locations: 50, PageSize: 20, Gzip: true})
	plain := raw(t, srv.URL()+locationsPath, nil)
	if enc := plain.header.Get("Content-Encoding"); enc != "" {
		t.Fatalf("Content-Encoding %q without Accept-Encoding", enc)
	}
	for _, accept := range []string{"gzip", "deflate, gzip;q=0.5", "*", "GZIP"} {
		r := raw(t, srv.URL()+locationsPath, map[string]string{"Accept-Encoding": accept})
		if r.header.Get("Content-Encoding") != "gzip" || !strings.Contains(r.header.Get("Vary"), "Accept-Encoding") {
			t.Fatalf("Accept-Encoding %q: headers %v", accept, r.header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(body, plain.body) {
			t.Errorf("Accept-Encoding %q: decompressed body differs (%v)", accept, err)
		}
		if len(r.body)*3 > len(plain.body) {
			t.Errorf("Accept-Encoding %q: %d bytes compressed, %d plain", accept, len(r.body), len(plain.body))
		}
	}
	for _, accept := range []string{"identity", "gzip;q=0", "br"} {
		if r := raw(t, srv.URL()+locationsPath, map[string]string{"Accept-Encoding": accept}); r.header.Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q got Content-Encoding %q", accept, r.header.Get("Content-Encoding"))
		}
	}
}

func TestGzipBomb(t *testing.T) {
	const size = 40 << 20
	srv := start(t, Options{Locations: 5})
	for _, ep := range []struct{ name, path, open, close string }{
		{EndpointLocations, locationsPath, "[", "]"},
		{EndpointRoot, rootPath, "{", "}"},
	} {
		srv.Service.SetFault(ep.name, Fault{GzipBomb: size})
		// Asked or not, the bomb comes gzip.
		r := raw(t, srv.URL()+ep.path, nil)
		if r.header.Get("Content-Encoding") != "gzip" || r.err != nil {
			t.Fatalf("%s: headers %v, err %v", ep.name, r.header, r.err)
		}
		if len(r.body) > size/500 {
			t.Errorf("%s: %d bytes compressed for %d inflated", ep.name, len(r.body), size)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		var first, last byte
		buf := make([]byte, 64<<10)
		for {
			k, err := zr.Read(buf)
			if k > 0 {
				if n == 0 {
					first = buf[0]
				}
				last = buf[k-1]
				if trimmed := bytes.Trim(buf[:k], " []{}"); len(trimmed) > 0 {
					t.Fatalf("%s: unexpected bytes %q", ep.name, trimmed[:min(len(trimmed), 20)])
				}
			}
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", ep.name, err)
			}
		}
		if n < size || string(first) != ep.open || string(last) != ep.close {
			t.Errorf("%s: inflated to %d bytes from %q to %q", ep.name, n, first, last)
		}
	}
}
