package config

import (
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// FuzzTargetPattern: a target that a pattern accepts has a host the
// pattern names, read from the pattern's own text: the host itself when
// it has no "*", else one label for each "*" and the others as written,
// and then never an address in brackets or one that a resolver would read
// in a name, unless the pattern is an IPv4 one. The target has no zone
// and keeps within the bounds.
func FuzzTargetPattern(f *testing.F) {
	for _, s := range [][2]string{
		{"http://*:8080/deploy", "http://[::ffff:127.0.0.1%25lo]:8080/deploy"},
		{"http://*:8080/deploy", "http://2130706433:8080/deploy"},
		{"http://*:8080/deploy", "http://0x7f000001:8080/deploy"},
		{"http://*:8080/deploy", "http://localhost:8080/deploy"},
		{"http://*.1", "http://127.1"},
		{"https://*.deploy.example.com", "https://eu.deploy.example.com"},
		{"https://*.deploy.example.com", "https://a.b.deploy.example.com"},
		{"http://10.0.*.*:*", "http://10.0.3.4:8080"},
		{"http://10.0.*.*:*", "http://10.0.attacker.example"},
		{"http://[::1]:*", "http://[0::1]:9000"},
		{"https://deploy.example.com/a%2Fb", "https://DEPLOY.example.com:443/a%2fb/"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, target string) {
		p, err := parseTargetPattern(pattern)
		if err != nil {
			return
		}
		u, err := client.ParseTarget(target)
		if err != nil || !p.matches(u) {
			return
		}
		host := u.Hostname()
		if strings.Contains(host, "%") || !client.HostWithinBounds(host) || len(target) > client.MaxTargetBytes {
			t.Fatalf("%q accepts %q, with a zone or beyond the bounds", pattern, target)
		}
		if !namesHost(patternHost(pattern), host, strings.HasPrefix(u.Host, "[")) {
			t.Fatalf("%q accepts %q, whose host %s it does not name", pattern, target, host)
		}
	})
}

// patternHost is the host of a targets entry as written, in lower case.
func patternHost(pattern string) string {
	_, rest, _ := strings.Cut(pattern, "://")
	authority, _, _ := strings.Cut(rest, "/")
	authority = strings.TrimSuffix(authority, ":*")
	if h, _, ok := strings.Cut(strings.TrimPrefix(authority, "["), "]"); ok {
		return strings.ToLower(h)
	}
	if i := strings.LastIndex(authority, ":"); i >= 0 {
		authority = authority[:i]
	}
	return strings.ToLower(authority)
}

// namesHost tells whether the pattern's host ph names the target's host
// th (bracketed when in brackets).
func namesHost(ph, th string, bracketed bool) bool {
	if !strings.Contains(ph, "*") {
		if bracketed {
			a, errA := netip.ParseAddr(ph)
			b, errB := netip.ParseAddr(th)
			return errA == nil && errB == nil && a == b
		}
		return ph == th
	}
	pl, tl := strings.Split(ph, "."), strings.Split(th, ".")
	if bracketed || len(pl) != len(tl) {
		return false
	}
	for i := range pl {
		if tl[i] == "" || pl[i] != "*" && pl[i] != tl[i] {
			return false
		}
	}
	// An address, in any spelling a resolver takes, only by an IPv4
	// pattern and only as a dotted quad.
	if resolverAddress(th) {
		return len(pl) == 4 && net.ParseIP(th) != nil && !regexp.MustCompile(`[^0-9.*]`).MatchString(ph)
	}
	return true
}

var numberPart = regexp.MustCompile(`^(0[xX][0-9a-fA-F]*|[0-9]+)$`)

// resolverAddress tells whether inet_aton would read host as an IPv4
// address: one to four numbers, decimal, octal or hexadecimal.
func resolverAddress(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		if !numberPart.MatchString(p) {
			return false
		}
	}
	return true
}
