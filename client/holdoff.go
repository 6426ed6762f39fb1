package client

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

const maxHoldOffs = 10_000 // ten times the /probe pairs

// HoldOffs keeps the hold-offs asked for by a 429 or 503 with Retry-After, by origin and credentials.
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

func (h *HoldOffs) extend(key string, until time.Time, status int) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.m[key]
	if ok && !until.After(old.until) {
		return old.until
	}
	if !ok && len(h.m) >= maxHoldOffs { // drop the one ending soonest, ended or not
		soonest := ""
		for k, v := range h.m {
			if soonest == "" || v.until.Before(h.m[soonest].until) {
				soonest = k
			}
		}
		delete(h.m, soonest)
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

func (c *Client) heldOff(ep Endpoint) (int, error) {
	if until, status := c.HoldOff(); time.Now().Before(until) {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	return 0, nil
}

// holdOffKey names the client's origin and a digest of the secrets and certificate it sends.
func (c *Client) holdOffKey() string {
	_, secrets := c.redact.values()
	tc := c.cfg.HTTPClientConfig.TLSConfig
	sum := sha256.Sum256([]byte(secrets + "\x00" + string(tc.Cert) + "\x00" + tc.CertFile))
	return c.origin.String() + " " + hex.EncodeToString(sum[:16])
}
