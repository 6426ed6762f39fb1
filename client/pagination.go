package client

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// ListResult is the outcome of reading a list view.
type ListResult struct {
	Result
	Count      int64   // the envelope's count, else the entries of every page
	IDs        []int64 // among the first entries asked for
	MissingIDs int     // of those entries, the ones with no id (IDErr names the first)
	IDErr      error
	Pages      int
}

// Projects reads the project list and counts it.
func (c *Client) Projects(ctx context.Context) ListResult {
	return c.list(ctx, EndpointProjects, "api/projects/projects/", 0, nil)
}

// Locations reads and counts the location list, keeping and passing to onIDs the ids of its first wantIDs entries.
func (c *Client) Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) ListResult {
	return c.list(ctx, EndpointLocations, "api/projects/locations/", wantIDs, onIDs)
}

// list walks a list view page by page until it holds a count and the ids it needs.
func (c *Client) list(ctx context.Context, ep Endpoint, rel string, wantIDs int, onIDs func([]int64)) (res ListResult) {
	defer func(start time.Time) { res.Duration = time.Since(start) }(time.Now())
	seen, hasCount := map[[sha256.Size]byte]bool{}, false // seen: pages read, by pageKey
	for u := c.endpointURL(rel); u != nil; {
		res.Pages++
		var page listPage
		var last *url.URL // u after redirects
		var linkErr error
		res.Status, _, res.Err = c.get(ctx, ep, u, res.Pages, func(body io.Reader, resp *http.Response) error {
			var err error
			if page, err = decodeListPage(body, wantIDs-len(res.IDs)-res.MissingIDs); err != nil {
				return fmt.Errorf("page %d: %w", res.Pages, err)
			}
			if last = resp.Request.URL; !page.HasNext {
				page.Next, page.NextNamed, linkErr = nextLink(resp.Header)
			}
			return nil
		})
		if res.Err != nil {
			return res
		}
		seen[pageKey(u)], seen[pageKey(last)] = true, true
		c.noteIDs(&res, page, onIDs)
		switch {
		case res.Pages == 1 && page.HasCount: // the first page's count stands for the list
			res.Count, hasCount = page.Count, true
		case !hasCount:
			res.Count += int64(page.Entries)
		}
		var next *url.URL
		var err error
		if enough := hasCount && len(res.IDs)+res.MissingIDs >= wantIDs; linkErr != nil && !enough {
			err = fmt.Errorf("the Link header of page %d is malformed: %w", res.Pages, linkErr)
		} else if page.NextNamed && !enough {
			next, err = c.nextPage(last, page.Next, seen, res.Pages)
		}
		msg := fmt.Sprintf("%d entries; walk done, count %d", page.Entries, res.Count)
		switch {
		case err != nil:
			res.Err = c.fail(ep, ReasonPagination, res.Status, err)
			msg = fmt.Sprintf("%d entries; walk stopped: %v", page.Entries, res.Err)
		case next != nil:
			from := map[bool]string{true: "next", false: "the Link header's next"}[page.HasNext]
			msg = fmt.Sprintf("%d entries; following %s to %s", page.Entries, from, c.redact.clean(RedactURL(next)))
		}
		traceFrom(ctx).add(TraceRequest{Start: time.Now(), Endpoint: ep, Page: res.Pages, Note: msg, NoteFailed: err != nil})
		u = next
	}
	return res
}

// noteIDs adds a page's ids to res and onIDs, and reports missing ones (only locations are asked for ids).
func (c *Client) noteIDs(res *ListResult, page listPage, onIDs func([]int64)) {
	if res.IDs = append(res.IDs, page.IDs...); len(page.IDs) > 0 && onIDs != nil {
		onIDs(page.IDs)
	}
	if len(page.NoIDs) > 0 && res.IDErr == nil {
		err := fmt.Errorf("location list entry %d (page %d) has no integer \"id\" of 0 or more", page.NoIDs[0], res.Pages)
		res.IDErr = &Error{Endpoint: EndpointLocationDetail, Reason: ReasonInvalidBody, Err: err}
	}
	res.MissingIDs += len(page.NoIDs)
	for range page.NoIDs {
		c.cfg.Observer.ObserveError(EndpointLocationDetail, ReasonInvalidBody)
	}
}

// pageKey names a page for loop detection by its path and query, hashed: every page of a walk has the same origin.
func pageKey(u *url.URL) [sha256.Size]byte { return sha256.Sum256([]byte(u.RequestURI())) }

// nextPage resolves and checks a next link: same origin, not seen, within the page limit.
func (c *Client) nextPage(cur *url.URL, next string, seen map[[sha256.Size]byte]bool, pages int) (*url.URL, error) {
	u, err := cur.Parse(next)
	var why string
	switch {
	case strings.TrimSpace(next) == "":
		why = "is empty, which names the page itself (a pagination loop; null or no link ends a list)"
	case err != nil:
		why = "is not a URL"
	case originOf(u) != c.origin:
		why = fmt.Sprintf("points to %s, another origin than %s", originOf(u), c.origin)
	case seen[pageKey(u)]:
		why = "points to a page already read (a pagination loop)"
	case pages >= c.cfg.MaxPages:
		return nil, fmt.Errorf("list has more than %d pages (the page limit)", c.cfg.MaxPages)
	default:
		u.User, u.Fragment, u.RawFragment = nil, "", "" // credentials in a link would replace the key
		return u, nil
	}
	return nil, fmt.Errorf("next link after page %d %s", pages, why)
}

var (
	linkTarget = regexp.MustCompile(`^<([^>]*)>[ \t]*`)
	// linkParam is one parameter: a name and a token or quoted string, or nothing.
	linkParam    = regexp.MustCompile(`^;[ \t]*(?:([^ \t;,="<>]+)(?:[ \t]*=[ \t]*([^ \t;,="<>]+|"(?:[^"\\]|\\.)*"))?)?[ \t]*`)
	linkUnescape = strings.NewReplacer(`\\`, `\`, `\`, "")
)

// nextLink returns the target of the first RFC 8288 link of h whose first rel names "next", if any.
func nextLink(h http.Header) (target string, found bool, err error) {
	for _, s := range h.Values("Link") {
		for s = strings.TrimLeft(s, " \t,"); s != ""; s = strings.TrimLeft(s, " \t,") {
			m := linkTarget.FindStringSubmatch(s)
			if m == nil {
				return "", false, errBadLink
			}
			rel, hasRel := "", false
			for s = s[len(m[0]):]; strings.HasPrefix(s, ";"); {
				p := linkParam.FindStringSubmatch(s)
				s = s[len(p[0]):]
				if !hasRel && strings.EqualFold(p[1], "rel") {
					rel, hasRel = p[2], true
				}
			}
			if s != "" && s[0] != ',' {
				return "", false, errBadLink
			}
			if strings.HasPrefix(rel, `"`) {
				rel = linkUnescape.Replace(rel[1 : len(rel)-1])
			}
			for r := range strings.FieldsSeq(rel) {
				if strings.EqualFold(r, "next") {
					return strings.TrimSpace(m[1]), true, nil
				}
			}
		}
	}
	return "", false, nil
}
