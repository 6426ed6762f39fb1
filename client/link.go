package client

import (
	"errors"
	"net/http"
	"strings"
)

// errBadLink reports a Link header that does not follow RFC 8288.
var errBadLink = errors.New(`not of the RFC 8288 form <URL>; rel="next"`)

// nextLink returns the target of the first link in the Link headers of h
// whose rel names "next" (RFC 8288, as Django REST framework and
// GitHub-style APIs send it), and whether there is one; "<>" is the page
// itself.
func nextLink(h http.Header) (target string, found bool, err error) {
	for _, s := range h.Values("Link") {
		for s = strings.TrimLeft(s, " \t,"); s != ""; s = strings.TrimLeft(s, " \t,") {
			end := strings.IndexByte(s, '>')
			if s[0] != '<' || end < 0 {
				return "", false, errBadLink
			}
			target = strings.TrimSpace(s[1:end])
			var rel string
			if rel, s, err = linkParams(s[end+1:]); err != nil {
				return "", false, err
			}
			for r := range strings.FieldsSeq(rel) {
				if strings.EqualFold(r, "next") {
					return target, true, nil
				}
			}
		}
	}
	return "", false, nil
}

// linkParams reads the parameters of one link, up to the comma that ends
// it, and returns the value of its first rel and what follows.
func linkParams(s string) (rel, rest string, err error) {
	seen := false
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" || s[0] == ',' {
			return rel, s, nil
		}
		if s[0] != ';' {
			return "", "", errBadLink
		}
		name, value := "", ""
		name, s = cutToken(strings.TrimLeft(s[1:], " \t"))
		if s = strings.TrimLeft(s, " \t"); strings.HasPrefix(s, "=") {
			if value, s, err = paramValue(strings.TrimLeft(s[1:], " \t")); err != nil || name == "" {
				return "", "", errBadLink
			}
		}
		if strings.EqualFold(name, "rel") && !seen {
			rel, seen = value, true
		}
	}
}

// paramValue reads a token or a quoted string at the start of s.
func paramValue(s string) (value, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		if value, rest = cutToken(s); value == "" {
			return "", "", errBadLink
		}
		return value, rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '"':
			return b.String(), s[i+1:], nil
		case s[i] == '\\' && i+1 < len(s):
			i++
		}
		b.WriteByte(s[i])
	}
	return "", "", errBadLink
}

// cutToken splits s after its leading token, possibly empty.
func cutToken(s string) (token, rest string) {
	i := strings.IndexAny(s, " \t;,=\"<>")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}
