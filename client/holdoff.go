package client

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// maxHoldOffs bounds the hold-offs kept: ten times the /probe pairs.
const maxHoldOffs = 10_000

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

func (c *Client) heldOff(ep Endpoint) (int, error) {
	if until, status := c.HoldOff(); time.Now().Before(until) {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	return 0, nil
}

// credentials are a digest of the authorization, secret headers, certificate and proxy credentials, and their files.
type credentials struct {
	fixed [sha256.Size]byte
	files []*fileSecret
}

func newCredentials(cfg *Config) *credentials {
	hc, cr, h := &cfg.HTTPClientConfig, &credentials{}, sha256.New()
	add := func(vals ...string) {
		for _, v := range vals {
			h.Write([]byte(v))
			h.Write([]byte{0})
		}
	}
	if a := hc.Authorization; a != nil {
		add("authorization", a.Type, string(a.Credentials))
		cr.addFile(a.CredentialsFile)
	}
	if hc.HTTPHeaders != nil {
		for _, name := range slices.Sorted(maps.Keys(hc.HTTPHeaders.Headers)) {
			add("header", name)
			for _, v := range hc.HTTPHeaders.Headers[name].Secrets {
				add(string(v))
			}
			for _, f := range hc.HTTPHeaders.Headers[name].Files {
				cr.addFile(f)
			}
		}
	}
	add("certificate", hc.TLSConfig.Cert, hc.TLSConfig.CertFile)
	if proxy := hc.Proxy(); proxy != nil && cfg.BaseURL != nil {
		if u, _ := proxy(&http.Request{URL: cfg.BaseURL}); u != nil {
			add("proxy", u.User.String())
		}
	}
	for _, name := range slices.Sorted(maps.Keys(hc.ProxyConnectHeader)) {
		add("proxy header", name)
		for _, v := range hc.ProxyConnectHeader[name] {
			add(string(v))
		}
	}
	h.Sum(cr.fixed[:0])
	return cr
}

func (cr *credentials) addFile(path string) {
	if path != "" {
		cr.files = append(cr.files, &fileSecret{path: path, max: maxKeyFileBytes})
	}
}

// holdOffKey names the client's origin and the credentials it sends, never a secret.
func (c *Client) holdOffKey() string {
	h := sha256.New()
	h.Write(c.creds.fixed[:])
	for _, f := range c.creds.files {
		v, _ := f.read()
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return c.origin.String() + " " + hex.EncodeToString(h.Sum(nil)[:16])
}
