package client

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/common/config"
	"golang.org/x/text/unicode/norm"
)

// findSecrets keeps every secret of cfg for redaction, and the files the guard checks.
func (t *Transport) findSecrets(cfg *config.HTTPClientConfig) {
	s := &secrets{}
	Credentials(cfg, func(setting, value, file string) {
		switch f := (&fileSecret{path: file, max: maxKeyFileBytes}); {
		case file == "":
			s.fixed = append(s.fixed, value)
		case setting == "authorization":
			t.keyFile, s.files = f, append(s.files, f)
		default:
			t.headerFiles, s.files = append(t.headerFiles, f), append(s.files, f)
		}
	})
	t.redact = s
}

// Credentials calls f with the setting, the inline value and the file of each credential of cfg,
// everything that lends its holder's authority; headers come in order of name.
func Credentials(cfg *config.HTTPClientConfig, f func(setting, value, file string)) {
	if a := cfg.Authorization; a != nil && (a.Credentials != "" || a.CredentialsFile != "") {
		f("authorization", string(a.Credentials), a.CredentialsFile)
	}
	if cfg.HTTPHeaders != nil {
		for _, name := range slices.Sorted(maps.Keys(cfg.HTTPHeaders.Headers)) {
			for _, v := range cfg.HTTPHeaders.Headers[name].Secrets {
				f("http_headers."+name, string(v), "")
			}
			for _, file := range cfg.HTTPHeaders.Headers[name].Files {
				f("http_headers."+name, "", file)
			}
		}
	}
	if t := cfg.TLSConfig; t.Cert != "" || t.CertFile != "" || t.Key != "" || t.KeyFile != "" {
		f("tls_config (a client certificate)", "", "")
	}
	if u := cfg.ProxyURL.URL; u != nil {
		if pw, ok := u.User.Password(); ok {
			f("proxy_url (a password)", pw, "")
		}
	}
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		v := os.Getenv(name)
		if !strings.Contains(v, "://") {
			v = "http://" + v
		}
		if u, err := url.Parse(v); err == nil && cfg.ProxyFromEnvironment {
			if pw, ok := u.User.Password(); ok {
				f("proxy_from_environment (a password in HTTP_PROXY or HTTPS_PROXY)", pw, "")
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.ProxyConnectHeader)) {
		for _, v := range cfg.ProxyConnectHeader[name] {
			f("proxy_connect_header", string(v), "")
		}
	}
}

const (
	maxKeyFileBytes = 64 << 10
	maxCAFileBytes  = 1 << 20
)

// ReadRegularFile reads a regular file of at most max bytes, refusing a FIFO without waiting on it; its errors do not name the file.
func ReadRegularFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathless(err)
	}
	if m := fi.Mode(); !m.IsRegular() {
		kind := map[fs.FileMode]string{fs.ModeDir: "a directory", fs.ModeNamedPipe: "a FIFO", fs.ModeDevice: "a device"}[m.Type()&^fs.ModeCharDevice]
		return nil, fmt.Errorf("it is %s, not a regular file", cmp.Or(kind, "something else"))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && (fi.Size() > max || int64(len(b)) > max) {
		err = fmt.Errorf("it is larger than %d KiB", max>>10)
	}
	return b, pathless(err)
}

func pathless(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// CheckFiles reads every file that cfg names, naming the first that cannot be read.
func CheckFiles(cfg *config.HTTPClientConfig) (err error) {
	check := func(key, path string, max int64) {
		if path == "" || err != nil {
			return
		}
		if _, e := ReadRegularFile(path, max); e != nil {
			err = fmt.Errorf("%s: cannot read %s: %w", key, path, e)
		}
	}
	Credentials(cfg, func(setting, _, file string) {
		key := setting + ".files"
		if setting == "authorization" {
			key = "authorization.credentials_file"
		}
		check(key, file, maxKeyFileBytes)
	})
	check("tls_config.ca_file", cfg.TLSConfig.CAFile, maxCAFileBytes)
	check("tls_config.cert_file", cfg.TLSConfig.CertFile, maxKeyFileBytes)
	check("tls_config.key_file", cfg.TLSConfig.KeyFile, maxKeyFileBytes)
	return err
}

// ReadKeyFile reads a key file as the transport will and checks that the key can be sent.
func ReadKeyFile(path string) (string, error) {
	return (&fileSecret{path: path, max: maxKeyFileBytes}).key()
}

// ValidKey tells whether key is non-empty and free of control characters.
func ValidKey(key string) bool {
	return key != "" && !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// fileSecret is a prometheus/common SecretReader of a file of at most max bytes, re-read when it changes.
type fileSecret struct {
	path string
	max  int64

	mu     sync.Mutex
	info   os.FileInfo
	cached string
}

func (s *fileSecret) Fetch(context.Context) (string, error) {
	v, err := s.read()
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", s.path, err)
	}
	return v, nil
}

func (s *fileSecret) Description() string { return "file " + s.path }
func (*fileSecret) Immutable() bool       { return false }

func (s *fileSecret) key() (string, error) {
	key, err := s.read()
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read the key file %s: %w", s.path, err)
	case key == "":
		return "", fmt.Errorf("the key file %s is empty", s.path)
	case !ValidKey(key):
		return "", fmt.Errorf("the key file %s has control characters such as a line break inside the key: write the key alone on one line", s.path)
	}
	return key, nil
}

