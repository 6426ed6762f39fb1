package client

import (
	"net/url"
	"strconv"
	"strings"
)

// defaultPorts are the ports a scheme implies.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// NormalizeBaseURL spells a checked base URL one way: scheme and host in
// lower case, the scheme's default port dropped, the port without leading
// zeros, and no trailing slash on the path (the client puts "/api/" after
// the path whether or not it ends with one). IPv6 hosts keep their
// brackets, and a zone keeps its case.
func NormalizeBaseURL(u *url.URL) *url.URL {
	n := *u
	n.Scheme = strings.ToLower(u.Scheme)
	host := u.Hostname()
	if addr, zone, ok := strings.Cut(host, "%"); ok {
		host = strings.ToLower(addr) + "%" + zone
	} else {
		host = strings.ToLower(host)
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := strings.TrimLeft(u.Port(), "0"); port != "" && port != defaultPorts[n.Scheme] {
		host += ":" + port
	}
	n.Host = host
	n.Path = strings.TrimRight(u.Path, "/")
	n.RawPath = ""
	if u.RawPath != "" {
		// Escapes that change the meaning, such as %2F, stay; those of
		// characters that need none go, as RFC 3986 section 6.2.2 has it.
		if raw := normalizeEscapes(strings.TrimRight(u.RawPath, "/")); raw != n.EscapedPath() {
			n.RawPath = raw
		}
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
