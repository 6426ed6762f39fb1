package sampleservice

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxLog bounds the request log; older records are dropped first, so a
// benchmark walking a million entries cannot exhaust memory.
const maxLog = 10000

// RequestRecord describes one request as the service saw it, for tests that
// check what a client sends. The Authorization value itself is never kept.
type RequestRecord struct {
	Time     time.Time
	Method   string
	Path     string
	RawQuery string
	// Endpoint is the endpoint label, or "" for a path the API lacks.
	Endpoint string
	// AuthPresent tells whether any Authorization header came, and AuthOK
	// whether it was exactly "Token <key>": a foreign service must see
	// neither.
	AuthPresent bool
	AuthOK      bool
	Accept      string
	UserAgent   string
	// AcceptEncoding is the Accept-Encoding header, "" when none came.
	AcceptEncoding string
}

// stats records requests; counters are atomic so that recording costs
// little under load.
type stats struct {
	total       atomic.Int64
	byEndpoint  [5]atomic.Int64 // indexed by endpointIndex
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	wrongAuth   atomic.Bool

	mu   sync.Mutex
	log  []RequestRecord // ring buffer once full
	next int             // where the next record goes once full
}

func endpointIndex(endpoint string) int {
	switch endpoint {
	case EndpointRoot:
		return 1
	case EndpointProjects:
		return 2
	case EndpointLocations:
		return 3
	case EndpointLocationDetail:
		return 4
	}
	return 0
}

func (st *stats) begin(r *http.Request, endpoint string, authOK bool) {
	n := st.inFlight.Add(1)
	for {
		m := st.maxInFlight.Load()
		if n <= m || st.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	st.total.Add(1)
	st.byEndpoint[endpointIndex(endpoint)].Add(1)
	if !authOK {
		st.wrongAuth.Store(true)
	}
	rec := RequestRecord{
		Time:        time.Now(),
		Method:      r.Method,
		Path:        r.URL.Path,
		RawQuery:    r.URL.RawQuery,
		Endpoint:    endpoint,
		AuthPresent: len(r.Header.Values("Authorization")) > 0,
		AuthOK:      authOK,
		Accept:      r.Header.Get("Accept"),
		UserAgent:   r.Header.Get("User-Agent"),

		AcceptEncoding: r.Header.Get("Accept-Encoding"),
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.log) < maxLog {
		st.log = append(st.log, rec)
		return
	}
	st.log[st.next] = rec
	st.next = (st.next + 1) % maxLog
}

func (st *stats) end() { st.inFlight.Add(-1) }

func (st *stats) reset() {
	st.total.Store(0)
	for i := range st.byEndpoint {
		st.byEndpoint[i].Store(0)
	}
	st.maxInFlight.Store(st.inFlight.Load())
	st.wrongAuth.Store(false)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.log, st.next = nil, 0
}

// Requests returns how many requests reached endpoint (an Endpoint
// constant, or "" for unknown paths) since the last reset, whatever their
// outcome.
func (s *Service) Requests(endpoint string) int64 {
	return s.stats.byEndpoint[endpointIndex(endpoint)].Load()
}

// TotalRequests returns how many requests arrived since the last reset.
func (s *Service) TotalRequests() int64 { return s.stats.total.Load() }

// InFlight returns how many requests are being answered right now.
func (s *Service) InFlight() int64 { return s.stats.inFlight.Load() }

// MaxInFlight returns the most requests answered at once since the last
// reset, which is what a client's concurrency limit should bound.
func (s *Service) MaxInFlight() int64 { return s.stats.maxInFlight.Load() }

// SawWrongAuth reports whether any request since the last reset lacked the
// exact expected Authorization header.
func (s *Service) SawWrongAuth() bool { return s.stats.wrongAuth.Load() }

// Log returns the most recent requests (at most maxLog), oldest first.
func (s *Service) Log() []RequestRecord {
	st := &s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]RequestRecord, 0, len(st.log))
	out = append(out, st.log[st.next:]...)
	return append(out, st.log[:st.next]...)
}

// ResetStats zeroes the counters and empties the log, so a test can look at
// one scrape in isolation. Requests still in flight keep counting towards
// MaxInFlight.
func (s *Service) ResetStats() { s.stats.reset() }
