package client

import (
	"cmp"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/common/config"
)

// findSecrets keeps every secret of cfg for redaction, and the files the guard checks.
func (t *Transport) findSecrets(cfg *config.HTTPClientConfig) {
	s := &secrets{}
	if a := cfg.Authorization; a != nil && a.CredentialsFile != "" {
		t.keyFile = &fileSecret{path: a.CredentialsFile, max: maxKeyFileBytes}
		s.files = append(s.files, t.keyFile)
	} else if a != nil {
		s.fixed = append(s.fixed, string(a.Credentials))
	}
	if cfg.HTTPHeaders != nil {
		for _, h := range cfg.HTTPHeaders.Headers {
			for _, v := range h.Secrets {
				s.fixed = append(s.fixed, string(v))
			}
			for _, f := range h.Files {
				t.headerFiles = append(t.headerFiles, &fileSecret{path: f, max: maxKeyFileBytes})
			}
		}
	}
	s.files = append(s.files, t.headerFiles...)
	proxies := []*url.URL{cfg.ProxyURL.URL}
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		if v := os.Getenv(name); cfg.ProxyFromEnvironment && v != "" {
			if !strings.Contains(v, "://") {
				v = "http://" + v
			}
			u, _ := url.Parse(v)
			proxies = append(proxies, u)
		}
	}
	for _, u := range proxies {
		if u != nil {
			pw, _ := u.User.Password()
			s.fixed = append(s.fixed, pw)
		}
	}
	for _, vs := range cfg.ProxyConnectHeader {
		for _, v := range vs {
			s.fixed = append(s.fixed, string(v))
		}
	}
	t.redact = s
}

// sensitiveParam matches query parameter names whose values are hidden.
var sensitiveParam = regexp.MustCompile(`(?i)key|token|secret|pass|auth|sig|session|credential`)

// RedactURL renders u without user info and with credential-like query parameters replaced.
func RedactURL(u *url.URL) string {
	c := *u
	c.User = nil
	q, err := url.ParseQuery(c.RawQuery)
	redacted := err != nil // re-encoding drops what could not be read
	for name := range q {
		if sensitiveParam.MatchString(name) {
			q[name] = []string{"REDACTED"}
			redacted = true
		}
	}
	if redacted {
		c.RawQuery = q.Encode()
	}
	return c.String()
}

// Text never shows a run of secretRun characters of a secret; secrets
// shorter than minSecret are not cut, as they would cut common words.
const (
	secretRun    = 12
	minSecret    = 4
	secretMarker = "<secret>"
)

// secrets cuts every secret of a module, whole and every run of secretRun
// of its characters in any letter case, out of text from outside.
type secrets struct {
	fixed []string      // given inline, "" for none
	files []*fileSecret // re-read as they change

	mu   sync.Mutex
	from string // the values m was built from
	m    *secretMatcher
}

func (s *secrets) clean(text string) string {
	if s == nil || text == "" {
		return text
	}
	vals := slices.Clone(s.fixed)
	for _, f := range s.files {
		v, _ := f.read()
		vals = append(vals, v)
	}
	from := strings.Join(vals, "\x00")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || from != s.from {
		s.m, s.from = newSecretMatcher(vals), from
	}
	return s.m.redact(text)
}

// secretMatcher finds secrets in text, comparing characters folded.
type secretMatcher struct {
	may      [utf8.RuneSelf]bool      // ASCII bytes that occur in a secret, folded
	shortest int                      // the fewest characters a match spans, 0 for no secret
	runs     map[[secretRun]rune]bool // runs of the long secrets
	short    [][]rune                 // the short secrets whole
}

func newSecretMatcher(vals []string) *secretMatcher {
	m := &secretMatcher{runs: make(map[[secretRun]rune]bool)}
	for _, v := range vals {
		rs := []rune(v)
		if len(rs) < minSecret {
			continue
		}
		for i, r := range rs {
			if rs[i] = fold(r); rs[i] < utf8.RuneSelf {
				m.may[rs[i]] = true
			}
		}
		m.shortest = min(cmp.Or(m.shortest, secretRun), len(rs), secretRun)
		if len(rs) < secretRun {
			m.short = append(m.short, rs)
			continue
		}
		for i := 0; i+secretRun <= len(rs); i++ {
			m.runs[[secretRun]rune(rs[i:])] = true
		}
	}
	return m
}

// redact replaces each stretch of text made of secrets by secretMarker.
func (m *secretMatcher) redact(text string) string {
	var b strings.Builder
	done := 0
	for start := 0; start < len(text); start++ {
		end := start
		for end < len(text) && (text[end] >= utf8.RuneSelf || m.may[fold(rune(text[end]))]) {
			end++
		}
		if m.shortest > 0 && end-start >= m.shortest {
			done = m.redactStretch(&b, text, start, end, done)
		}
		start = end
	}
	if b.Len() == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

// redactStretch writes text from done to the last secret in text[start:end], secrets replaced.
func (m *secretMatcher) redactStretch(b *strings.Builder, text string, start, end, done int) int {
	var rs []rune
	var at []int
	for i, r := range text[start:end] {
		rs, at = append(rs, fold(r)), append(at, start+i)
	}
	at = append(at, end)
	shown := slices.Repeat([]bool{true}, len(rs)+1) // cleared where a secret is; the last stays true
	for i := range rs {
		if i+secretRun <= len(rs) && m.runs[[secretRun]rune(rs[i:])] {
			clear(shown[i : i+secretRun])
		}
		for _, s := range m.short {
			if i+len(s) <= len(rs) && slices.Equal(rs[i:i+len(s)], s) {
				clear(shown[i : i+len(s)])
			}
		}
	}
	for i := 0; i < len(rs); i++ {
		if shown[i] {
			continue
		}
		j := i
		for !shown[j] {
			j++
		}
		b.WriteString(text[done:at[i]])
		b.WriteString(secretMarker)
		done, i = at[j], j
	}
	return done
}

// fold maps the cases of a letter (k, K, the Kelvin sign) to one of them.
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
