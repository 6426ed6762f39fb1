package client

import (
	"context"
	"sync"
)

// slots bounds the requests in flight. Waiters for the root and the lists
// are served before waiters for detail views: however large the detail
// subset, it must not push the requests that decide deployment_service_up
// past the deadline.
type slots struct {
	mu   sync.Mutex
	size int
	free int
	// high and low are FIFO queues of waiters; a waiter's channel is closed
	// when the slot is handed to it.
	high, low []chan struct{}
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
	if high {
		s.high = append(s.high, ch)
	} else {
		s.low = append(s.low, ch)
	}
	s.mu.Unlock()

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		removed := remove(&s.high, ch) || remove(&s.low, ch)
		s.mu.Unlock()
		if !removed {
			// The slot was handed over just as ctx ended: pass it on.
			s.release()
		}
		return context.Cause(ctx)
	}
}

// release hands the slot to the first high-priority waiter, else to the
// first low-priority one, else frees it.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.high) > 0:
		close(s.high[0])
		s.high = s.high[1:]
	case len(s.low) > 0:
		close(s.low[0])
		s.low = s.low[1:]
	default:
		s.free++
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

// Concurrency returns the most requests the client has in flight at once.
func (c *Client) Concurrency() int { return c.slots.size }

// RateLimited tells whether the client waits for a rate limit's turns,
// which go to the requests in the order they ask.
func (c *Client) RateLimited() bool { return c.limiter != nil }
