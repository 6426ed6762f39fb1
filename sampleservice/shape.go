package sampleservice

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// shape holds the switches that change what the answers look like, as
// the variants of Django REST framework services do, without anything
// being wrong with them.
type shape struct {
	linkHeader       bool
	relativeLinks    bool
	omitIDs          bool
	gzip             bool
	descriptionBytes int
}

// hyperlinkedProject is a project as a HyperlinkedModelSerializer renders
// it: a url, and no id. The nil ID, shallower than the embedded one,
// hides it.
type hyperlinkedProject struct {
	URL string `json:"url"`
	project
	ID *int `json:"id,omitempty"`
}

// hyperlinkedLocation is a list entry without its id; it has a url already.
type hyperlinkedLocation struct {
	location
	ID *int `json:"id,omitempty"`
}

// hyperlinkedDetail is a detail view without its id.
type hyperlinkedDetail struct {
	locationDetail
	ID *int `json:"id,omitempty"`
}

func (sh shape) project(base string, p project) any {
	if !sh.omitIDs {
		return p
	}
	return hyperlinkedProject{URL: base + projectsPath + strconv.Itoa(p.ID) + "/", project: p}
}

func (sh shape) location(l location) any {
	if !sh.omitIDs {
		return l
	}
	return hyperlinkedLocation{location: l}
}

func (sh shape) detail(d locationDetail) any {
	if sh.descriptionBytes > 0 {
		d.Description = longText(d.Description, sh.descriptionBytes)
	}
	if !sh.omitIDs {
		return d
	}
	return hyperlinkedDetail{locationDetail: d}
}

// longText repeats seed, with a few multi-byte characters, until it is n
// bytes long, cut at a character boundary (so possibly a byte or two
// short).
func longText(seed string, n int) string {
	unit := seed + " Déploiement « canari » — 監視中. "
	s := strings.Repeat(unit, n/len(unit)+1)[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// acceptsGzip tells whether the request's Accept-Encoding admits gzip:
// listed, by name or as "*", without a q of 0.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if q, ok := strings.CutPrefix(q, "q="); ok {
				if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// gzipped compresses what render writes, with gzip's default level (that
// of Django's GZipMiddleware), and marks the answer as such.
func gzipped(w http.ResponseWriter, render renderer) renderer {
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	return func(out io.Writer) error {
		zw := gzip.NewWriter(out)
		if err := render(zw); err != nil {
			return err
		}
		return zw.Close()
	}
}

// bombMember is the size of the padding that one precomputed gzip member
// of a bomb inflates to.
const bombMember = 16 << 20

// bombParts are the gzip members a bomb is made of, compressed once:
// gzip readers read concatenated members as one stream.
var bombParts = sync.OnceValue(func() (parts struct{ openList, openObject, padding, closeList, closeObject []byte }) {
	member := func(write func(io.Writer)) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		write(zw)
		_ = zw.Close()
		return b.Bytes()
	}
	literal := func(s string) []byte {
		return member(func(w io.Writer) { _, _ = io.WriteString(w, s) })
	}
	parts.openList, parts.closeList = literal("["), literal("]")
	parts.openObject, parts.closeObject = literal("{"), literal("}")
	parts.padding = member(func(w io.Writer) {
		spaces := bytes.Repeat([]byte{' '}, 64<<10)
		for range bombMember / len(spaces) {
			_, _ = w.Write(spaces)
		}
	})
	return parts
})

// gzipBomb renders a gzip stream inflating to at least size bytes: an
// empty list (or object) padded with spaces, valid JSON however large.
func gzipBomb(size int64, list bool) renderer {
	return func(w io.Writer) error {
		p := bombParts()
		open, closing := p.openObject, p.closeObject
		if list {
			open, closing = p.openList, p.closeList
		}
		if _, err := w.Write(open); err != nil {
			return err
		}
		for n := int64(2); n < size; n += bombMember {
			if _, err := w.Write(p.padding); err != nil {
				return err
			}
		}
		_, err := w.Write(closing)
		return err
	}
}
