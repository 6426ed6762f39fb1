package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestNextLink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string // Link header fields
		want   string
	}{
		{"no header", nil, ""},
		{"empty header", []string{""}, ""},
		{"DRF link header pagination", []string{`<https://h.example/api/x/?page=3>; rel="next", <https://h.example/api/x/>; rel="prev"`}, "https://h.example/api/x/?page=3"},
		{"next after other relations", []string{`<https://h.example/api/x/>; rel="first", <https://h.example/api/x/?page=3>; rel="next"`}, "https://h.example/api/x/?page=3"},
		{"GitHub style", []string{`<https://api.github.example/repos?page=3&per_page=100>; rel="next", <https://api.github.example/repos?page=50&per_page=100>; rel="last"`},
			"https://api.github.example/repos?page=3&per_page=100"},
		{"relative target", []string{`</api/x/?page=3>; rel="next"`}, "/api/x/?page=3"},
		{"token rel", []string{`<?page=3>;rel=next`}, "?page=3"},
		{"rel is case-insensitive", []string{`<a>; REL="Next"`}, "a"},
		{"rel lists several types", []string{`<a>; rel="prefetch next"`}, "a"},
		{"rel lists several types with tabs", []string{"<a>; rel=\"prefetch\tNEXT\""}, "a"},
		{"next only as part of a word", []string{`<a>; rel="nextpage"`, `<b>; rel="next-archive"`}, ""},
		{"whitespace everywhere", []string{" \t<a> \t; \t rel \t= \t\"next\" \t, <b>; rel=prev "}, "a"},
		{"empty list elements", []string{`, ,<a>; rel="prev",, <b>; rel="next",`}, "b"},
		{"commas and semicolons inside the target", []string{`<https://h.example/a;b,c?x=1,2>; rel="next"`}, "https://h.example/a;b,c?x=1,2"},
		{"commas and semicolons inside quoted values", []string{`<a>; title="x, y; rel=next"; rel="prev", <b>; rel="next"`}, "b"},
		{"escaped quotes in quoted values", []string{`<a>; title="say \"next\"", <b>; title="\\"; rel="next"`}, "b"},
		{"other parameters around rel", []string{`<a>; type="application/json"; rel="next"; hreflang=en`}, "a"},
		{"only the first rel counts", []string{`<a>; rel="prev"; rel="next", <b>; rel="next"; rel="prev"`}, "b"},
		{"parameter without value", []string{`<a>; crossorigin; rel="next"`}, "a"},
		{"empty parameters", []string{`<a>;; rel="next";`}, "a"},
		{"several Link headers", []string{`<a>; rel="first"`, `<b>; rel="next"`}, "b"},
		{"the first next wins", []string{`<a>; rel="next"`, `<b>; rel="next"`}, "a"},
		{"other parameters quoted with escapes", []string{`<a>; rel="next"; title="\"x\", y"`}, "a"},
		{"target with spaces around it", []string{`< a >; rel="next"`}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.header {
				h.Add("Link", v)
			}
			got, found, err := nextLink(h)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if got != tc.want || found != (tc.want != "") {
				t.Errorf("next %q (found %v), want %q", got, found, tc.want)
			}
		})
	}
}

func TestNextLinkMalformed(t *testing.T) {
	for _, v := range []string{
		`https://h.example/?page=2; rel="next"`,  // no angle brackets
		`<https://h.example/?page=2; rel="next"`, // unclosed
		`<a>; rel="next`,                         // unclosed quote
		`<a>; rel=`,                              // no value
		`<a>; ="next"`,                           // no name
		`<a> rel="next"`,                         // no semicolon
		`<a>; rel="next" <b>`,                    // no comma
		`<a>; rel=next"x"`,                       // junk after a token
		`<a>; rel="prev", junk`,                  // not a link-value
		`<a>; title="x\`,                         // unclosed quote after an escape
		`<a>; rel="next"x`,                       // junk after a quoted string
	} {
		h := http.Header{"Link": {v}}
		if got, _, err := nextLink(h); !errors.Is(err, errBadLink) {
			t.Errorf("%s: next %q, error %v; want errBadLink", v, got, err)
		}
	}
}

// TestNextLinkEmptyTarget: "<>" is a link to the page itself, found like
// any other, so that the walk can call it a loop rather than the end.
func TestNextLinkEmptyTarget(t *testing.T) {
	for _, v := range []string{`<>; rel="next"`, `< >; rel="next"`, `<a>; rel="prev", <>; rel=next`} {
		got, found, err := nextLink(http.Header{"Link": {v}})
		if err != nil || !found || strings.TrimSpace(got) != "" {
			t.Errorf("%s: next %q, found %v, error %v; want an empty target, found", v, got, found, err)
		}
	}
}
