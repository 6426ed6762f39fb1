package client

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"
)

// ListResult is the outcome of reading a list view.
type ListResult struct {
	Result
	// Count is the number of entries of the list: the envelope's count when
	// it carried one, else the entries of every page. It is meaningful only
	// when Err is nil.
	Count int64
	// IDs holds the ids of the first entries, as many as were asked for.
	IDs []int64
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
// can be requested while later pages are still on their way.
func (c *Client) Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) ListResult {
	return c.list(ctx, EndpointLocations, "api/projects/locations/", wantIDs, onIDs)
}

// list walks a list view page by page. With an envelope that carries a
// count it stops as soon as it holds the ids it needs; otherwise it reads
// every page to count the entries. Any failure fails the whole list: a
// partial count would be a wrong count.
func (c *Client) list(ctx context.Context, ep Endpoint, rel string, wantIDs int, onIDs func([]int64)) (res ListResult) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()

	// The walk keeps one request slot from its first page to its last, so
	// that detail views queued meanwhile cannot slip in between its pages.
	if err := c.slots.acquire(ctx, true); err != nil {
		res.Err = c.fail(ep, ReasonTimeout, 0, fmt.Errorf("waiting for a request slot: %w", err))
		c.note(ctx, ep, 1, "walk not started: "+res.Err.Error())
		return res
	}
	defer c.slots.release()

	u := c.endpointURL(rel)
	seen := map[string]bool{u.String(): true}
	var entries int64
	hasCount := false
	for {
		var page listPage
		res.Pages++
		res.Status, _, res.Err = c.get(ctx, ep, u, res.Pages, true, func(body io.Reader) error {
			var err error
			page, err = decodeListPage(body, wantIDs-len(res.IDs))
			if err != nil {
				return fmt.Errorf("page %d: %w", res.Pages, err)
			}
			return nil
		})
		if res.Err != nil {
			return res
		}
		entries += int64(page.Entries)
		if len(page.IDs) > 0 {
			res.IDs = append(res.IDs, page.IDs...)
			if onIDs != nil {
				onIDs(page.IDs)
			}
		}
		if res.Pages == 1 && page.HasCount {
			// The first page's count stands for the list: later pages are
			// read only for ids, and a list that changes while it is walked
			// must not be counted twice.
			res.Count, hasCount = page.Count, true
		}
		done := !page.Envelope || page.Next == "" || (hasCount && len(res.IDs) >= wantIDs)
		if done {
			if !hasCount {
				res.Count = entries
			}
			c.note(ctx, ep, res.Pages, fmt.Sprintf("%d entries; walk done, count %d", page.Entries, res.Count))
			return res
		}
		next, err := c.nextPage(u, page.Next, seen, res.Pages)
		if err != nil {
			res.Err = c.fail(ep, ReasonPagination, res.Status, err)
			c.note(ctx, ep, res.Pages, fmt.Sprintf("%d entries; walk stopped: %v", page.Entries, res.Err))
			return res
		}
		c.note(ctx, ep, res.Pages, fmt.Sprintf("%d entries; following next to %s", page.Entries, c.redact.clean(RedactURL(next))))
		u = next
	}
}

// nextPage resolves a next link against the page that carried it and
// checks it: same origin as the base URL, not seen before in this walk, and
// within the page limit.
func (c *Client) nextPage(cur *url.URL, next string, seen map[string]bool, pages int) (*url.URL, error) {
	ref, err := url.Parse(next)
	if err != nil {
		return nil, fmt.Errorf("next link after page %d is not a URL", pages)
	}
	u := cur.ResolveReference(ref)
	if originOf(u) != c.origin {
		// The foreign address is left out on purpose: it came from the
		// service and may carry anything.
		return nil, fmt.Errorf("next link after page %d points to another origin than %s", pages, c.origin)
	}
	// Credentials in a link would replace the key; they are never used.
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	key := u.String()
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
