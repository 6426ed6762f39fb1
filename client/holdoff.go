package client

import (
	"sync"
	"time"
)

// maxHoldOffs bounds the origins kept: ten times the /probe pairs.
const maxHoldOffs = 10_000

// HoldOffs keeps by origin the hold-offs that services asked for with a 429
// or 503 and Retry-After, so Clients of one origin hold off together.
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

func (h *HoldOffs) get(origin string) holdOff {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[origin]
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
		h.makeRoom()
	}
	h.m[origin] = holdOff{until: until, status: status}
	return until
}

// makeRoom drops the hold-offs that have ended, or else the one ending soonest.
func (h *HoldOffs) makeRoom() {
	now := time.Now()
	soonest := ""
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
