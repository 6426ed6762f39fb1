package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// anyPort is the port of a pattern that matches every port.
const anyPort = "*"

// TargetPattern is one entry of a module's targets: a base URL, as /probe
// takes it, where "*" may stand for one whole host label or for the port.
// It is kept in the spelling /probe normalises targets to, so that a
// trailing slash, a default port or upper case never decide a match.
type TargetPattern struct {
	scheme string
	// labels are the host's dot-separated labels, "*" for any one label;
	// an IP literal is a single label.
	labels []string
	// port is "" for the scheme's default, anyPort, or a number.
	port string
	// path is the escaped path without a trailing slash.
	path string
	// kind tells a name from an address. An IPv4 pattern, "*" standing
	// for octets, matches IPv4 literals only, never a name such as
	// 10.0.attacker.example; an IPv6 one, which has no "*", only itself.
	kind hostKind
	// concrete is the target itself when the pattern has no "*".
	concrete *url.URL
}

// ParseTargetPattern reads one entry of targets. Its errors say what is
// wrong without repeating the entry.
func ParseTargetPattern(raw string) (TargetPattern, error) {
	var p TargetPattern
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return p, errors.New("not an absolute http or https URL such as https://deploy.example.com")
	}
	authority, path, _ := strings.Cut(rest, "/")
	if strings.Contains(authority, "@") {
		return p, client.ErrURLCredentials
	}
	// net/url takes "*" in a host but not as a port, so the port
	// wildcard is taken off before parsing and put back after.
	if a, ok := strings.CutSuffix(authority, ":"+anyPort); ok {
		authority, p.port = a, anyPort
	}
	switch port := strings.LastIndex(authority, ":"); {
	case strings.HasPrefix(authority, "[") && strings.Contains(authority, "*"):
		return p, errors.New(`"*" cannot stand for part of an IPv6 address`)
	case port > strings.LastIndex(authority, "]") && strings.Contains(authority[port:], "*"):
		return p, errors.New(`"*" stands for the whole port, as in http://127.0.0.1:*, not part of one`)
	}
	if strings.ContainsAny(path, "*?#") {
		return p, errors.New(`"*" stands for a host label or the port, never for part of the path; a query or fragment has no place in a target`)
	}
	u, err := client.ParseTarget(scheme + "://" + authority + "/" + path)
	if err != nil {
		return p, err
	}
	host := u.Hostname()
	p.kind, p.labels = hostOf(u)
	for _, l := range p.labels {
		if l == "" {
			return p, errors.New("host has an empty label (two dots in a row, or a dot at an end)")
		}
		if l != "*" && strings.Contains(l, "*") {
			return p, errors.New(`"*" must stand for one whole host label, as in https://*.deploy.example.com, not part of one`)
		}
	}
	if p.kind == kindName && isIPv4Pattern(p.labels) {
		p.kind = kindIPv4
	}
	if p.kind == kindName && len(p.labels) > 1 && p.labels[len(p.labels)-1] == "*" {
		return p, errors.New(`"*" cannot stand for the last label of a host name (its top-level domain): name the domain`)
	}
	p.scheme, p.path = u.Scheme, u.EscapedPath()
	if p.port != anyPort {
		p.port = u.Port()
	}
	if p.port != anyPort && !strings.Contains(host, "*") {
		p.concrete = u
	}
	return p, nil
}

// Matches tells whether target, as /probe normalised it, is one that the
// pattern names. A "*" label matches exactly one non-empty label, so it
// never reaches across a dot.
func (p TargetPattern) Matches(target *url.URL) bool {
	if target.Scheme != p.scheme || target.EscapedPath() != p.path {
		return false
	}
	if p.port != anyPort && target.Port() != p.port {
		return false
	}
	// An address matches an address pattern, a name a name pattern:
	// "*" never turns one into the other. Nor does it match a name that
	// some resolver reads as an address (2130706433, 0x7f.1, 127.1).
	kind, labels := hostOf(target)
	if kind != p.kind || len(labels) != len(p.labels) || !client.HostWithinBounds(target.Hostname()) ||
		kind == kindName && endsInNumber(labels) && slices.Contains(p.labels, "*") {
		return false
	}
	for i, l := range labels {
		if l == "" || p.labels[i] != "*" && p.labels[i] != l {
			return false
		}
	}
	return true
}

// hostKind tells a host name from an IPv4 or an IPv6 address.
type hostKind uint8

const (
	kindName hostKind = iota
	kindIPv4
	kindIPv6
)

