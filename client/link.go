package client

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
)

// errBadLink reports a Link header that does not follow RFC 8288.
var errBadLink = errors.New(`not of the RFC 8288 form <URL>; rel="next"`)

// linkParam is one parameter of a link: a name and a token or quoted string, or nothing.
const linkParam = `;[ \t]*(?:([^ \t;,="<>]+)(?:[ \t]*=[ \t]*([^ \t;,="<>]+|"(?:[^"\\]|\\.)*"))?)?[ \t]*`

var (
	linkValue  = regexp.MustCompile(`^<([^>]*)>[ \t]*((?:` + linkParam + `)*)(?:,|$)`)
	linkParams = regexp.MustCompile(linkParam)
	linkEscape = regexp.MustCompile(`\\(.)`)
)

// nextLink returns the target of the first link in the Link headers of h
// whose rel names "next" (RFC 8288, as Django REST framework and
// GitHub-style APIs send it), and whether there is one; "<>" is the page itself.
func nextLink(h http.Header) (target string, found bool, err error) {
	for _, s := range h.Values("Link") {
		for s = strings.TrimLeft(s, " \t,"); s != ""; s = strings.TrimLeft(s, " \t,") {
			m := linkValue.FindStringSubmatch(s)
			if m == nil {
				return "", false, errBadLink
			}
			s = s[len(m[0]):]
			for r := range strings.FieldsSeq(linkRel(m[2])) {
				if strings.EqualFold(r, "next") {
					return strings.TrimSpace(m[1]), true, nil
				}
			}
		}
	}
	return "", false, nil
}

// linkRel returns the value of the first rel parameter among params.
func linkRel(params string) string {
	for _, p := range linkParams.FindAllStringSubmatch(params, -1) {
		if strings.EqualFold(p[1], "rel") {
			if v := p[2]; strings.HasPrefix(v, `"`) {
				return linkEscape.ReplaceAllString(v[1:len(v)-1], "$1")
			}
			return p[2]
		}
	}
	return ""
}
