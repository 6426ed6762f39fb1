package client

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Bounds of a /probe target, checked before anything is kept or sent: a
// URL of at most MaxTargetBytes, and a host no longer than a DNS name may
// be (RFC 1035), MaxHostBytes with no label over MaxLabelBytes.
const (
	MaxTargetBytes = 2048
	MaxHostBytes   = 253
	MaxLabelBytes  = 63
)

// ParseTarget checks a /probe target, as ParseBaseURL does and within the
// bounds above, and returns it in one spelling (see normalizeBaseURL). An
// IPv6 address with a zone is refused: the zone names an interface of the
// exporter's host, not a service. Its errors never repeat raw.
func ParseTarget(raw string) (*url.URL, error) {
	if len(raw) > MaxTargetBytes {
		return nil, fmt.Errorf("URL is longer than %d bytes", MaxTargetBytes)
	}
	u, err := ParseBaseURL(raw)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if strings.Contains(host, "%") {
		return nil, errors.New("URL host must not be an IPv6 address with a zone (%25)")
	}
	if !HostWithinBounds(host) {
		return nil, fmt.Errorf("URL host is longer than %d bytes or has a label longer than %d", MaxHostBytes, MaxLabelBytes)
	}
	return normalizeBaseURL(u), nil
}

// HostWithinBounds tells whether host is at most MaxHostBytes long with no
// dot-separated label over MaxLabelBytes.
func HostWithinBounds(host string) bool {
	if len(host) > MaxHostBytes {
		return false
	}
	for l := range strings.SplitSeq(host, ".") {
		if len(l) > MaxLabelBytes {
			return false
		}
	}
	return true
}

// defaultPorts are the ports a scheme implies.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// normalizeBaseURL spells a checked base URL one way: scheme and host in
// lower case, an IPv6 address in its canonical form (RFC 5952), the
// scheme's default port dropped, the port without leading zeros, and no
// trailing slash on the path (the client puts "/api/" after the path
// whether or not it ends with one).
func normalizeBaseURL(u *url.URL) *url.URL {
	n := *u
	n.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if a, err := netip.ParseAddr(host); err == nil && strings.HasPrefix(u.Host, "[") {
		host = "[" + a.String() + "]"
	}
	if port := strings.TrimLeft(u.Port(), "0"); port != "" && port != defaultPorts[n.Scheme] {
		host += ":" + port
	}
	n.Host = host
	// Escapes that change the meaning, such as %2F, stay; those of
	// characters that need none go, as RFC 3986 section 6.2.2 has it.
	raw := normalizeEscapes(strings.TrimRight(u.EscapedPath(), "/"))
	n.Path, _ = url.PathUnescape(raw) // raw holds only valid escapes
	n.RawPath = ""
	if raw != n.EscapedPath() {
		n.RawPath = raw
	}
	return &n
}

// normalizeEscapes decodes the percent-escapes of unreserved characters
// in an escaped path and writes the others in upper case.
func normalizeEscapes(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) {
			b.WriteByte(p[i])
			continue
		}
		v, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err != nil {
			b.WriteByte(p[i])
			continue
		}
		if c := byte(v); isUnreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString(strings.ToUpper(p[i : i+3]))
		}
		i += 2
	}
	return b.String()
}

// isUnreserved tells whether c is an unreserved character of RFC 3986.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}
