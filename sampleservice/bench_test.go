package sampleservice

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// benchmarkList measures rendering one list answer, without the network.
func benchmarkList(b *testing.B, opts Options, query string) {
	opts.Key = testKey
	s := New(opts)
	req := httptest.NewRequest(http.MethodGet, "http://svc.example/api/projects/locations/"+query, nil)
	req.Header.Set("Authorization", "Token "+testKey)
	var n int64
	for b.Loop() {
		w := &discardWriter{header: http.Header{}}
		s.ServeHTTP(w, req)
		n = w.n
	}
	b.SetBytes(n)
}

func BenchmarkPage100Of1M(b *testing.B) {
	benchmarkList(b, Options{Locations: 1_000_000, PageSize: 100}, "?page=5000")
}

func BenchmarkPlainArray100k(b *testing.B) {
	benchmarkList(b, Options{Locations: 100_000}, "")
}

// discardWriter is a ResponseWriter that only counts, so benchmarks measure
// the service rather than a recorder's buffer.
type discardWriter struct {
	header http.Header
	n      int64
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(int)     {}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return io.Discard.Write(p)
}
