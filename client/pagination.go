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
	w := &pageWalk{c: c, ctx: ctx, ep: ep, wantIDs: wantIDs, onIDs: onIDs, seen: map[[sha256.Size]byte]bool{}}
	for u := c.endpointURL(rel); u != nil; {
		u = w.read(u)
	}
	return w.res
}

// pageWalk is one walk of a list view, from its first page to its last.
type pageWalk struct {
	c        *Client
	ctx      context.Context
	ep       Endpoint
	wantIDs  int
	onIDs    func([]int64)
	seen     map[[sha256.Size]byte]bool // pages read, by pageKey
	hasCount bool
	res      ListResult
}

// read reads the page at u into the walk and returns the next page, nil at the end.
func (w *pageWalk) read(u *url.URL) *url.URL {
	res := &w.res
	res.Pages++
	var page listPage
	var last *url.URL // u after redirects
	var linkErr error
	res.Status, _, res.Err = w.c.get(w.ctx, w.ep, u, res.Pages, func(body io.Reader, resp *http.Response) error {
		var err error
		if page, err = decodeListPage(body, w.wantIDs-len(res.IDs)-res.MissingIDs); err != nil {
			return fmt.Errorf("page %d: %w", res.Pages, err)
		}
		if last = resp.Request.URL; !page.HasNext {
			page.Next, page.NextNamed, linkErr = nextLink(resp.Header)
		}
		return nil
	})
	if res.Err != nil {
		return nil
	}
	w.seen[pageKey(u)], w.seen[pageKey(last)] = true, true
	w.noteIDs(page)
	switch {
	case res.Pages == 1 && page.HasCount: // the first page's count stands for the list
		res.Count, w.hasCount = page.Count, true
	case !w.hasCount:
		res.Count += int64(page.Entries)
	}
	var next *url.URL
	var err error
	if enough := w.hasCount && len(res.IDs)+res.MissingIDs >= w.wantIDs; linkErr != nil && !enough {
		err = fmt.Errorf("the Link header of page %d is malformed: %w", res.Pages, linkErr)
	} else if page.NextNamed && !enough {
		next, err = w.c.nextPage(last, page.Next, w.seen, res.Pages)
	}
	msg := fmt.Sprintf("%d entries; walk done, count %d", page.Entries, res.Count)
	switch {
	case err != nil:
		res.Err = w.c.fail(w.ep, ReasonPagination, res.Status, err)
		msg = fmt.Sprintf("%d entries; walk stopped: %v", page.Entries, res.Err)
	case next != nil:
		from := map[bool]string{true: "next", false: "the Link header's next"}[page.HasNext]
		msg = fmt.Sprintf("%d entries; following %s to %s", page.Entries, from, w.c.redact.clean(RedactURL(next)))
	}
	traceFrom(w.ctx).add(TraceRequest{Start: time.Now(), Endpoint: w.ep, Page: res.Pages, Note: msg, NoteFailed: err != nil})
	return next
}

// noteIDs adds a page's ids to the result and onIDs, and reports missing ones.
func (w *pageWalk) noteIDs(page listPage) {
	res := &w.res
	if res.IDs = append(res.IDs, page.IDs...); len(page.IDs) > 0 && w.onIDs != nil {
		w.onIDs(page.IDs)
	}
	if len(page.NoIDs) > 0 && res.IDErr == nil {
		err := fmt.Errorf("%s list entry %d (page %d) has no integer \"id\" of 0 or more",
			strings.TrimSuffix(string(w.ep), "s"), page.NoIDs[0], res.Pages)
		res.IDErr = &Error{Endpoint: EndpointLocationDetail, Reason: ReasonInvalidBody, Err: err}
	}
	res.MissingIDs += len(page.NoIDs)
	for range page.NoIDs {
		w.c.cfg.Observer.ObserveError(EndpointLocationDetail, ReasonInvalidBody)
	}
}

// pageKey is a page's URL for loop detection, hashed, without user info or fragment.
func pageKey(u *url.URL) [sha256.Size]byte {
	k := *u
	k.User, k.Fragment, k.RawFragment = nil, "", ""
	return sha256.Sum256([]byte(k.String()))
}

// nextPage resolves and checks a next link: same origin, not seen, within the page limit.
func (c *Client) nextPage(cur *url.URL, next string, seen map[[sha256.Size]byte]bool, pages int) (*url.URL, error) {
	u, err := cur.Parse(next)
	var why string
	switch {
	case len(next) > maxStringValue:
		why = fmt.Sprintf("is longer than %d bytes", maxStringValue)
	case strings.TrimSpace(next) == "":
		why = "is empty, which names the page itself (a pagination loop; null or no link ends a list)"
	case err != nil:
		why = "is not a URL"
	case originOf(u) != c.origin:
		why = "points to " + originOf(u).misdirected(c.origin)
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
