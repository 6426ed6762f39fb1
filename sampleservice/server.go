package sampleservice

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server runs a Service on a loopback port until closed.
type Server struct {
	// Service is the running service, for faults and statistics.
	Service *Service

	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	active  sync.WaitGroup
	closing sync.Once
	err     error
}

// Start runs New(opts) on 127.0.0.1 at a free port. It never listens beyond
// loopback: the sample service is for demos and tests on this machine only.
func Start(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Service: New(opts), ln: ln, cancel: cancel}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		ReadHeaderTimeout: 10 * time.Second,
		// Request contexts derive from ctx, so Close ends delays and
		// streams at once instead of waiting for them.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// serve tracks handlers so that Close can wait for them.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.Header().Set("Connection", "close")
		writeDetail(w, http.StatusServiceUnavailable, "Shutting down.")
		return
	}
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()
	s.Service.ServeHTTP(w, r)
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the base URL of the API, prefix included, as a client of the
// real service would be configured with it.
func (s *Server) URL() string { return "http://" + s.Addr() + s.Service.prefix }

// Close stops the server, ends requests in progress and waits until every
// handler has returned, so tests leak no goroutines. It is safe to call more
// than once.
func (s *Server) Close() error {
	s.closing.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			// A handler stuck writing to a client that stopped reading:
			// closing its connection unblocks it.
			if cerr := s.srv.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
				s.err = cerr
			}
		}
		s.active.Wait()
	})
	return s.err
}
