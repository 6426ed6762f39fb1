package client

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	// Switch to encoding/json/jsontext once Go ships it without GOEXPERIMENT=jsonv2.
	"github.com/go-json-experiment/json/jsontext"
)

const (
	maxStringValue = 16 << 10           // the "next" link
	maxRun         = maxStringValue + 1 // a run of string, digits or space the tokenizer sees
	maxFieldValue  = 1024               // longest field value returned whole
	fieldEllipsis  = "…"
)

type bodyError struct{ msgError }

func (e *bodyError) Is(target error) bool { return target == errInvalidBody }

func shapeError(format string, args ...any) error {
	return &bodyError{msgError{msg: fmt.Sprintf(format, args...)}}
}

// listPage is what one page of a list view tells the exporter.
type listPage struct {
	Entries   int
	Count     int64
	HasCount  bool
	Next      string
	HasNext   bool    // "next" was a string or null
	NextNamed bool    // "next" was a string, even empty
	IDs       []int64 // among the first wantIDs entries
	NoIDs     []int   // the entries among those without a usable id
}

// decodeListPage reads a list body, an array of objects or an envelope, keeping the ids of its first wantIDs entries.
func decodeListPage(r io.Reader, wantIDs int) (page listPage, err error) {
	d := newDecoder(r)
	if d.dec.PeekKind() == '{' {
		err = d.envelope(&page, wantIDs)
	} else {
		err = d.entries(&page, wantIDs, "expected a JSON array or object")
	}
	if err = d.end(err); err != nil {
		return listPage{}, err
	}
	return page, nil
}

// decodeObject reads a JSON object body and returns the requested top-level scalar fields, cleaned and cut.
func decodeObject(r io.Reader, fields []string, redact *secrets) (map[string]string, error) {
	d := newDecoder(r)
	out, seen := make(map[string]string, len(fields)), make([]bool, len(fields))
	err := d.end(d.object("expected a JSON object", func(name []byte) error {
		if i := slices.Index(fields, string(name)); i >= 0 && !seen[i] {
			seen[i] = true
			return d.field(fields[i], out, redact)
		} else if i >= 0 {
			return shapeError("field %q appears twice", name)
		}
		return d.dec.SkipValue()
	}))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *decoder) field(f string, out map[string]string, redact *secrets) error {
	if k := d.dec.PeekKind(); k == 'n' || k == '{' || k == '[' { // an error comes with the next read
		return d.dec.SkipValue() // null, objects and arrays are left out
	}
	tok, err := d.dec.ReadToken() // a string unquoted, or a number or boolean as written
	if err != nil {
		return fmt.Errorf("field %q: %w", f, d.fail(err))
	}
	value := printable(redact.clean(tok.String()))
	if len(value) > maxFieldValue {
		value = runeCut(value, maxFieldValue) + fieldEllipsis
	}
	out[f] = value
	return nil
}

// printable makes s valid UTF-8 with U+FFFD for each control character but the line feed, before any cut.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && (r < 0x20 || r >= 0x7f && r <= 0x9f) {
			return utf8.RuneError
		}
		return r
	}, s)
}

