// Package sampleservice is an embedded sample of the deployment service API
// that the exporter watches. It backs the exporter's --demo mode and serves
// as the fake API in tests and benchmarks, so besides answering like the
// real service it can misbehave on demand (see Fault), hold requests until
// a test lets them through (see Gate) and records what it was asked (see
// RequestRecord).
//
// Entries are generated from their index and a seed rather than stored, and
// bodies are streamed, so a service with millions of locations is as cheap
// to run as one with five.
package sampleservice

import (
	"context"
	cryptorand "crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint labels, as named by the exporter's contract, used to target
// faults and to read request counters.
const (
	EndpointRoot           = "root"
	EndpointProjects       = "projects"
	EndpointLocations      = "locations"
	EndpointLocationDetail = "location_detail"
)

// Paths below the prefix.
const (
	rootPath      = "/api/"
	projectsPath  = "/api/projects/projects/"
	locationsPath = "/api/projects/locations/"
)

// Service is the sample deployment service. It is an http.Handler, so it can
// be mounted in any server (httptest included); Start runs it on loopback.
// All methods are safe for concurrent use.
type Service struct {
	prefix    string
	pageSize  int64
	omitCount bool
	shape     shape
	latency   time.Duration
	jitter    time.Duration
	gen       generator

	auth      atomic.Pointer[string] // the full expected header value
	projects  atomic.Int64
	locations atomic.Int64

	faultsMu     sync.RWMutex
	faults       map[string]Fault
	detailFaults map[int64]Fault

	gates gates
	stats stats
}

// New returns a Service configured by opts; see Options for the defaults.
func New(opts Options) *Service {
	s := &Service{
		prefix:    "/" + strings.Trim(opts.Prefix, "/"),
		pageSize:  int64(max(opts.PageSize, 0)),
		omitCount: opts.OmitCount,
		shape: shape{
			linkHeader:       opts.LinkHeader,
			relativeLinks:    opts.RelativeLinks,
			omitIDs:          opts.OmitIDs,
			gzip:             opts.Gzip,
			descriptionBytes: max(opts.DescriptionBytes, 0),
		},
		latency: opts.Latency,
		jitter:  opts.Jitter,
		gen:     generator{seed: uint64(opts.Seed)},
	}
	if s.prefix == "/" {
		s.prefix = ""
	}
	s.SetKey(opts.Key)
	s.projects.Store(size(opts.Projects, DefaultProjects))
	s.locations.Store(size(opts.Locations, DefaultLocations))
	s.ClearFaults()
	s.stats.reset()
	return s
}

// Key returns the token clients must send, which is how callers learn a
// generated one.
func (s *Service) Key() string {
	return strings.TrimPrefix(*s.auth.Load(), "Token ")
}

// SetKey replaces the accepted token, simulating a key rotation on the
// service side. Empty generates a random key.
func (s *Service) SetKey(key string) {
	if key == "" {
		b := make([]byte, 16)
		_, _ = cryptorand.Read(b) // never fails since Go 1.24
		key = hex.EncodeToString(b)
	}
	v := "Token " + key
	s.auth.Store(&v)
}

// setProjects and setLocations change the list sizes at run time, so tests
// can watch the exporter follow a changing service. Values follow the
// Options convention (0 = default, negative = empty).
func (s *Service) setProjects(n int) { s.projects.Store(size(n, DefaultProjects)) }

// setLocations is the locations counterpart of setProjects.
func (s *Service) setLocations(n int) { s.locations.Store(size(n, DefaultLocations)) }

// SetLocations changes the number of locations listed, as locations come
// and go on a real service; ids run from 1 to n.
func (s *Service) SetLocations(n int) { s.setLocations(n) }

// Prefix returns the normalised path prefix ("" or "/something").
func (s *Service) Prefix() string { return s.prefix }

// ServeHTTP answers like the real service: routing, then authentication,
// then method, then the endpoint with any configured fault.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	endpoint, id, found := s.route(r.URL.Path)
	authOK := s.authorized(r)
	s.stats.begin(r, endpoint, authOK)
	defer s.stats.end()

	if g := s.gate(endpoint, id); g != nil && !g.pass(r.Context()) {
		abort(w)
		return
	}
	if !sleep(r.Context(), s.delay()) {
		abort(w)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	switch {
	case !found:
		writeDetail(w, http.StatusNotFound, "Not found.")
	case !authOK:
		h.Set("WWW-Authenticate", "Token")
		writeDetail(w, http.StatusUnauthorized, "Invalid token.")
	case r.Method != http.MethodGet:
		h.Set("Allow", http.MethodGet)
		writeDetail(w, http.StatusMethodNotAllowed, `Method "`+r.Method+`" not allowed.`)
	default:
		s.serveEndpoint(w, r, endpoint, id)
	}
}

// route maps a path onto an endpoint label and, for detail views, the id.
// Paths keep their trailing slash, as the real service insists.
func (s *Service) route(path string) (endpoint string, id int64, ok bool) {
	rest, ok := strings.CutPrefix(path, s.prefix)
	if !ok {
		return "", 0, false
	}
	switch rest {
	case rootPath:
		return EndpointRoot, 0, true
	case projectsPath:
		return EndpointProjects, 0, true
	case locationsPath:
		return EndpointLocations, 0, true
	}
	digits, ok := strings.CutPrefix(rest, locationsPath)
	if !ok {
		return "", 0, false
	}
	digits, ok = strings.CutSuffix(digits, "/")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		id = -1 // too large to exist: still a detail request, answered 404
	}
	return EndpointLocationDetail, id, true
}

// authorized demands exactly one Authorization header with exactly the
// expected value, so clients that mangle or duplicate it are caught.
func (s *Service) authorized(r *http.Request) bool {
	v := r.Header.Values("Authorization")
	return len(v) == 1 && subtle.ConstantTimeCompare([]byte(v[0]), []byte(*s.auth.Load())) == 1
}

// delay returns the configured latency plus jitter for one answer.
func (s *Service) delay() time.Duration {
	d := s.latency
	if s.jitter > 0 {
		d += time.Duration(rand.Int64N(int64(s.jitter)))
	}
	return d
}

// sleep waits for d unless ctx ends first, reporting whether to go on; it
// keeps handlers from outliving clients that gave up.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// baseURL is the absolute URL of the API base as the client addressed it,
// which is what the real service puts in links.
func (s *Service) baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + s.prefix
}
