package sampleservice

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// list describes a list view; entries are generated on demand.
type list struct {
	path  string
	count int64
	entry func(idx int64) any
}

// serveEndpoint answers an authenticated GET for a known endpoint.
func (s *Service) serveEndpoint(w http.ResponseWriter, r *http.Request, endpoint string, id int64) {
	ctx := r.Context()
	base := s.baseURL(r)
	projects := s.projects.Load()

	var (
		lst    *list
		object any // the normal body of non-list endpoints; nil = 404
	)
	switch endpoint {
	case EndpointRoot:
		object = struct {
			Projects  string `json:"projects"`
			Locations string `json:"locations"`
		}{base + projectsPath, base + locationsPath}
	case EndpointProjects:
		lst = &list{projectsPath, projects, func(i int64) any { return s.shape.project(base, s.gen.project(i)) }}
	case EndpointLocations:
		lst = &list{locationsPath, s.locations.Load(), func(i int64) any {
			return s.shape.location(s.gen.location(base, i, projects))
		}}
	case EndpointLocationDetail:
		if id >= 1 && id <= s.locations.Load() {
			object = s.shape.detail(s.gen.locationDetail(base, id-1, projects))
		}
	}

	page, pages := int64(1), int64(1)
	paged := lst != nil && s.pageSize > 0
	if paged {
		pages = max(1, (lst.count+s.pageSize-1)/s.pageSize)
		var ok bool
		if page, ok = parsePage(r.URL.Query().Get("page"), pages); !ok {
			writeDetail(w, http.StatusNotFound, "Invalid page.")
			return
		}
	}

	f := s.fault(endpoint, id)
	if !f.activeOn(page) {
		f = Fault{}
	}
	if !sleep(ctx, f.Delay) {
		abort(w)
		return
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}

	status, render := http.StatusOK, renderer(nil)
	switch {
	case f.RedirectTo != "":
		w.Header().Set("Location", f.RedirectTo)
		status, render = http.StatusFound, detailBody("Found.")
	case f.Body != "":
		status, render = cmp.Or(f.Status, http.StatusOK), rawBody(f.Body)
	case f.Status == http.StatusUnauthorized: // as for a refused key
		w.Header().Set("WWW-Authenticate", "Token")
		status, render = f.Status, detailBody("Invalid token.")
	case f.Status != 0:
		status, render = f.Status, detailBody(http.StatusText(f.Status))
	case f.GzipBomb > 0:
		w.Header().Set("Content-Encoding", "gzip")
		render = gzipBomb(f.GzipBomb, lst != nil)
	case f.OversizeBytes > 0 && lst != nil:
		render = paddedList(ctx, lst, f.OversizeBytes)
	case f.OversizeBytes > 0 && object != nil:
		render = paddedObject(object, f.OversizeBytes)
	case f.OversizeBytes > 0:
		render = paddedObject(struct {
			Detail string `json:"detail"`
		}{"Not found."}, f.OversizeBytes)
	case lst != nil && paged && s.shape.linkHeader:
		w.Header().Set("Link", s.linkHeader(r, base, lst.path, page, pages, f))
		render = array(ctx, lst, (page-1)*s.pageSize, min(page*s.pageSize, lst.count))
	case lst != nil && paged:
		var count *int64
		if !s.omitCount {
			count = &lst.count
		}
		next, prev := s.links(r, base, lst.path, page, pages, f)
		render = envelope(ctx, lst, count, next, prev, (page-1)*s.pageSize, min(page*s.pageSize, lst.count))
	case lst != nil:
		render = array(ctx, lst, 0, lst.count)
	case object != nil:
		render = objectBody(object)
	default:
		status, render = http.StatusNotFound, detailBody("Not found.")
	}
	if s.shape.gzip && f.GzipBomb == 0 && !f.Truncate && acceptsGzip(r) {
		render = gzipped(w, render)
	}
	send(w, status, render, f.Truncate)
}

