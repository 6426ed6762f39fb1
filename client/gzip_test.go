package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

func gzipBytes(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGzipIsRequested: the client asks for gzip unless told not to, and
// reads compressed and plain answers alike.
func TestGzipIsRequested(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
		serve   bool // the service compresses when asked
		want    string
	}{
		{"by default", false, true, "gzip"},
		{"by default, from a service that ignores it", false, false, "gzip"},
		{"not when turned off", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := startSample(t, sampleservice.Options{Locations: 300, PageSize: 100, OmitCount: true, Gzip: tc.serve},
				func(cfg *Config) { cfg.DisableGzip = tc.disable })
			tr := &Trace{}
			ctx := WithTrace(context.Background(), tr)
			res := c.Locations(ctx, 2, nil)
			d := c.LocationDetail(ctx, 7, []string{"name"})
			if res.Err != nil || res.Count != 300 || d.Err != nil || d.Fields["name"] == "" {
				t.Fatalf("Locations: count %d err %v; detail %v err %v", res.Count, res.Err, d.Fields, d.Err)
			}
			log := srv.Service.Log()
			if len(log) != 4 {
				t.Fatalf("%d requests, want 4", len(log))
			}
			for _, r := range log {
				if r.AcceptEncoding != tc.want {
					t.Errorf("%s?%s: Accept-Encoding %q, want %q", r.Path, r.RawQuery, r.AcceptEncoding, tc.want)
				}
			}
			// The trace counts the bytes read off the wire: compressed
			// ones when the answer was.
			reqs, _ := tr.Requests()
			var wire int64
			for _, r := range reqs {
				wire += r.Bytes
			}
			plain := listBytes(t, srv)
			switch compressed := tc.serve && !tc.disable; {
			case compressed && wire*4 > plain:
				t.Errorf("%d bytes on the wire for %d bytes of bodies", wire, plain)
			case !compressed && wire < plain:
				t.Errorf("%d bytes on the wire, fewer than the %d bytes of the bodies", wire, plain)
			}
		})
	}
}

// listBytes sums the plain bodies of the three location pages and detail 7.
func listBytes(t *testing.T, srv *sampleservice.Server) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{"/api/projects/locations/", "/api/projects/locations/?page=2", "/api/projects/locations/?page=3", "/api/projects/locations/7/"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL()+p, nil)
		req.Header.Set("Authorization", "Token "+testKey)
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		_ = resp.Body.Close()
		n += int64(b.Len())
	}
	return n
}

func TestGzipAnswers(t *testing.T) {
	body := entries(1, 200)
	compressed := gzipBytes(t, body)
	badCRC := bytes.Clone(compressed)
	badCRC[len(badCRC)-8] ^= 0xff
	for _, tc := range []struct {
		name     string
		encoding string
		body     []byte
		length   int // declared Content-Length; 0 = the body's, -1 = none
		mod      func(*Config)
		reason   Reason
		wantErr  string
	}{
		{name: "gzip", encoding: "gzip", body: compressed},
		{name: "x-gzip, capitalised", encoding: "X-GZIP", body: compressed},
		{name: "identity", encoding: "identity", body: []byte(body)},
		{name: "gzip in a list with identity", encoding: "identity, gzip", body: compressed},
		{name: "gzip although not asked for", encoding: "gzip", body: compressed, mod: func(c *Config) { c.DisableGzip = true }},
		{name: "streamed without a length", encoding: "gzip", body: compressed, length: -1},
		{name: "the largest limit there is, gzip", encoding: "gzip", body: compressed, mod: func(c *Config) { c.MaxResponseBytes = math.MaxInt64 }},
		{name: "the largest limit there is, plain", encoding: "identity", body: []byte(body), mod: func(c *Config) { c.MaxResponseBytes = math.MaxInt64 }},
		{name: "the limit is on the decompressed bytes", encoding: "gzip", body: compressed,
			mod: func(c *Config) { c.MaxResponseBytes = int64(len(body)) - 1 }, reason: ReasonTooLarge},
		{name: "a declared length past the compressed bound", encoding: "gzip", body: compressed, length: 1 << 30,
			mod: func(c *Config) { c.MaxResponseBytes = 64 << 10 }, reason: ReasonTooLarge, wantErr: "declared length"},
		{name: "not gzip at all", encoding: "gzip", body: []byte(body), reason: ReasonInvalidBody, wantErr: "corrupt gzip stream"},
		{name: "empty", encoding: "gzip", body: []byte{}, reason: ReasonInvalidBody, wantErr: "gzip stream ends early"},
		{name: "cut short", encoding: "gzip", body: compressed[:len(compressed)/2], reason: ReasonInvalidBody, wantErr: "gzip stream ends early"},
		{name: "bad checksum", encoding: "gzip", body: badCRC, reason: ReasonInvalidBody, wantErr: "corrupt gzip stream: gzip: invalid checksum"},
		{name: "trailing garbage", encoding: "gzip", body: append(bytes.Clone(compressed), "garbage after the stream"...), reason: ReasonInvalidBody, wantErr: "corrupt gzip stream"},
		{name: "compressed twice", encoding: "gzip, gzip", body: compressed, reason: ReasonInvalidBody, wantErr: "twice"},
		{name: "another coding", encoding: "br", body: compressed, reason: ReasonInvalidBody, wantErr: `Content-Encoding "br"`},
		{name: "connection broken mid-stream", encoding: "gzip", body: compressed[:len(compressed)/2], length: len(compressed), reason: ReasonNetwork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, "")
			f.handle("/api/projects/locations/", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Encoding", tc.encoding)
				switch tc.length {
				case 0:
					w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				case -1:
				default:
					w.Header().Set("Content-Length", strconv.Itoa(tc.length))
				}
				if tc.length == -1 {
					// Flushed in two parts, so the answer is chunked.
					_, _ = w.Write(tc.body[:len(tc.body)/2])
					w.(http.Flusher).Flush()
					_, _ = w.Write(tc.body[len(tc.body)/2:])
					return
				}
				_, _ = w.Write(tc.body)
			})
			obs := &recordingObserver{}
			c := f.client(t, func(cfg *Config) {
				cfg.Observer = obs
				if tc.mod != nil {
					tc.mod(cfg)
				}
			})
			res := c.Locations(context.Background(), 3, nil)
			if tc.reason == "" {
				if res.Err != nil || res.Count != 200 || len(res.IDs) != 3 {
					t.Fatalf("count %d ids %v err %v, want 200 entries", res.Count, res.IDs, res.Err)
				}
				return
			}
			if ReasonOf(res.Err) != tc.reason || !strings.Contains(res.Err.Error(), tc.wantErr) {
				t.Errorf("err %v, want %s saying %q", res.Err, tc.reason, tc.wantErr)
			}
			if n := obs.errors[EndpointLocations][tc.reason]; n != 1 {
				t.Errorf("observer saw %d %s errors, want 1", n, tc.reason)
			}
		})
	}
}

