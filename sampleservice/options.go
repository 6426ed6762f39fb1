package sampleservice

import "time"

// Defaults applied by New to zero-valued counts, chosen to match the demo so
// that a bare Options{} behaves like a small but realistic service.
const (
	DefaultProjects  = 5
	DefaultLocations = 300
)

// Options configures a Service. Its zero value is usable: a random key, no
// prefix, DefaultProjects projects, DefaultLocations locations, plain arrays
// and no artificial latency.
type Options struct {
	// Key is the token clients must send as "Authorization: Token <Key>".
	// Empty generates a random 32-hex-character key, read back with Key.
	Key string
	// Prefix is a path prefix such as "/deploy", so that clients are tested
	// against services mounted below the root. A trailing slash is ignored.
	Prefix string
	// Projects and Locations are the list sizes. Zero selects the defaults
	// above; a negative value serves an empty list. Entries are generated
	// from their index, so millions cost no memory.
	Projects  int
	Locations int
	// PageSize selects the list shape: 0 serves plain JSON arrays, a
	// positive value serves Django REST framework envelopes of that size.
	PageSize int
	// OmitCount drops "count" from envelopes, forcing clients to walk every
	// page to learn the size.
	OmitCount bool
	// LinkHeader, with a positive PageSize, serves each page as a plain
	// JSON array and names the others in an RFC 8288 Link header
	// (rel="next", "prev", "first" and "last"), as Django REST framework's
	// header-based pagination and GitHub-style APIs do.
	LinkHeader bool
	// RelativeLinks makes next and previous links, in envelopes and Link
	// headers, relative references (a path and query, without scheme and
	// host) instead of absolute URLs. Absolute links are built from the
	// Host header of the request, as Django does: behind a reverse proxy
	// that does not forward it they name the proxy's upstream.
	RelativeLinks bool
	// OmitIDs leaves "id" out of entries and detail views, which carry
	// their "url" instead, as Django REST framework's
	// HyperlinkedModelSerializer does.
	OmitIDs bool
	// Gzip compresses answers for clients that ask for it
	// (Accept-Encoding: gzip), as Django's GZipMiddleware or a proxy does.
	Gzip bool
	// DescriptionBytes, when positive, makes the "description" of detail
	// views that many bytes long (of text with multi-byte characters), to
	// test how clients cope with a long free-text field.
	DescriptionBytes int
	// Latency delays every answer, and Jitter adds a uniformly random extra
	// delay in [0, Jitter), to make timing and concurrency observable.
	Latency time.Duration
	Jitter  time.Duration
	// Seed makes the generated data reproducible: equal seeds give
	// identical bodies.
	Seed int64
}

// DefaultOptions returns the settings of the exporter's demo mode: a small
// paginated service whose answers take a realistic, varying time.
func DefaultOptions() Options {
	return Options{
		Projects:  DefaultProjects,
		Locations: DefaultLocations,
		PageSize:  50,
		Latency:   5 * time.Millisecond,
		Jitter:    20 * time.Millisecond,
		Seed:      1,
	}
}

// size maps the documented Options convention onto an entry count.
func size(n, def int) int64 {
	switch {
	case n == 0:
		return int64(def)
	case n < 0:
		return 0
	}
	return int64(n)
}
