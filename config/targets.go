package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/deployment-service/deployment_service_exporter/client"
)

const anyPort = "*" // the port of a pattern that matches every port

// targetPattern is one entry of a module's targets, in /probe's spelling: "*" stands for a whole host label or the port.
type targetPattern struct {
	scheme, path string
	labels       []string
	port         string // "" for the scheme's default, anyPort, or a number
	kind         hostKind
	concrete     string // the target itself when the pattern has no "*"
}

// parseTargetPattern reads one entry of targets. Its errors do not repeat it.
func parseTargetPattern(raw string) (targetPattern, error) {
	var p targetPattern
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return p, errors.New("not an absolute http or https URL such as https://deploy.example.com")
	}
	authority, path, _ := strings.Cut(rest, "/")
	if a, ok := strings.CutSuffix(authority, ":"+anyPort); ok { // which net/url refuses
		authority, p.port = a, anyPort
	}
	switch port := strings.LastIndex(authority, ":"); {
	case port > strings.LastIndex(authority, "]") && strings.Contains(authority[port:], "*"):
		return p, errors.New(`"*" stands for the whole port, as in http://127.0.0.1:*, not part of one`)
	case strings.ContainsAny(path, "*?#"):
		return p, errors.New(`"*" stands for a host label or the port, never for part of the path; a query or fragment has no place in a target`)
	}
	u, err := client.ParseTarget(scheme + "://" + authority + "/" + path)
	if err != nil {
		return p, err
	}
	p.kind, p.labels = hostOf(u)
	if p.kind == kindName && net.ParseIP(strings.ReplaceAll(u.Hostname(), "*", "0")) != nil { // "*" for octets
		p.kind = kindIPv4
	}
	switch {
	case slices.Contains(p.labels, ""):
		return p, errors.New("host has an empty label (two dots in a row, or a dot at an end)")
	case slices.ContainsFunc(p.labels, func(l string) bool { return l != "*" && strings.Contains(l, "*") }):
		return p, errors.New(`"*" must stand for one whole host label, as in https://*.deploy.example.com, not part of one`)
	case p.kind == kindName && len(p.labels) > 1 && p.labels[len(p.labels)-1] == "*":
		return p, errors.New(`"*" cannot stand for the last label of a host name (its top-level domain): name the domain`)
	}
	p.scheme, p.path = u.Scheme, u.EscapedPath()
	if p.port != anyPort {
		p.port = u.Port()
		if !slices.Contains(p.labels, "*") {
			p.concrete = u.String()
		}
	}
	return p, nil
}

// matches tells whether target, as client.ParseTarget returns it (within the bounds), is one the pattern names.
func (p targetPattern) matches(target *url.URL) bool {
	if target.Scheme != p.scheme || target.EscapedPath() != p.path || p.port != anyPort && target.Port() != p.port {
		return false
	}
	// "*" never matches an address for a name, nor a name that a resolver reads as an address (0x7f.1, 127.1).
	kind, labels := hostOf(target)
	if kind != p.kind || len(labels) != len(p.labels) || kind == kindName && endsInNumber(labels) && slices.Contains(p.labels, "*") {
		return false
	}
	for i, l := range labels {
		if l == "" || p.labels[i] != "*" && p.labels[i] != l {
			return false
		}
	}
	return true
}

type hostKind uint8 // a host name, an IPv4 or an IPv6 address

const (
	kindName hostKind = iota
	kindIPv4
	kindIPv6
)

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

// endsInNumber tells whether a name's last label is a number, which inet_aton reads as part of an address.
func endsInNumber(labels []string) bool {
	l := strings.ToLower(labels[len(labels)-1])
	if hex, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// parseTargets reads the module's targets; credentials need some or allow_any_target.
func (m *Module) parseTargets() error {
	for i, raw := range m.Targets {
		p, err := parseTargetPattern(raw)
		if err != nil {
			return fmt.Errorf("targets[%d]: %w", i, err)
		}
		m.patterns = append(m.patterns, p)
	}
	if what := m.credentials(); len(m.Targets) == 0 && !m.AllowAnyTarget && what != "" {
		return fmt.Errorf("carries credentials (%s) but lists no targets: add targets: [https://deploy.example.com] naming the services they may go to, or allow_any_target: true to send them wherever /probe is told", what)
	}
	return nil
}

// credentials names the module's settings that lend authority (a proxy's too), or "".
func (m *Module) credentials() string {
	var what []string // a setting's credentials come one after the other
	client.Credentials(&m.HTTPClientConfig, func(setting, _, _ string) { what = append(what, moduleBlock+"."+setting) })
	return strings.Join(slices.Compact(what), ", ")
}

// CheckTarget tells why /probe may not use the module with target, nil if it may.
func (m *Module) CheckTarget(target *url.URL) error {
	if m.AllowAnyTarget || len(m.patterns) == 0 && m.credentials() == "" ||
		slices.ContainsFunc(m.patterns, func(p targetPattern) bool { return p.matches(target) }) {
		return nil
	}
	return errors.New("its targets do not list this target, and its credentials go only to those: probe one of them, or add the target to the module's targets")
}

// ConcreteTargets returns the targets the module lists without a "*", each once.
func (m *Module) ConcreteTargets() []string {
	var out []string
	for _, p := range m.patterns {
		if p.concrete != "" && !slices.Contains(out, p.concrete) {
			out = append(out, p.concrete)
		}
	}
	return out
}
