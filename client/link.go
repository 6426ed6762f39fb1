package client

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// This file reads RFC 8288 Link headers, the way header-based pagination
// (Django REST framework's LinkHeaderPagination, GitHub-style APIs) names
// the next page of a plain array:
//
//	Link: <https://h/api/x/?page=3>; rel="next", <https://h/api/x/?page=1>; rel="prev"
//
// The grammar (RFC 8288 section 3, with RFC 9110's lists and quoted
// strings):
//
//	Link       = #link-value
//	link-value = "<" URI-Reference ">" *( OWS ";" OWS link-param )
//	link-param = token BWS [ "=" BWS ( token / quoted-string ) ]
//
// A header may hold several link-values, and a response several Link
// headers. Commas and semicolons inside <…> and inside quoted strings do
// not separate anything.

// errBadLink reports a Link header that does not follow the grammar.
var errBadLink = errors.New(`not of the RFC 8288 form <URL>; rel="next"`)

// link is one link-value of a Link header: its target, as written, and
// the parameters the exporter reads.
type link struct {
	target string
	// rel is the first "rel" parameter: relation types separated by
	// spaces. Later ones are ignored, as RFC 8288 says.
	rel       string
	anchor    string
	hasAnchor bool
}

// hasRel tells whether the link's relation types include want, compared
// case-insensitively as registered relation types are.
func (l link) hasRel(want string) bool {
	for t := range strings.FieldsSeq(l.rel) {
		if strings.EqualFold(t, want) {
			return true
		}
	}
	return false
}

// parseLinks reads the link-values of one Link header field.
func parseLinks(v string) ([]link, error) {
	p := linkParser{s: v}
	var links []link
	for {
		p.skipListSeparators()
		if p.done() {
			return links, nil
		}
		l, err := p.linkValue()
		if err != nil {
			return nil, err
		}
		links = append(links, l)
		p.skipSpace()
		if !p.done() && p.s[p.i] != ',' {
			return nil, errBadLink
		}
	}
}

// nextLink returns the target of the first link of the Link header fields
// of h whose relation types include "next" and whose context is the page
// itself, and whether there is one: an empty target ("<>") is a link to
// the page itself. page is the URL of the page the header came with,
// against which an anchor is resolved.
func nextLink(h http.Header, page *url.URL) (target string, found bool, err error) {
	for _, v := range h.Values("Link") {
		links, err := parseLinks(v)
		if err != nil {
			return "", false, err
		}
		for _, l := range links {
			if l.hasRel("next") && aboutPage(l, page) {
				return l.target, true, nil
			}
		}
	}
	return "", false, nil
}

// aboutPage tells whether a link's context is the page: it has no anchor,
// or one that resolves to the page. A "next" anchored elsewhere is the
// next of something else.
func aboutPage(l link, page *url.URL) bool {
	if !l.hasAnchor {
		return true
	}
	ref, err := url.Parse(l.anchor)
	if err != nil {
		return false
	}
	a, p := page.ResolveReference(ref), *page
	a.Fragment, a.RawFragment = "", ""
	p.Fragment, p.RawFragment = "", ""
	return a.String() == p.String()
}

// linkParser walks one header field value.
type linkParser struct {
	s string
	i int
}

func (p *linkParser) done() bool { return p.i >= len(p.s) }

func (p *linkParser) skipSpace() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// skipListSeparators skips whitespace and empty list elements.
func (p *linkParser) skipListSeparators() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

// linkValue reads one link-value, starting at its "<".
func (p *linkParser) linkValue() (link, error) {
	var l link
	if p.s[p.i] != '<' {
		return l, errBadLink
	}
	end := strings.IndexByte(p.s[p.i+1:], '>')
	if end < 0 {
		return l, errBadLink
	}
	l.target = strings.TrimSpace(p.s[p.i+1 : p.i+1+end])
	p.i += end + 2
	var seenRel bool
	for {
		p.skipSpace()
		if p.done() || p.s[p.i] != ';' {
			return l, nil
		}
		p.i++
		p.skipSpace()
		name, value, err := p.param()
		if err != nil {
			return l, err
		}
		switch strings.ToLower(name) {
		case "rel":
			if !seenRel {
				l.rel, seenRel = value, true
			}
		case "anchor":
			if !l.hasAnchor {
				l.anchor, l.hasAnchor = value, true
			}
		}
	}
}

// param reads one link-param: a token, then optionally "=" and a token or
// a quoted string. An empty parameter (";;" or a trailing ";") is allowed.
func (p *linkParser) param() (name, value string, err error) {
	name = p.token()
	p.skipSpace()
	if p.done() || p.s[p.i] != '=' {
		return name, "", nil
	}
	if name == "" {
		return "", "", errBadLink
	}
	p.i++
	p.skipSpace()
	if !p.done() && p.s[p.i] == '"' {
		value, err = p.quoted()
		return name, value, err
	}
	value = p.token()
	if value == "" {
		return "", "", errBadLink
	}
	return name, value, nil
}

// token reads a token (RFC 9110 tchar), possibly empty.
func (p *linkParser) token() string {
	start := p.i
	for !p.done() && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a quoted string starting at its opening quote and returns
// it unquoted.
func (p *linkParser) quoted() (string, error) {
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return b.String(), nil
		case c == '\\' && !p.done():
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", errBadLink
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