// hostOf returns the kind of u's host and its labels: a host in brackets
// is an IPv6 address, a single label, whatever it holds.
func hostOf(u *url.URL) (hostKind, []string) {
	host := u.Hostname()
	switch {
	case strings.HasPrefix(u.Host, "["):
		return kindIPv6, []string{host}
	case net.ParseIP(host) != nil:
		return kindIPv4, strings.Split(host, ".")
	}
	return kindName, strings.Split(host, ".")
}

// endsInNumber tells whether a name's last label is a number, decimal or
// 0x-hexadecimal, which resolvers after inet_aton (and browsers, after
// the WHATWG URL standard) read as part of an IPv4 address.
func endsInNumber(labels []string) bool {
	l := strings.ToLower(labels[len(labels)-1])
	if hex, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// isIPv4Pattern tells whether labels are an IPv4 address, some octets
// possibly "*".
func isIPv4Pattern(labels []string) bool {
	if len(labels) != 4 {
		return false
	}
	for _, l := range labels {
		if l == "*" {
			continue
		}
		if n, err := strconv.Atoi(l); err != nil || n < 0 || n > 255 {
			return false
		}
	}
	return true
}

// Concrete returns the target the pattern names when it has no "*", in
// /probe's spelling, and nil otherwise.
func (p TargetPattern) Concrete() *url.URL { return p.concrete }

// parseTargets reads the module's targets and refuses a module whose
// credentials could go to any service /probe is told of without its
// author saying so.
func (m *Module) parseTargets() error {
	m.patterns = make([]TargetPattern, 0, len(m.Targets))
	for i, raw := range m.Targets {
		p, err := ParseTargetPattern(raw)
		if err != nil {
			// An entry with credentials or a query in it is not repeated.
			if strings.ContainsAny(raw, "@?") {
				return fmt.Errorf("targets[%d]: %w", i, err)
			}
			return fmt.Errorf("targets[%d] %q: %w", i, raw, err)
		}
		m.patterns = append(m.patterns, p)
	}
	if len(m.Targets) == 0 && !m.AllowAnyTarget {
		if what := m.credentials(); what != "" {
			return fmt.Errorf("carries credentials (%s) but lists no targets: add targets: [https://deploy.example.com] naming the services they may go to, or allow_any_target: true to send them wherever /probe is told", what)
		}
	}
	return nil
}

// credentials names the settings of the module that lend its holder's
// authority to the service it is used with, or returns "" when it has
// none: the key, secret header values, a TLS client certificate, and a
// proxy's password or connect headers (the proxy forwards to any target).
func (m *Module) credentials() string {
	c := &m.HTTPClientConfig
	var what []string
	if a := c.Authorization; a != nil && (a.Credentials != "" || a.CredentialsFile != "" || a.CredentialsRef != "") {
		what = append(what, moduleBlock+".authorization")
	}
	if c.HTTPHeaders != nil {
		for _, name := range slices.Sorted(maps.Keys(c.HTTPHeaders.Headers)) {
			if h := c.HTTPHeaders.Headers[name]; len(h.Secrets) > 0 || len(h.Files) > 0 {
				what = append(what, moduleBlock+".http_headers."+name)
			}
		}
	}
	if t := c.TLSConfig; t.Cert != "" || t.CertFile != "" || t.Key != "" || t.KeyFile != "" {
		what = append(what, moduleBlock+".tls_config (a client certificate)")
	}
	if u := c.ProxyURL.URL; u != nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			what = append(what, moduleBlock+".proxy_url (a password)")
		}
	}
	if len(c.ProxyConnectHeader) > 0 {
		what = append(what, moduleBlock+".proxy_connect_header")
	}
	return strings.Join(what, ", ")
}

// CheckTarget tells whether /probe may use the module with target, in
// /probe's spelling: nil when it may, else why not, in one line.
func (m *Module) CheckTarget(target *url.URL) error {
	if m.AllowAnyTarget || len(m.patterns) == 0 && m.credentials() == "" {
		return nil
	}
	for _, p := range m.patterns {
		if p.Matches(target) {
			return nil
		}
	}
	return errors.New("its targets do not list this target, and its credentials go only to those: probe one of them, or add the target to the module's targets")
}

// ConcreteTargets returns the targets the module lists without a "*", in
// /probe's spelling and the file's order, each once: what service
// discovery hands Prometheus to probe.
func (m *Module) ConcreteTargets() []*url.URL {
	var out []*url.URL
	seen := make(map[string]bool)
	for _, p := range m.patterns {
		if u := p.Concrete(); u != nil && !seen[u.String()] {
			seen[u.String()] = true
			out = append(out, u)
		}
	}
	return out
}
