package main

import (
	"errors"
	"slices"
	"strings"
)

// targetPattern is one entry of a module's targets, or a /probe target, in
// the spelling the exporter compares them in: lower-case scheme and host,
// no default port, no trailing slash. In an entry, "*" stands for one whole
// host label, or (as the port) for any port. The exporter has the last
// word (deploy/test/configcheck.sh runs its --config.check on the rendered
// files); this is what the check needs to tell which targets a module's key
// may go to, and which of them /sd hands Prometheus.
type targetPattern struct {
	scheme string
	labels []string // the host's labels, "*" for any one; an IPv6 literal is one label
	port   string   // "" for the scheme's default, "*" for any
	path   string   // without a trailing slash
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// parseTarget reads a targets entry or a target.
func parseTarget(raw string) (targetPattern, error) {
	var p targetPattern
	scheme, rest, ok := strings.Cut(raw, "://")
	p.scheme = strings.ToLower(scheme)
	if !ok || defaultPorts[p.scheme] == "" {
		return p, errors.New("not an absolute http:// or https:// URL")
	}
	authority, path, _ := strings.Cut(rest, "/")
	if strings.Contains(authority, "@") {
		return p, errors.New("credentials in a URL are refused")
	}
	if strings.ContainsAny(path, "*?#") {
		return p, errors.New(`no "*", query or fragment may be in the path`)
	}
	host := strings.ToLower(authority)
	if i := strings.LastIndex(host, ":"); i > strings.LastIndex(host, "]") {
		host, p.port = host[:i], host[i+1:]
		if p.port != "*" && (p.port == "" || strings.Trim(p.port, "0123456789") != "") {
			return p, errors.New(`the port must be a number or "*"`)
		}
		if p.port == defaultPorts[p.scheme] {
			p.port = ""
		}
	}
	if strings.HasPrefix(host, "[") {
		p.labels = []string{host}
	} else {
		p.labels = strings.Split(host, ".")
	}
	for _, l := range p.labels {
		if l == "" || l != "*" && strings.Contains(l, "*") {
			return p, errors.New(`the host needs non-empty labels, and "*" stands for a whole one`)
		}
	}
	p.path = strings.TrimRight("/"+path, "/")
	return p, nil
}

// concrete reports whether the entry names one service: no "*" in it. Only
// such entries are what /sd hands Prometheus.
func (p targetPattern) concrete() bool {
	return p.port != "*" && !slices.Contains(p.labels, "*")
}

// matches reports whether the entry names target, a concrete one.
func (p targetPattern) matches(target targetPattern) bool {
	if p.scheme != target.scheme || p.path != target.path || p.port != "*" && p.port != target.port ||
		len(p.labels) != len(target.labels) {
		return false
	}
	for i, l := range p.labels {
		if l != "*" && l != target.labels[i] {
			return false
		}
	}
	return true
}

// String spells the entry as /probe and /sd do.
func (p targetPattern) String() string {
	s := p.scheme + "://" + strings.Join(p.labels, ".")
	if p.port != "" {
		s += ":" + p.port
	}
	return s + p.path
}
