package client

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Bounds of a /probe target; the host's are a DNS name's (RFC 1035).
const (
	MaxTargetBytes = 2048
	maxHostBytes   = 253
	maxLabelBytes  = 63
)

// ParseTarget checks a /probe target as ParseBaseURL does and within the
// bounds above, and returns it in one spelling. Its errors never repeat raw.
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
		return nil, fmt.Errorf("URL host is longer than %d bytes or has a label longer than %d", maxHostBytes, maxLabelBytes)
	}
	return normalizeBaseURL(u), nil
}

// HostWithinBounds tells whether host is within maxHostBytes and maxLabelBytes.
func HostWithinBounds(host string) bool {
	return len(host) <= maxHostBytes && !slices.ContainsFunc(strings.Split(host, "."), func(l string) bool { return len(l) > maxLabelBytes })
}

// defaultPorts are the ports a scheme implies.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// normalizeBaseURL spells a checked base URL one way: lower case, canonical
// IPv6, no default port or leading zeros, no trailing slash.
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
	// Escapes that change the meaning stay (RFC 3986 section 6.2.2).
	raw := normalizeEscapes(strings.TrimRight(u.EscapedPath(), "/"))
	n.Path, _ = url.PathUnescape(raw)
	n.RawPath = ""
	if raw != n.EscapedPath() {
		n.RawPath = raw
	}
	return &n
}

// pctEscape is a percent-escape of a path.
var pctEscape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

// normalizeEscapes decodes the percent-escapes of unreserved characters
// in an escaped path and writes the others in upper case.
func normalizeEscapes(p string) string {
	return pctEscape.ReplaceAllStringFunc(p, func(e string) string {
		v, _ := strconv.ParseUint(e[1:], 16, 8)
		if c := byte(v); 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			return string(c)
		}
		return strings.ToUpper(e)
	})
}
