package client

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/common/config"
)

// secretsOf finds every secret of cfg, for redaction: the key, the
// secret and file http_headers, the proxy's password and its secret
// CONNECT headers. It also returns the key file's cache, for the guard.
func secretsOf(cfg *config.HTTPClientConfig) (*secrets, *keyFileCache) {
	s := &secrets{}
	key, keyFile := keyLookup(cfg.Authorization)
	if key != nil {
		s.sources = append(s.sources, key)
	}
	fixed := func(v string) { s.sources = append(s.sources, func() string { return v }) }
	if cfg.HTTPHeaders != nil {
		for _, h := range cfg.HTTPHeaders.Headers {
			for _, v := range h.Secrets {
				fixed(string(v))
			}
			for _, f := range h.Files {
				s.sources = append(s.sources, (&keyFileCache{path: f}).key)
			}
		}
	}
	proxies := []*url.URL{cfg.ProxyURL.URL}
	if cfg.ProxyFromEnvironment {
		for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
			v := os.Getenv(name)
			if !strings.Contains(v, "://") {
				v = "http://" + v
			}
			if u, err := url.Parse(v); err == nil {
				proxies = append(proxies, u)
			}
		}
	}
	for _, u := range proxies {
		if u == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			fixed(pw)
		}
	}
	for _, vs := range cfg.ProxyConnectHeader {
		for _, v := range vs {
			fixed(string(v))
		}
	}
	return s, keyFile
}

// redactor returns the current value of one secret of a module, "" when
// it has none.
type redactor func() string

// secretRun is the shortest run of a secret's characters that text may
// never show; minSecret the shortest secret cut out at all, as shorter
// ones would cut common words out of every message.
const (
	secretRun = 12
	minSecret = 4
)

// secretMarker stands for what redaction cut out.
const secretMarker = "<secret>"

// secrets cuts every secret of a module (the key, header secrets and
// files, a proxy's password) out of text that came from outside: a next
// link, an error message, a body excerpt. It cuts whole occurrences and
// every run of secretRun of their characters, in any letter case. The
// secrets are looked up only when there is text to clean.
type secrets struct {
	sources []redactor

	mu   sync.Mutex
	from string // the values m was built from
	m    *secretMatcher
}

func (s *secrets) clean(text string) string {
	if s == nil || text == "" {
		return text
	}
	return s.matcher().redact(text)
}

// matcher returns the matcher of the secrets' current values.
func (s *secrets) matcher() *secretMatcher {
	vals := make([]string, 0, len(s.sources))
	for _, src := range s.sources {
		if v := src(); v != "" {
			vals = append(vals, v)
		}
	}
	from := strings.Join(vals, "\x00")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || from != s.from {
		s.m, s.from = newSecretMatcher(vals), from
	}
	return s.m
}

// secretMatcher finds secrets in text, comparing characters folded (see
// fold).
type secretMatcher struct {
	// may tells which ASCII bytes occur in a secret, in either case;
	// bytes of other characters always may.
	may      [utf8.RuneSelf]bool
	shortest int
	// runs holds every run of secretRun characters of the secrets at
	// least that long; short the shorter ones whole.
	runs  map[[secretRun]rune]struct{}
	short [][]rune
}

func newSecretMatcher(vals []string) *secretMatcher {
	m := &secretMatcher{runs: make(map[[secretRun]rune]struct{})}
	for _, v := range vals {
		rs := []rune(v)
		if len(rs) < minSecret {
			continue
		}
		for i, r := range rs {
			rs[i] = fold(r)
			for f := rs[i]; ; {
				if f < utf8.RuneSelf {
					m.may[f] = true
				}
				if f = unicode.SimpleFold(f); f == rs[i] {
					break
				}
			}
		}
		if m.shortest == 0 || len(rs) < m.shortest {
			m.shortest = len(rs)
		}
		if len(rs) < secretRun {
			m.short = append(m.short, rs)
			continue
		}
		m.shortest = min(m.shortest, secretRun)
		for i := 0; i+secretRun <= len(rs); i++ {
			m.runs[[secretRun]rune(rs[i:])] = struct{}{}
		}
	}
	return m
}

// redact replaces each stretch of text made of secrets by secretMarker.
// Only stretches of bytes that may belong to a secret, at least as long
// as the shortest, are looked at closely.
func (m *secretMatcher) redact(text string) string {
	if m.shortest == 0 {
		return text
	}
	var b strings.Builder
	done := 0 // bytes of text written to b
	for start := 0; start < len(text); {
		end := start
		for end < len(text) && (text[end] >= utf8.RuneSelf || m.may[text[end]]) {
			end++
		}
		if end-start >= m.shortest {
			done = m.redactStretch(&b, text, start, end, done)
		}
		start = end + 1
	}
	if b.Len() == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

// redactStretch writes to b the text from done up to the last secret in
// text[start:end], that secret replaced, and returns how far it wrote.
func (m *secretMatcher) redactStretch(b *strings.Builder, text string, start, end, done int) int {
	var rs []rune
	var at []int
	for i, r := range text[start:end] {
		rs, at = append(rs, fold(r)), append(at, start+i)
	}
	at = append(at, end)
	hidden := make([]bool, len(rs))
	hide := func(i, n int) {
		for j := i; j < i+n; j++ {
			hidden[j] = true
		}
	}
	for i := range rs {
		if i+secretRun <= len(rs) {
			if _, ok := m.runs[[secretRun]rune(rs[i:])]; ok {
				hide(i, secretRun)
			}
		}
		for _, s := range m.short {
			if i+len(s) <= len(rs) && slices.Equal(rs[i:i+len(s)], s) {
				hide(i, len(s))
			}
		}
	}
	for i := 0; i < len(rs); i++ {
		if !hidden[i] {
			continue
		}
		j := i
		for j < len(rs) && hidden[j] {
			j++
		}
		b.WriteString(text[done:at[i]])
		b.WriteString(secretMarker)
		done, i = at[j], j
	}
	return done
}

// fold maps the characters that are the same letter in another case (k,
// K and the Kelvin sign K) to one of them.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}
