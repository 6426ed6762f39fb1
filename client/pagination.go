package client

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ListResult is the outcome of reading a list view.
type ListResult struct {
	Result
	// Count is the envelope's count, else the entries of every page.
	Count int64
	// IDs holds the integer ids among the first entries asked for; those
	// without one are counted in MissingIDs and named by IDErr.
	IDs        []int64
	MissingIDs int
	IDErr      error
	Pages      int
}

// Projects reads the project list and counts it.
func (c *Client) Projects(ctx context.Context) ListResult {
	return c.list(ctx, EndpointProjects, "api/projects/projects/", 0, nil)
}

// Locations reads the location list, counts it and keeps the ids of its
// first wantIDs entries, handing each page's share to onIDs, when set, as
// soon as that page is read.
func (c *Client) Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) ListResult {
	return c.list(ctx, EndpointLocations, "api/projects/locations/", wantIDs, onIDs)
}

// listPageResult is what list needs from one page beyond its body.
type listPageResult struct {
	page listPage
	url  *url.URL // after redirects: the base of relative links
	// next is the envelope's "next" when the body has one, else the Link
	// header's; hasNext tells that one is named, even empty.
	next     string
	hasNext  bool
	fromLink bool
	linkErr  error
}

// list walks a list view page by page, stopping once it holds a count and
// the ids it needs. Any failure fails the whole list.
func (c *Client) list(ctx context.Context, ep Endpoint, rel string, wantIDs int, onIDs func([]int64)) (res ListResult) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()

	// One slot for the whole walk, so detail views cannot slip in between pages.
	if err := c.slots.acquire(ctx, true); err != nil {
		res.Err = c.fail(ep, ReasonTimeout, 0, fmt.Errorf("waiting for a request slot: %w", err))
		c.note(ctx, ep, 1, "walk not started: "+res.Err.Error(), true)
		return res
	}
	defer c.slots.release()

	u := c.endpointURL(rel)
	w := &pageWalk{c: c, ep: ep, wantIDs: wantIDs, onIDs: onIDs, seen: map[[sha256.Size]byte]bool{pageKey(u): true}}
	for {
		pr, ok := w.read(ctx, u)
		if !ok || w.done(ctx, pr) {
			return w.res
		}
		if u = w.next(ctx, pr); u == nil {
			return w.res
		}
	}
}

// pageWalk is one walk of a list view, from its first page to its last.
type pageWalk struct {
	c        *Client
	ep       Endpoint
	wantIDs  int
	onIDs    func([]int64)
	seen     map[[sha256.Size]byte]bool // for loop detection
	entries  int64
	hasCount bool
	res      ListResult
}

// read reads the page at u into the walk, false when that failed.
func (w *pageWalk) read(ctx context.Context, u *url.URL) (listPageResult, bool) {
	res := &w.res
	res.Pages++
	var pr listPageResult
	used := len(res.IDs) + res.MissingIDs
	res.Status, _, res.Err = w.c.get(ctx, w.ep, u, res.Pages, true, func(body io.Reader, resp *http.Response) error {
		return w.c.readListPage(body, resp, w.wantIDs-used, res.Pages, &pr)
	})
	if res.Err != nil {
		return pr, false
	}
	w.seen[pageKey(pr.url)] = true
	w.entries += int64(pr.page.Entries)
	w.c.noteIDs(w.ep, res, pr.page, w.onIDs)
	if res.Pages == 1 && pr.page.HasCount {
		// The first page's count stands for the list.
		res.Count, w.hasCount = pr.page.Count, true
	}
	return pr, true
}

// enough tells whether the walk holds a count and the ids asked for.
func (w *pageWalk) enough() bool {
	return w.hasCount && len(w.res.IDs)+w.res.MissingIDs >= w.wantIDs
}

// done tells whether the walk ends with page pr, and then completes the result.
func (w *pageWalk) done(ctx context.Context, pr listPageResult) bool {
	if pr.linkErr != nil && !w.enough() {
		w.stop(ctx, pr, fmt.Errorf("the Link header of page %d is malformed: %w", w.res.Pages, pr.linkErr))
		return true
	}
	if pr.hasNext && !w.enough() {
		return false
	}
	if !w.hasCount {
		w.res.Count = w.entries
	}
	w.c.note(ctx, w.ep, w.res.Pages, fmt.Sprintf("%d entries; walk done, count %d", pr.page.Entries, w.res.Count), false)
	return true
}