// parsePage reads DRF's page parameter: 1-based, "last" allowed, anything
// else out of range is an invalid page.
func parsePage(v string, pages int64) (int64, bool) {
	switch v {
	case "":
		return 1, true
	case "last":
		return pages, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 1 && n <= pages
}

// links builds an envelope's next and previous URLs (nil for null) the way
// DRF does, keeping other query parameters, with any link fault applied.
func (s *Service) links(r *http.Request, base, path string, page, pages int64, f Fault) (next, prev *string) {
	pageURL := func(n int64) *string {
		u := s.pageURL(r, base, path, n)
		return &u
	}
	if page < pages {
		next = pageURL(page + 1)
	} else if f.LoopNext {
		next = pageURL(1)
	}
	if f.NextURL != "" {
		next = &f.NextURL
	}
	if page > 1 {
		prev = pageURL(page - 1)
	}
	return next, prev
}

// pageURL is the link to page n of the list at path, keeping the other
// query parameters of r: absolute below base, or relative with
// RelativeLinks.
func (s *Service) pageURL(r *http.Request, base, path string, n int64) string {
	q := r.URL.Query()
	if n == 1 {
		q.Del("page")
	} else {
		q.Set("page", strconv.FormatInt(n, 10))
	}
	u := base + path
	if s.shape.relativeLinks {
		u = s.prefix + path
	}
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	return u
}

// linkHeader builds the Link header of page of a list in header-based
// pagination: next (with any link fault applied) and prev when they
// exist, first and last always.
func (s *Service) linkHeader(r *http.Request, base, path string, page, pages int64, f Fault) string {
	next, prev := s.links(r, base, path, page, pages, f)
	var links []string
	if next != nil {
		links = append(links, "<"+*next+`>; rel="next"`)
	}
	if prev != nil {
		links = append(links, "<"+*prev+`>; rel="prev"`)
	}
	links = append(links,
		"<"+s.pageURL(r, base, path, 1)+`>; rel="first"`,
		"<"+s.pageURL(r, base, path, pages)+`>; rel="last"`)
	return strings.Join(links, ", ")
}

// array renders entries [from, to) as a plain JSON array.
func array(ctx context.Context, l *list, from, to int64) renderer {
	return func(w io.Writer) error {
		if _, err := io.WriteString(w, "["); err != nil {
			return err
		}
		if err := entries(ctx, w, l, from, to); err != nil {
			return err
		}
		_, err := io.WriteString(w, "]")
		return err
	}
}

// envelope renders one DRF page; a nil count is left out.
func envelope(ctx context.Context, l *list, count *int64, next, prev *string, from, to int64) renderer {
	return func(w io.Writer) error {
		head := []byte("{")
		if count != nil {
			head = strconv.AppendInt(append(head, `"count":`...), *count, 10)
			head = append(head, ',')
		}
		head = append(appendNullable(append(head, `"next":`...), next), `,"previous":`...)
		head = append(appendNullable(head, prev), `,"results":[`...)
		if _, err := w.Write(head); err != nil {
			return err
		}
		if err := entries(ctx, w, l, from, to); err != nil {
			return err
		}
		_, err := io.WriteString(w, "]}")
		return err
	}
}

// entries writes comma-separated entries [from, to), checking now and then
// whether the client is still there.
func entries(ctx context.Context, w io.Writer, l *list, from, to int64) error {
	for i := from; i < to; i++ {
		if err := entry(ctx, w, l, i, i > from); err != nil {
			return err
		}
	}
	return nil
}

// entry writes one entry, preceded by a comma unless it is the first.
func entry(ctx context.Context, w io.Writer, l *list, i int64, comma bool) error {
	if i%64 == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	b, err := json.Marshal(l.entry(i))
	if err != nil {
		return err
	}
	if comma {
		if _, err := io.WriteString(w, ","); err != nil {
			return err
		}
	}
	_, err = w.Write(b)
	return err
}

// paddedList renders a plain array of generated entries, continuing past
// the list's end as needed, until at least atLeast bytes are written.
func paddedList(ctx context.Context, l *list, atLeast int64) renderer {
	return func(w io.Writer) error {
		cw := &countingWriter{w: w}
		if _, err := io.WriteString(cw, "["); err != nil {
			return err
		}
		for i := int64(0); cw.n+1 < atLeast; i++ {
			if err := entry(ctx, cw, l, i, i > 0); err != nil {
				return err
			}
		}
		_, err := io.WriteString(cw, "]")
		return err
	}
}

// paddedObject renders v with an extra "padding" member long enough for the
// whole to reach atLeast bytes.
func paddedObject(v any, atLeast int64) renderer {
	return func(w io.Writer) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b = append(b[:len(b)-1], `,"padding":"`...)
		if _, err := w.Write(b); err != nil {
			return err
		}
		const chunk = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod "
		for left := atLeast - int64(len(b)) - 2; left > 0; left -= int64(len(chunk)) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return err
			}
		}
		_, err = io.WriteString(w, `"}`)
		return err
	}
}
