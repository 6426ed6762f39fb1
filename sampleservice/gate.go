package sampleservice

import (
	"context"
	"fmt"
	"sync"
)

// Gate holds requests at the service's door until a test lets them
// through, so that a test can keep a request in flight, or order the
// answers, by events rather than by sleeping: a loaded machine then cannot
// change what the test sees. A held request has already been counted and
// logged, and counts as in flight; one whose client gives up while held
// ends without an answer.
//
// A Gate starts closed. Create one with newGate and put it in front of
// endpoints with setGate or setDetailGate, or let Hold do both. All methods
// are safe for concurrent use.
type Gate struct {
	mu     sync.Mutex
	open   bool
	passes int // requests still allowed through while closed, by Let
	// queue holds the channels of the held requests, first come first
	// served; a request passes when its channel is closed.
	queue []chan struct{}
	// counts are the totals since the gate was made, except Held.
	counts GateCounts
	// changed is closed and replaced whenever counts change, to wake Await.
	changed chan struct{}
}

// GateCounts tells what a Gate has seen: requests that arrived, passed,
// are held now, or whose client gave up while held.
type GateCounts struct {
	Arrived, Passed, Held, Abandoned int
}

// newGate returns a closed gate.
func newGate() *Gate {
	return &Gate{changed: make(chan struct{})}
}

// Open lets every held request through, and every later one.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	g.letLocked(len(g.queue))
}

// Let lets n more requests through: the longest-held ones first, then, when
// fewer than n are held, the next ones to arrive.
func (g *Gate) Let(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n -= g.letLocked(min(n, len(g.queue)))
	g.passes += max(n, 0)
}

// letLocked releases the first n held requests and returns n.
func (g *Gate) letLocked(n int) int {
	for _, ch := range g.queue[:n] {
		close(ch)
	}
	g.queue = g.queue[n:]
	g.counts.Passed += n
	g.notifyLocked()
	return n
}

// Counts returns what the gate has seen so far.
func (g *Gate) Counts() GateCounts {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.countsLocked()
}

func (g *Gate) countsLocked() GateCounts {
	c := g.counts
	c.Held = len(g.queue)
	return c
}

// Await blocks until cond holds for the gate's counts, or ctx ends; the
// error then tells the counts it last saw.
func (g *Gate) Await(ctx context.Context, cond func(GateCounts) bool) error {
	for {
		g.mu.Lock()
		c, changed := g.countsLocked(), g.changed
		g.mu.Unlock()
		if cond(c) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("sampleservice: gate still at %+v: %w", c, context.Cause(ctx))
		}
	}
}

// awaitHeld blocks until at least n requests are held at the gate, or ctx
// ends.
func (g *Gate) awaitHeld(ctx context.Context, n int) error {
	return g.Await(ctx, func(c GateCounts) bool { return c.Held >= n })
}

func (g *Gate) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// pass holds a request until the gate lets it through, reporting false
// when ctx ended first.
func (g *Gate) pass(ctx context.Context) bool {
	g.mu.Lock()
	g.counts.Arrived++
	if g.open || g.passes > 0 {
		if !g.open {
			g.passes--
		}
		g.counts.Passed++
		g.notifyLocked()
		g.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	g.queue = append(g.queue, ch)
	g.notifyLocked()
	g.mu.Unlock()

	select {
	case <-ch:
		return true
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if !remove(&g.queue, ch) {
			// Let through just as the client gave up: it was counted as
			// passed, and answering a client that is gone does no harm.
			return true
		}
		g.counts.Abandoned++
		g.notifyLocked()
		return false
	}
}

func remove(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}

// gates are the gates in force, per endpoint and per detail view.
type gates struct {
	mu       sync.RWMutex
	endpoint map[string]*Gate
	detail   map[int64]*Gate
}

// setGate puts g in front of endpoint (one of the Endpoint constants):
// every request to it waits there until g lets it through. A nil g removes
// the gate. An unknown endpoint panics, as in SetFault.
func (s *Service) setGate(endpoint string, g *Gate) {
	switch endpoint {
	case EndpointRoot, EndpointProjects, EndpointLocations, EndpointLocationDetail:
	default:
		panic(fmt.Sprintf("sampleservice: unknown endpoint %q", endpoint))
	}
	s.gates.mu.Lock()
	defer s.gates.mu.Unlock()
	if s.gates.endpoint == nil {
		s.gates.endpoint = make(map[string]*Gate)
	}
	if g == nil {
		delete(s.gates.endpoint, endpoint)
	} else {
		s.gates.endpoint[endpoint] = g
	}
}

// setDetailGate puts g in front of the detail view of one location id,
// instead of any gate of the whole location_detail endpoint. A nil g
// removes it.
func (s *Service) setDetailGate(id int, g *Gate) {
	s.gates.mu.Lock()
	defer s.gates.mu.Unlock()
	if s.gates.detail == nil {
		s.gates.detail = make(map[int64]*Gate)
	}
	if g == nil {
		delete(s.gates.detail, int64(id))
	} else {
		s.gates.detail[int64(id)] = g
	}
}

// Hold puts a new closed gate in front of the given endpoints, or of all
// four when none is named, and returns it.
func (s *Service) Hold(endpoints ...string) *Gate {
	if len(endpoints) == 0 {
		endpoints = []string{EndpointRoot, EndpointProjects, EndpointLocations, EndpointLocationDetail}
	}
	g := newGate()
	for _, ep := range endpoints {
		s.setGate(ep, g)
	}
	return g
}

// gate returns the gate in force for a request, nil when there is none.
func (s *Service) gate(endpoint string, id int64) *Gate {
	s.gates.mu.RLock()
	defer s.gates.mu.RUnlock()
	if endpoint == EndpointLocationDetail {
		if g, ok := s.gates.detail[id]; ok {
			return g
		}
	}
	return s.gates.endpoint[endpoint]
}
