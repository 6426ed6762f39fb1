package client

import (
	"context"
	"slices"
	"sync"
)

// slots bounds the requests in flight. Root and list requests wait ahead of
// detail views, so that a large detail subset cannot delay deployment_service_up.
type slots struct {
	mu        sync.Mutex
	size      int
	free      int
	high, low []chan struct{} // waiters, closed when handed a slot
}

func newSlots(n int) *slots { return &slots{size: n, free: n} }

// acquire takes a slot, waiting within ctx.
func (s *slots) acquire(ctx context.Context, high bool) error {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	q := &s.low
	if high {
		q = &s.high
	}
	*q = append(*q, ch)
	s.mu.Unlock()

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		i := slices.Index(*q, ch)
		if i >= 0 {
			*q = slices.Delete(*q, i, i+1)
		}
		s.mu.Unlock()
		if i < 0 {
			// The slot was handed over just as ctx ended: pass it on.
			s.release()
		}
		return context.Cause(ctx)
	}
}

// release hands the slot to the first waiter, high before low, else frees it.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range []*[]chan struct{}{&s.high, &s.low} {
		if len(*q) > 0 {
			close((*q)[0])
			*q = (*q)[1:]
			return
		}
	}
	s.free++
}

// Concurrency returns the most requests the client has in flight at once.
func (c *Client) Concurrency() int { return c.slots.size }

// RateLimited tells whether the client waits for a rate limit's turns,
// which go to the requests in the order they ask.
func (c *Client) RateLimited() bool { return c.limiter != nil }
