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
	// Count is the number of entries of the list: the envelope's count when
	// it carried one, else the entries of every page. It is meaningful only
	// when Err is nil.
	Count int64
	// IDs holds the integer ids among the first entries, as many entries
	// as were asked for; entries without one are counted in MissingIDs.
	IDs []int64
	// MissingIDs counts the entries, among the first ones asked for, that
	// have no integer "id" (Django REST framework's hyperlinked lists carry
	// a "url" instead): their detail views cannot be requested.
	MissingIDs int
	// IDErr is non-nil when MissingIDs is: an *Error for the
	// location_detail endpoint, reason invalid_body, whose message names
	// the first entry without an id. The list itself is fine: counting
	// needs no ids.
	IDErr error
	// Pages is the number of pages read.
	Pages int
}

// Projects reads the project list and counts it.
func (c *Client) Projects(ctx context.Context) ListResult {
	return c.list(ctx, EndpointProjects, "api/projects/projects/", 0, nil)
}

// Locations reads the location list, counts it and keeps the ids of its
// first wantIDs entries. onIDs, when set, is called with each page's share
// of those ids as soon as that page has been read, so their detail views
// can be requested while later pages are still on their way. An entry
// without an integer id takes its place among the first wantIDs all the
// same: it is reported through ListResult.IDErr and the observer (one
// location_detail invalid_body error each), not replaced by a later one.
func (c *Client) Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) ListResult {
	return c.list(ctx, EndpointLocations, "api/projects/locations/", wantIDs, onIDs)
}

// listPageResult is what list needs from one page beyond its body.
type listPageResult struct {
	page listPage
	// url is where the page was found, after redirects: the base of its
	// relative links.
	url *url.URL
	// next is the next page's link as written: the envelope's "next" when
	// the body carries one (even null), else the Link header's rel="next".
	next string
	// hasNext tells that a next page is named, even by an empty link,
	// which names the page itself; only null or no link ends a list.
	hasNext  bool
	fromLink bool
	// linkErr tells that the Link header could not be parsed, so whether
	// a next page exists is unknown.
	linkErr error
}

// list walks a list view page by page. With a count (in an envelope) it
// stops as soon as it holds the ids it needs; otherwise it reads every
// page to count the entries. Any failure fails the whole list: a partial
// count would be a wrong count.
//
// The next page is named by the envelope's "next" or, when the body has
// none (a plain array, or an envelope without the member), by an RFC 8288
// Link header with rel="next". When a body has "next", even null, it wins
// over the header: it is the more specific of the two, and the one
// Django REST framework's envelopes mean.
func (c *Client) list(ctx context.Context, ep Endpoint, rel string, wantIDs int, onIDs func([]int64)) (res ListResult) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()

	// The walk keeps one request slot from its first page to its last, so
	// that detail views queued meanwhile cannot slip in between its pages.
	if err := c.slots.acquire(ctx, true); err != nil {
		res.Err = c.fail(ep, ReasonTimeout, 0, fmt.Errorf("waiting for a request slot: %w", err))
		c.noteFailure(ctx, ep, 1, "walk not started: "+res.Err.Error())
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
	c       *Client
	ep      Endpoint
	wantIDs int
	onIDs   func([]int64)
	// seen holds the pages read or about to be, for loop detection.
	seen map[[sha256.Size]byte]bool
	// entries counts the entries of every page read.
	entries int64
	// hasCount tells that the first page's envelope carried a count.
	hasCount bool
	res      ListResult
}

// read reads the page at u and adds what it holds to the walk. It reports
// false when the page could not be read, and the walk has failed.
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
		// The first page's count stands for the list: later pages are
		// read only for ids, and a list that changes while it is walked
		// must not be counted twice.
		res.Count, w.hasCount = pr.page.Count, true
	}
	return pr, true
}

// enough tells whether the walk holds all it reads pages for: a count
// from the envelope, and the ids asked for.
func (w *pageWalk) enough() bool {
	return w.hasCount && len(w.res.IDs)+w.res.MissingIDs >= w.wantIDs
}