// read returns the secret, trimmed, or the error of reading the file.
func (s *fileSecret) read() (string, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return "", pathless(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info != nil && os.SameFile(fi, s.info) && fi.Size() == s.info.Size() && fi.ModTime().Equal(s.info.ModTime()) {
		return s.cached, nil
	}
	b, err := ReadRegularFile(s.path, s.max)
	if err != nil {
		return "", err
	}
	s.info, s.cached = fi, strings.TrimSpace(string(b))
	return s.cached, nil
}

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

// Text never shows a run of secretRun characters of a secret or of its encodings; a shorter one is hidden as a whole word.
const (
	secretRun    = 12
	minSecret    = 4
	secretMarker = "<secret>"
)

// secrets cuts every secret of a module out of text from outside, in whatever case or encoding.
type secrets struct {
	fixed []string      // given inline, "" for none
	files []*fileSecret // re-read as they change

	mu    sync.Mutex
	from  string                   // the values runs and words were learnt from
	runs  map[[secretRun]rune]bool // runs of the long secrets and their forms
	words [][]rune                 // the short ones whole
}

// values returns the secrets as they are now, files read again, and them joined.
func (s *secrets) values() ([]string, string) {
	vals := slices.Clone(s.fixed)
	for _, f := range s.files {
		v, _ := f.read()
		vals = append(vals, v)
	}
	return vals, strings.Join(vals, "\x00")
}

func (s *secrets) clean(text string) string {
	if s == nil || text == "" {
		return text
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.learn(s.values())
	}
	return s.redact(text)
}

// refresh learns the secrets again if a file changed; the transport calls it once a request has been sent.
func (s *secrets) refresh() {
	vals, from := s.values()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil || from != s.from {
		s.learn(vals, from)
	}
}

func (s *secrets) learn(vals []string, from string) {
	s.runs, s.words, s.from = make(map[[secretRun]rune]bool), nil, from
	for _, v := range vals {
		if utf8.RuneCountInString(v) < minSecret {
			continue
		}
		for _, form := range encodings(v) {
			rs, _ := foldText(form)
			for i := 0; i+secretRun <= len(rs); i++ {
				s.runs[[secretRun]rune(rs[i:])] = true
			}
			if len(rs) >= minSecret && len(rs) < secretRun {
				s.words = append(s.words, rs)
			}
		}
	}
}

// encodings returns v, its hex, and its base64 in both alphabets at each alignment, less the characters that depend on the bytes around v.
func encodings(v string) []string {
	forms := []string{v, hex.EncodeToString([]byte(v))}
	for a := range 3 {
		b64 := base64.RawStdEncoding.EncodeToString(append(make([]byte, a), v...))
		b64 = b64[(8*a+5)/6 : len(b64)-min((a+len(v))%3, 1)]
		forms = append(forms, b64, strings.NewReplacer("+", "-", "/", "_").Replace(b64))
	}
	return forms
}

// redact replaces each stretch of text that folds to secrets by secretMarker.
func (s *secrets) redact(text string) string {
	if len(s.runs) == 0 && len(s.words) == 0 {
		return text
	}
	rs, at := foldText(text)
	var b strings.Builder
	done, until := 0, -1 // text[:done] is written, rs[:until] hidden
	for i := range rs {
		end := i
		if i+secretRun <= len(rs) && s.runs[[secretRun]rune(rs[i:])] {
			end = i + secretRun
		}
		for _, w := range s.words {
			if j := i + len(w); j <= len(rs) && !inWord(rs, i-1) && !inWord(rs, j) && slices.Equal(rs[i:j], w) {
				end = max(end, j)
			}
		}
		if end > i {
			if i > until { // not joined to the stretch before
				b.WriteString(text[done:at[i]] + secretMarker)
			}
			until = max(until, end)
			done = at[until]
		}
	}
	return b.String() + text[done:]
}

// inWord tells whether rs[i] joins the characters around it into one word, as in Europe-West.
func inWord(rs []rune, i int) bool {
	return i >= 0 && i < len(rs) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i]) || rs[i] == '-' || rs[i] == '_')
}

// foldText returns text's characters as secrets are compared (escapes decoded, invisible ones dropped, NFKC, upper case)
// and where each starts, at[len(rs)] being len(text).
func foldText(text string) (rs []rune, at []int) {
	for i := 0; i < len(text); {
		r, n := unescape(text[i:])
		switch {
		case r < utf8.RuneSelf: // NFKC leaves ASCII alone
			rs, at = append(rs, unicode.ToUpper(r)), append(at, i)
		case !unicode.Is(unicode.Cf, r): // not a zero-width space or soft hyphen
			for _, c := range norm.NFKC.String(string(r)) {
				rs, at = append(rs, unicode.ToUpper(c)), append(at, i)
			}
		}
		i += n
	}
	return rs, append(at, len(text))
}

// unescape decodes the character that s starts with: percent-encoded, JSON-escaped or plain.
func unescape(s string) (rune, int) {
	var b []byte
	for n := 0; n+3 <= len(s) && s[n] == '%' && !utf8.FullRune(b); n += 3 {
		c, err := strconv.ParseUint(s[n+1:n+3], 16, 8)
		if err != nil {
			break
		}
		b = append(b, byte(c))
	}
	if r, size := utf8.DecodeRune(b); size > 1 || size == 1 && r != utf8.RuneError {
		return r, 3 * size
	}
	if strings.HasPrefix(s, `\/`) { // JSON's, not Go's
		return '/', 2
	}
	if r, _, tail, err := strconv.UnquoteChar(s, '"'); err == nil {
		return r, len(s) - len(tail)
	}
	return utf8.DecodeRuneInString(s)
}