// next returns the page pr links to, nil when the link is refused.
func (w *pageWalk) next(ctx context.Context, pr listPageResult) *url.URL {
	next, err := w.c.nextPage(pr.url, pr.next, w.seen, w.res.Pages)
	if err != nil {
		w.stop(ctx, pr, err)
		return nil
	}
	how := "next"
	if pr.fromLink {
		how = "the Link header's next"
	}
	w.c.note(ctx, w.ep, w.res.Pages, fmt.Sprintf("%d entries; following %s to %s", pr.page.Entries, how, w.c.redact.clean(RedactURL(next))), false)
	return next
}

// stop fails the walk after page pr for a pagination error.
func (w *pageWalk) stop(ctx context.Context, pr listPageResult, err error) {
	w.res.Err = w.c.fail(w.ep, ReasonPagination, w.res.Status, err)
	w.c.note(ctx, w.ep, w.res.Pages, fmt.Sprintf("%d entries; walk stopped: %v", pr.page.Entries, w.res.Err), true)
}

// readListPage decodes one page of a list and finds its next link.
func (c *Client) readListPage(body io.Reader, resp *http.Response, wantIDs, n int, pr *listPageResult) error {
	page, err := decodeListPage(body, wantIDs)
	if err != nil {
		return fmt.Errorf("page %d: %w", n, err)
	}
	pr.page, pr.url, pr.next, pr.hasNext = page, resp.Request.URL, page.Next, page.NextNamed
	if !page.HasNext {
		pr.next, pr.hasNext, pr.linkErr = nextLink(resp.Header)
		pr.fromLink = pr.hasNext
	}
	return nil
}

// noteIDs adds a page's ids to res and onIDs, and reports missing ones.
func (c *Client) noteIDs(ep Endpoint, res *ListResult, page listPage, onIDs func([]int64)) {
	if len(page.IDs) > 0 {
		res.IDs = append(res.IDs, page.IDs...)
		if onIDs != nil {
			onIDs(page.IDs)
		}
	}
	if page.NoID == 0 {
		return
	}
	if res.IDErr == nil {
		res.IDErr = &Error{
			Endpoint: EndpointLocationDetail,
			Reason:   ReasonInvalidBody,
			Err: fmt.Errorf("%s list entry %d (page %d) has no integer \"id\" of 0 or more",
				strings.TrimSuffix(string(ep), "s"), page.FirstNoID, res.Pages),
		}
	}
	res.MissingIDs += page.NoID
	for range page.NoID {
		c.observer.ObserveError(EndpointLocationDetail, ReasonInvalidBody)
	}
}

// pageKey is a page's URL for loop detection, hashed, without user info or fragment.
func pageKey(u *url.URL) [sha256.Size]byte {
	k := *u
	k.User = nil
	k.Fragment, k.RawFragment = "", ""
	return sha256.Sum256([]byte(k.String()))
}

// nextPage resolves and checks a next link: same origin, not seen, within the page limit.
func (c *Client) nextPage(cur *url.URL, next string, seen map[[sha256.Size]byte]bool, pages int) (*url.URL, error) {
	if len(next) > maxStringValue {
		return nil, fmt.Errorf("next link after page %d is longer than %d bytes", pages, maxStringValue)
	}
	if strings.TrimSpace(next) == "" {
		return nil, fmt.Errorf("next link after page %d is empty, which names the page itself (a pagination loop; null or no link ends a list)", pages)
	}
	ref, err := url.Parse(next)
	if err != nil {
		return nil, fmt.Errorf("next link after page %d is not a URL", pages)
	}
	u := cur.ResolveReference(ref)
	if o := originOf(u); o != c.origin {
		return nil, fmt.Errorf("next link after page %d points to %s", pages, o.misdirected(c.origin))
	}
	// Credentials in a link would replace the key.
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	key := pageKey(u)
	if seen[key] {
		return nil, fmt.Errorf("next link after page %d points to a page already read (a pagination loop)", pages)
	}
	if pages >= c.maxPages {
		return nil, fmt.Errorf("list has more than %d pages (the page limit)", c.maxPages)
	}
	seen[key] = true
	return u, nil
}

// note records a pagination decision in the poll's trace, if any.
func (c *Client) note(ctx context.Context, ep Endpoint, page int, msg string, failed bool) {
	if tr := traceFrom(ctx); tr != nil {
		tr.add(TraceRequest{Start: time.Now(), Endpoint: ep, Page: page, Note: msg, NoteFailed: failed})
	}
}