// TestGzipBomb: a compression bomb is too_large once the decompressed bytes
// pass the limit, having pulled only a little of the compressed stream.
func TestGzipBomb(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int64
		maxWire  int64
		endpoint string
	}{
		// 4 GiB inflated from about 4 MB; the read stops after the limit,
		// a thousandth of it compressed, plus a buffer or two.
		{"list, 1 MiB limit", 1 << 20, 32 << 10, sampleservice.EndpointLocations},
		{"list, default limit", DefaultMaxResponseBytes, DefaultMaxResponseBytes/1000 + 64<<10, sampleservice.EndpointLocations},
		{"detail view", 1 << 20, 32 << 10, sampleservice.EndpointLocationDetail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := startSample(t, sampleservice.Options{Locations: 5}, func(cfg *Config) { cfg.MaxResponseBytes = tc.limit })
			srv.Service.SetFault(tc.endpoint, sampleservice.Fault{GzipBomb: 4 << 30})
			tr := &Trace{}
			ctx := WithTrace(context.Background(), tr)
			var err error
			if tc.endpoint == sampleservice.EndpointLocations {
				err = c.Locations(ctx, 0, nil).Err
			} else {
				err = c.LocationDetail(ctx, 3, []string{"name"}).Err
			}
			if ReasonOf(err) != ReasonTooLarge {
				t.Fatalf("err %v, want too_large", err)
			}
			reqs, _ := tr.Requests()
			if len(reqs) == 0 || reqs[0].Bytes == 0 || reqs[0].Bytes > tc.maxWire {
				t.Errorf("trace %+v: want one request that read at most %d compressed bytes", reqs, tc.maxWire)
			}
		})
	}
}

// BenchmarkGunzip decompresses a detail view (1 kB) and a page of 400
// entries with the client's pooled decompressor and with a new
// gzip.Reader per answer: the figures that keep the pool
// (docs/development.md).
func BenchmarkGunzip(b *testing.B) {
	for _, n := range []int{20, 400} {
		body := entries(1, n)
		z := gzipBytes(b, body)
		for _, pooled := range []bool{true, false} {
			b.Run(fmt.Sprintf("%dB/pooled=%t", len(body), pooled), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if err := gunzipOnce(z, pooled); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func gunzipOnce(z []byte, pooled bool) error {
	wire := &limitedReader{r: bytes.NewReader(z), n: 1 << 31}
	if !pooled {
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, zr)
		return err
	}
	g, err := newGunzipReader(wire)
	if err != nil {
		return err
	}
	defer g.release()
	_, err = io.Copy(io.Discard, g)
	return err
}