func runeCut(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type decoder struct {
	in  clipReader
	dec *jsontext.Decoder
	buf []byte // the last string unquoted
}

func newDecoder(r io.Reader) *decoder {
	d := &decoder{in: clipReader{r: r}}
	d.dec = jsontext.NewDecoder(&d.in, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) // U+FFFD, as in encoding/json
	d.in.dec = d.dec
	return d
}

// fail turns an error of the tokenizer into a read error or a bodyError, where it leaves the decoder.
func (d *decoder) fail(err error) error {
	if err == nil {
		return nil
	}
	var be *bodyError
	var se *jsontext.SyntacticError
	switch {
	case d.in.err != nil && d.in.err != io.EOF:
		if _, ok := d.in.err.(*bodyError); ok { // of the clipReader or the gzip stream
			return d.in.err
		}
		return fmt.Errorf("read body: %w", d.in.err)
	case errors.As(err, &be): // already turned
		return err
	case !errors.As(err, &se): // io.EOF: the body ends before a value
		se = &jsontext.SyntacticError{ByteOffset: d.dec.InputOffset(), Err: io.ErrUnexpectedEOF}
	}
	msg := se.Err.Error() // not se.Error(), whose JSON pointer would quote names from the body
	if se.Err == io.ErrUnexpectedEOF {
		msg = "unexpected end of body"
	}
	return &bodyError{msgError{fmt.Sprintf("%s at offset %d", msg, se.ByteOffset), se}}
}

// read reads a delimiter, null, true or false.
func (d *decoder) read() error {
	_, err := d.dec.ReadToken()
	return err
}

// unquote returns the text of a JSON string read whole, valid until the next call.
func (d *decoder) unquote(v []byte) []byte {
	d.buf, _ = jsontext.AppendUnquote(d.buf[:0], v)
	return d.buf
}

// expect reads a value of kind want (of an object or array, its first delimiter), or a null (then nil) where a scalar is wanted, or fails with what.
func (d *decoder) expect(want jsontext.Kind, what string) ([]byte, error) {
	switch k := d.dec.PeekKind(); {
	case k != want && (k != 'n' || want == '{' || want == '['):
		return nil, d.wrongKind(k, what)
	case k == 'n' || k == '{' || k == '[':
		return nil, d.read()
	}
	return d.dec.ReadValue()
}

// wrongKind reports the next value, of kind k, after skipping it so that a syntax error in it comes first.
func (d *decoder) wrongKind(k jsontext.Kind, what string) error {
	if err := d.dec.SkipValue(); err != nil {
		return err
	}
	kind := cmp.Or(map[jsontext.Kind]string{'{': "object", '[': "array", 't': "boolean", 'f': "boolean"}[k], k.String())
	return shapeError("%s, got %s", what, kind)
}

// object reads an object, or fails with what, calling member to read each member's value.
func (d *decoder) object(what string, member func(name []byte) error) error {
	_, err := d.expect('{', what)
	for err == nil {
		if d.dec.PeekKind() == '}' {
			return d.read()
		}
		var name []byte
		if name, err = d.dec.ReadValue(); err == nil {
			err = member(d.unquote(name))
		}
	}
	return err
}

// end returns err, or else checks that nothing but whitespace follows the top-level value.
func (d *decoder) end(err error) error {
	if err != nil {
		return d.fail(err)
	} else if _, err = d.dec.ReadToken(); err == nil {
		return shapeError("another value after the top-level value at offset %d", d.dec.InputOffset())
	} else if err == io.EOF {
		return nil
	}
	return d.fail(err)
}

// envelope reads a paginated envelope, whose members read may appear once.
func (d *decoder) envelope(page *listPage, wantIDs int) error {
	const notCount = `"count" is not a non-negative integer`
	var seen [3]bool // results, count, next
	err := d.object("", func(name []byte) error {
		i := slices.Index([]string{"results", "count", "next"}, string(name))
		if i < 0 {
			return d.dec.SkipValue()
		} else if seen[i] {
			return shapeError("envelope has %q twice", name)
		}
		seen[i] = true
		switch i {
		case 0:
			return d.entries(page, wantIDs, `"results" is not an array`)
		case 1:
			v, err := d.expect('0', notCount)
			if page.Count, page.HasCount = parseID(v); err == nil && v != nil && !page.HasCount {
				err = shapeError(notCount)
			}
			return err
		}
		v, err := d.expect('"', `"next" is not a string or null`)
		if page.HasNext = err == nil; err != nil || v == nil {
			return err
		}
		if v = d.unquote(v); len(v) > maxStringValue {
			return shapeError(`"next": longer than %d bytes`, maxStringValue)
		}
		page.Next, page.NextNamed = string(v), true
		return nil
	})
	if err == nil && !seen[0] {
		err = shapeError(`envelope has no "results"`)
	}
	return err
}

// entries reads the array of a list, or fails with what, keeping the ids of its first wantIDs entries.
func (d *decoder) entries(page *listPage, wantIDs int, what string) error {
	_, err := d.expect('[', what)
	for err == nil {
		switch k := d.dec.PeekKind(); {
		case k == ']':
			return d.read()
		case k != '{':
			err = d.wrongKind(k, "expected an object")
		case page.Entries < wantIDs:
			err = d.entryID(page)
		default:
			err = d.dec.SkipValue()
		}
		if err != nil {
			return fmt.Errorf("list entry %d: %w", page.Entries, d.fail(err))
		}
		page.Entries++
	}
	return err
}

func (d *decoder) entryID(page *listPage) error {
	id, ids, ok := int64(0), 0, false
	err := d.object("", func(name []byte) error {
		if string(name) != "id" {
			return d.dec.SkipValue()
		}
		if ids++; d.dec.PeekKind() != '0' {
			return d.dec.SkipValue()
		}
		v, err := d.dec.ReadValue()
		id, ok = parseID(v)
		return err
	})
	switch {
	case err != nil:
		return err
	case ids == 1 && ok:
		page.IDs = append(page.IDs, id)
	default:
		page.NoIDs = append(page.NoIDs, page.Entries)
	}
	return nil
}

func parseID(v []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil && n >= 0
}

// clipReader bounds the tokenizer's buffer, which holds a whole token, by cutting each run of string
// characters, digits or whitespace after maxRun; it checks what it drops as the tokenizer would.
type clipReader struct {
	r     io.Reader
	dec   *jsontext.Decoder
	err   error // io.EOF, the first read error, or a *bodyError
	cut   bool  // the state below is kept
	inStr bool
	esc   int8 // -1 after a backslash, else the \u hex digits to come
	class byte // of the run outside strings: ' ' or '0'
	run   int
}

func (c *clipReader) Read(p []byte) (int, error) {
	for empty := 0; c.err == nil; {
		// The unread bytes start outside any string, so the state is known.
		unread := c.dec.UnreadBuffer()
		if cut := len(unread)+len(p) > maxRun; cut != c.cut {
			*c = clipReader{r: c.r, dec: c.dec, cut: cut}
			for _, b := range unread {
				c.step(b)
			}
		}
		n, err := c.r.Read(p)
		if n == 0 && err == nil {
			if empty++; empty == 100 {
				err = io.ErrNoProgress
			}
		}
		w := n
		if c.cut {
			w = 0
			var keep bool
			var bad error
			for i := 0; i < n && bad == nil; i++ {
				if keep, bad = c.step(p[i]); keep {
					p[w] = p[i]
					w++
				}
			}
			err = cmp.Or(bad, err)
		}
		if c.err = err; w > 0 || err != nil {
			return w, err
		}
	}
	return 0, c.err
}

// step moves the state over b and tells whether to keep it; it fails on an invalid escape it would drop.
func (c *clipReader) step(b byte) (bool, error) {
	switch {
	case c.inStr && c.esc == 0:
		switch {
		case b == '"':
			c.inStr, c.class = false, 0
			return true, nil
		case b < 0x20: // the tokenizer refuses it
			return true, nil
		case b == '\\':
			c.esc = -1
		}
		c.run++
		return c.run <= maxRun, nil
	case c.inStr:
		keep := c.run <= maxRun
		switch {
		case c.esc < 0 && b == 'u':
			c.esc = 4
		case c.esc < 0 && strings.IndexByte(`"\\/bfnrt`, b) >= 0, c.esc > 0 && strings.IndexByte("0123456789abcdefABCDEF", b) >= 0:
			c.esc = max(c.esc-1, 0)
		case keep: // the tokenizer refuses it
			c.esc = 0
		default:
			return false, shapeError("invalid escape sequence in a string longer than %d bytes", maxRun)
		}
		return keep, nil
	case b == '"':
		c.inStr, c.run = true, 0
	case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b >= '0' && b <= '9':
		class := byte('0')
		if b < '0' {
			class = ' '
		}
		if c.class != class {
			c.class, c.run = class, 0
		}
		c.run++
		return c.run <= maxRun, nil
	default:
		c.class = 0
	}
	return true, nil
}