// done tells whether the walk ends with page pr, just read, and then
// completes the result: failed, or counted.
func (w *pageWalk) done(ctx context.Context, pr listPageResult) bool {
	if pr.linkErr != nil && !w.enough() {
		// A next page may be named in what cannot be read: counting
		// this page alone could be a wrong count.
		w.stop(ctx, pr, fmt.Errorf("the Link header of page %d is malformed: %w", w.res.Pages, pr.linkErr))
		return true
	}
	if pr.hasNext && !w.enough() {
		return false
	}
	if !w.hasCount {
		w.res.Count = w.entries
	}
	w.c.note(ctx, w.ep, w.res.Pages, fmt.Sprintf("%d entries; walk done, count %d", pr.page.Entries, w.res.Count))
	return true
}

// next steps from page pr to the page it links to. It returns nil when
// the link is refused, and the walk has failed.
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
	w.c.note(ctx, w.ep, w.res.Pages, fmt.Sprintf("%d entries; following %s to %s", pr.page.Entries, how, w.c.redact.clean(RedactURL(next))))
	return next
}

// stop fails the walk after page pr for a pagination error.
func (w *pageWalk) stop(ctx context.Context, pr listPageResult, err error) {
	w.res.Err = w.c.fail(w.ep, ReasonPagination, w.res.Status, err)
	w.c.noteFailure(ctx, w.ep, w.res.Pages, fmt.Sprintf("%d entries; walk stopped: %v", pr.page.Entries, w.res.Err))
}

// readListPage decodes one page of a list and finds its next link.
func (c *Client) readListPage(body io.Reader, resp *http.Response, wantIDs, n int, pr *listPageResult) error {
	page, err := decodeListPage(body, wantIDs)
	if err != nil {
		return fmt.Errorf("page %d: %w", n, err)
	}
	pr.page, pr.url, pr.next, pr.hasNext = page, resp.Request.URL, page.Next, page.NextNamed
	if !page.HasNext {
		pr.next, pr.hasNext, pr.linkErr = nextLink(resp.Header, pr.url)
		pr.fromLink = pr.hasNext
	}
	return nil
}

// noteIDs adds a page's ids to res and hands them to onIDs, and reports
// the entries among those wanted that have none.
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

// pageKey is how a page's URL is remembered for loop detection: without
// user info or fragment, which do not change the page, and hashed, so
// that a walk of long links does not keep them all.
func pageKey(u *url.URL) [sha256.Size]byte {
	k := *u
	k.User = nil
	k.Fragment, k.RawFragment = "", ""
	return sha256.Sum256([]byte(k.String()))
}

// nextPage resolves a next link against the URL of the page that carried
// it (RFC 3986) and checks it: same origin as the base URL, not seen
// before in this walk, and within the page limit.
func (c *Client) nextPage(cur *url.URL, next string, seen map[[sha256.Size]byte]bool, pages int) (*url.URL, error) {
	if len(next) > maxStringValue {
		return nil, fmt.Errorf("next link after page %d is longer than %d bytes", pages, maxStringValue)
	}
	if strings.TrimSpace(next) == "" {
		// RFC 3986 resolves an empty reference to the page itself.
		return nil, fmt.Errorf("next link after page %d is empty, which names the page itself (a pagination loop; null or no link ends a list)", pages)
	}
	ref, err := url.Parse(next)
	if err != nil {
		return nil, fmt.Errorf("next link after page %d is not a URL", pages)
	}
	u := cur.ResolveReference(ref)
	if o := originOf(u); o != c.origin {
		// Only the scheme, host and port are shown: the rest came from
		// the service and may carry anything.
		return nil, fmt.Errorf("next link after page %d points to %s", pages, o.misdirected(c.origin))
	}
	// Credentials in a link would replace the key; they are never used.
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
func (c *Client) note(ctx context.Context, ep Endpoint, page int, msg string) {
	if tr := traceFrom(ctx); tr != nil {
		tr.add(TraceRequest{Start: time.Now(), Endpoint: ep, Page: page, Note: msg})
	}
}

// noteFailure records in the poll's trace, if any, that the walk failed
// here, so the pages show the step as failed.
func (c *Client) noteFailure(ctx context.Context, ep Endpoint, page int, msg string) {
	if tr := traceFrom(ctx); tr != nil {
		tr.add(TraceRequest{Start: time.Now(), Endpoint: ep, Page: page, Note: msg, NoteFailed: true})
	}
}
