package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// slots bounds the requests in flight. Root and list requests wait ahead of
// detail views, so that a large detail subset cannot delay deployment_service_up.
type slots struct {
	mu        sync.Mutex
	free      int
	high, low []chan struct{} // waiters, closed when handed a slot
}

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
func (c *Client) Concurrency() int { return c.cfg.Concurrency }

// RateLimited tells whether the client waits for a rate limit's turns, given in the order asked.
func (c *Client) RateLimited() bool { return c.limiter != nil }

// maxHoldOffs bounds the origins kept: ten times the /probe pairs.
const maxHoldOffs = 10_000

// HoldOffs keeps by origin the hold-offs asked for by a 429 or 503 with Retry-After.
type HoldOffs struct {
	mu sync.Mutex
	m  map[string]holdOff
}

type holdOff struct {
	until  time.Time
	status int
}

// NewHoldOffs returns an empty store.
func NewHoldOffs() *HoldOffs {
	return &HoldOffs{m: make(map[string]holdOff)}
}

// extend extends origin's hold-off to until, returning the end in force.
func (h *HoldOffs) extend(origin string, until time.Time, status int) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.m[origin]
	if ok && !until.After(old.until) {
		return old.until
	}
	if !ok && len(h.m) >= maxHoldOffs {
		// Make room: drop the hold-offs that have ended, or else the one ending soonest.
		now, soonest := time.Now(), ""
		for k, v := range h.m {
			if !now.Before(v.until) {
				delete(h.m, k)
			} else if soonest == "" || v.until.Before(h.m[soonest].until) {
				soonest = k
			}
		}
		if len(h.m) >= maxHoldOffs {
			delete(h.m, soonest)
		}
	}
	h.m[origin] = holdOff{until: until, status: status}
	return until
}

// HoldOff reports until when the client holds off after a 429 or 503, and that status.
func (c *Client) HoldOff() (until time.Time, status int) {
	h := c.cfg.HoldOffs
	h.mu.Lock()
	defer h.mu.Unlock()
	ho := h.m[c.origin.String()]
	return ho.until, ho.status
}

// heldOff returns the error of a request not sent during a hold-off, nil when none is in force.
func (c *Client) heldOff(ep Endpoint) (int, error) {
	if until, status := c.HoldOff(); time.Now().Before(until) {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	return 0, nil
}

// acquire waits for a request slot, high ones first, unless the caller holds one, then for the rate limit.
func (c *Client) acquire(ctx context.Context, high, holding bool) (func(), error) {
	release := func() {}
	if !holding {
		if err := c.slots.acquire(ctx, high); err != nil {
			return nil, fmt.Errorf("waiting for a request slot: %w", err)
		}
		release = c.slots.release
	}
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			release()
			return nil, fmt.Errorf("waiting for the rate limit: %w", err)
		}
	}
	return release, nil
}
