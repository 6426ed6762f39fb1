package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Concurrency returns the most requests a poll sends at once; the poller holds to it.
func (c *Client) Concurrency() int { return c.cfg.Concurrency }

// RateLimited tells whether the client waits for a rate limit's turns, given in the order asked.
func (c *Client) RateLimited() bool { return c.limiter != nil }

// waitTurn waits for the rate limit's next turn, when there is a limit.
func (c *Client) waitTurn(ctx context.Context) error {
	if c.limiter == nil {
		return nil
	}
	if err := c.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("waiting for the rate limit: %w", err)
	}
	return nil
}

// maxHoldOffs bounds the hold-offs kept: ten times the /probe pairs.
const maxHoldOffs = 10_000

// HoldOffs keeps the hold-offs asked for by a 429 or 503 with Retry-After,
// by origin and credentials (see Client.holdOffKey).
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

// extend extends key's hold-off to until, returning the end in force.
func (h *HoldOffs) extend(key string, until time.Time, status int) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.m[key]
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
	h.m[key] = holdOff{until: until, status: status}
	return until
}

// HoldOff reports until when the client holds off after a 429 or 503, and that status.
func (c *Client) HoldOff() (until time.Time, status int) {
	key := c.holdOffKey()
	h := c.cfg.HoldOffs
	h.mu.Lock()
	defer h.mu.Unlock()
	ho := h.m[key]
	return ho.until, ho.status
}

// heldOff returns the error of a request not sent during a hold-off, nil when none is in force.
func (c *Client) heldOff(ep Endpoint) (int, error) {
	if until, status := c.HoldOff(); time.Now().Before(until) {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	return 0, nil
}
