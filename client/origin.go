package client

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

var (
	defaultPorts = map[string]string{"http": "80", "https": "443"}
	pctEscape    = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)
)

// Bounds of a /probe target; the host's are a DNS name's (RFC 1035).
const (
	MaxTargetBytes = 2048
	maxHostBytes   = 253
	maxLabelBytes  = 63
	maxRedirects   = 5
)

// endpointURL joins a path below the base URL, keeping the escapes of its prefix.
func (c *Client) endpointURL(rel string) *url.URL {
	u := *c.cfg.BaseURL
	u.RawPath = strings.TrimRight(c.cfg.BaseURL.EscapedPath(), "/") + "/" + rel
	u.Path, _ = url.PathUnescape(u.RawPath)
	return &u
}

type origin struct{ scheme, host, port string } // the port explicit

func originOf(u *url.URL) origin {
	scheme := strings.ToLower(u.Scheme)
	return origin{scheme, strings.ToLower(u.Hostname()), cmp.Or(u.Port(), defaultPorts[scheme])}
}

// String renders the origin with its host bounded, as one from the service may not be.
func (o origin) String() string {
	if len(o.host) > maxHostBytes {
		o.host = o.host[:maxHostBytes] + "…"
	}
	return o.scheme + "://" + net.JoinHostPort(o.host, o.port)
}

// originGuard stops a request to another origin, or without a usable key, before a credential is added.
type originGuard struct {
	allowed origin
	t       *Transport
}

// RoundTrip also blanks a redirect's Location that is no URL, so that net/http answers the 3xx, not an error.
func (g *originGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	err := errForeignOrigin
	if originOf(req.URL) == g.allowed {
		err = g.t.checkKey()
	}
	if err != nil { // the client's GETs carry no body to close
		return nil, err
	}
	resp, err := g.t.rt.RoundTrip(req)
	g.t.redact.refresh()
	if err == nil && resp.StatusCode/100 == 3 {
		if _, perr := req.URL.Parse(resp.Header.Get("Location")); perr != nil {
			resp.Header.Set("Location", "")
		}
	}
	return resp, err
}

func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if originOf(req.URL) != c.origin || len(via) >= maxRedirects {
		return http.ErrUseLastResponse
	}
	return nil
}

// redirect shows the Location of a 3xx answer and says why the redirect was not followed.
func (c *Client) redirect(resp *http.Response) (shown, why string) {
	loc := resp.Header.Values("Location")
	if len(loc) == 0 || resp.StatusCode/100 != 3 {
		return "", ""
	}
	u, err := url.Parse(loc[0])
	if err != nil || loc[0] == "" {
		return "(not a valid URL)", "redirect to a Location that is no URL not followed"
	}
	shown, target := c.shown(RedactURL(u), maxShown), resp.Request.URL.ResolveReference(u)
	if o := originOf(target); o != c.origin {
		return shown, fmt.Sprintf("redirect to %s, another origin than %s, not followed: the key is never sent there", o, c.origin)
	}
	switch resp.StatusCode { // those net/http follows
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return shown, fmt.Sprintf("redirect not followed after %d redirects", maxRedirects)
	}
	return shown, ""
}

// ParseBaseURL parses and checks a base URL; its errors never repeat the input.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a valid URL: give an absolute http or https URL such as https://deploy.example.com")
	}
	return u, validateBaseURL(u)
}

func validateBaseURL(u *url.URL) error {
	switch {
	case u == nil:
		return errors.New("no base URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("not an absolute http or https URL such as https://deploy.example.com")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("URL has no host")
	case strings.ContainsFunc(u.Hostname(), func(r rune) bool { return r >= utf8.RuneSelf }): // Go dials the IDNA form
		return errors.New("URL host must be ASCII: give an internationalised name in its xn-- form")
	case u.User != nil:
		return ErrURLCredentials
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("URL must not have a query")
	case u.Fragment != "":
		return errors.New("URL must not have a fragment")
	}
	if n, err := strconv.Atoi(cmp.Or(u.Port(), "1")); err != nil || n < 1 || n > 65535 {
		return errors.New("URL port must be a number from 1 to 65535")
	}
	return nil
}

// ParseTarget checks a /probe target as ParseBaseURL does and within the bounds above, and returns it in one spelling.
func ParseTarget(raw string) (*url.URL, error) {
	if len(raw) > MaxTargetBytes {
		return nil, fmt.Errorf("URL is longer than %d bytes", MaxTargetBytes)
	}
	u, err := ParseBaseURL(raw)
	switch {
	case err != nil:
		return nil, err
	case strings.Contains(u.Hostname(), "%"):
		return nil, errors.New("URL host must not be an IPv6 address with a zone (%25)")
	case !HostWithinBounds(u.Hostname()):
		return nil, fmt.Errorf("URL host is longer than %d bytes or has a label longer than %d", maxHostBytes, maxLabelBytes)
	}
	if u := normalizeBaseURL(u); len(u.String()) <= MaxTargetBytes { // escapes may lengthen it
		return u, nil
	}
	return nil, fmt.Errorf("URL is longer than %d bytes once its bytes are escaped", MaxTargetBytes)
}

// HostWithinBounds tells whether host is within maxHostBytes and maxLabelBytes.
func HostWithinBounds(host string) bool {
	return len(host) <= maxHostBytes &&
		!slices.ContainsFunc(strings.Split(host, "."), func(l string) bool { return len(l) > maxLabelBytes })
}

// normalizeBaseURL spells a base URL one way: lower case, canonical IPv6, no default port or trailing slash, RFC 3986 escapes.
func normalizeBaseURL(u *url.URL) *url.URL {
	n, o := *u, originOf(u)
	n.Scheme, n.Host = o.scheme, o.host
	if a, err := netip.ParseAddr(o.host); err == nil && strings.HasPrefix(u.Host, "[") {
		n.Host = "[" + a.String() + "]"
	}
	if port := strings.TrimLeft(o.port, "0"); port != defaultPorts[o.scheme] {
		n.Host += ":" + port
	}
	raw := pctEscape.ReplaceAllStringFunc(strings.TrimRight(u.EscapedPath(), "/"), func(e string) string {
		v, _ := strconv.ParseUint(e[1:], 16, 8)
		if c := byte(v); 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			return string(c)
		}
		return strings.ToUpper(e)
	})
	n.Path, _ = url.PathUnescape(raw)
	n.RawPath = raw // used by EscapedPath only where it differs from Path's default encoding
	return &n
}
