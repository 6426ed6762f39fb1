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

// acquire takes a slot, waiting within ctx. Once the caller holds a slot
// or has its place in a queue, the hook of WithQueuedHook, if any, is
// called.
func (s *slots) acquire(ctx context.Context, high bool) error {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		queued(ctx)
		return nil
	}
	ch := make(chan struct{})
	if high {
		s.high = append(s.high, ch)
	} else {
		s.low = append(s.low, ch)
	}
	s.mu.Unlock()
	queued(ctx)

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

type queuedHookKey struct{}

// WithQueuedHook returns a context under which a call tells hook as soon as
// its request holds a slot or waits in its queue. The poll starts the
// detail views only once the root and lists are in line, so that a detail
// view never takes a slot ahead of them.
func WithQueuedHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, queuedHookKey{}, hook)
}

func queued(ctx context.Context) {
	if hook, ok := ctx.Value(queuedHookKey{}).(func()); ok {
		hook()
	}
}

type sendCheckKey struct{}

// WithSendCheck returns a context under which a request, once it holds a
// slot and just before it is sent, asks check whether to go: an error
// stops it unsent, as that error. The poll uses it to start no detail view
// that has no time left to finish.
func WithSendCheck(ctx context.Context, check func() error) context.Context {
	return context.WithValue(ctx, sendCheckKey{}, check)
}

func sendCheck(ctx context.Context) error {
	if check, ok := ctx.Value(sendCheckKey{}).(func() error); ok {
		return check()
	}
	return nil
}

// Concurrency returns the most requests the client has in flight at once.
func (c *Client) Concurrency() int { return c.slots.size }
