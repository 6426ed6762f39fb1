package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a streaming JSON scanner that reads exactly what the
// exporter needs from a body: the shape of a list view and the ids of its
// first entries, or a few scalar fields of an object. It validates the whole
// body as JSON while it reads, in fixed-size chunks, so a body of any size
// costs one pooled buffer plus the ids that are kept.
//
// Duplicate keys: a key the exporter reads ("results", "count" and "next"
// in an envelope; a requested field of an object) that appears twice in the
// same object makes the body invalid, because parsers disagree on which
// copy wins. An entry with "id" twice has no usable id, like an entry
// without one. Duplicates of any other key are allowed.

// errInvalidBody is wrapped by every error about a body that is not valid
// JSON of the expected shape, as opposed to an error reading the body.
var errInvalidBody = errors.New("invalid body")

const (
	// maxDepth caps the nesting of arrays and objects, counting the
	// top-level value as 1.
	maxDepth = 512
	// maxStringValue caps strings and numbers kept in memory: the "next"
	// link, and the prefix of a field returned by decodeObject.
	maxStringValue = 16 << 10
	// maxFieldValue is the longest field value decodeObject returns whole;
	// a longer one is cut to its first maxFieldValue bytes, at a character
	// boundary, followed by fieldEllipsis.
	maxFieldValue = 1024
	// decodeBufferSize is the size of the chunks read from the body.
	decodeBufferSize = 32 << 10
)

// fieldEllipsis ends a field value that was cut.
const fieldEllipsis = "…"

// bodyErrorKind tells what kind of problem a bodyError reports.
type bodyErrorKind uint8

const (
	kindSyntax bodyErrorKind = iota // not valid JSON
	kindShape                       // valid JSON, but not of the expected shape
	kindLimit                       // beyond a limit of the scanner (depth, length)
)

// bodyError reports a body that is malformed, of the wrong shape or beyond
// a limit. It matches errInvalidBody with errors.Is, and io.ErrUnexpectedEOF
// too when the body ended in the middle of the value.
type bodyError struct {
	msg   string
	kind  bodyErrorKind
	cause error
}

func (e *bodyError) Error() string        { return e.msg }
func (e *bodyError) Is(target error) bool { return target == errInvalidBody }
func (e *bodyError) Unwrap() error        { return e.cause }

func shapeError(format string, args ...any) error {
	return &bodyError{msg: fmt.Sprintf(format, args...), kind: kindShape}
}

// withContext prefixes the message of a bodyError; read errors pass as they are.
func withContext(err error, format string, args ...any) error {
	var be *bodyError
	if errors.As(err, &be) {
		be.msg = fmt.Sprintf(format, args...) + ": " + be.msg
	}
	return err
}

// listPage is what one page of a list view tells the exporter.
type listPage struct {
	Entries  int    // number of entries on this page
	Count    int64  // envelope "count"
	HasCount bool   // envelope carried an integer "count"
	Next     string // envelope "next" ("" when null, absent or empty)
	HasNext  bool   // envelope carried "next", a string or null
	// NextNamed tells that "next" was a string, even an empty one: a
	// next page is named, and "" names the page itself.
	NextNamed bool
	Envelope  bool    // body was an envelope rather than a plain array
	IDs       []int64 // integer ids among the first wantIDs entries, in order
	// NoID counts the entries among the first wantIDs that have no usable
	// id: none, one that is not an integer fitting 64 bits, a negative
	// one, or two.
	NoID int
	// FirstNoID is the index on this page of the first of them, numbered
	// from 0; meaningful when NoID > 0.
	FirstNoID int
}

// decodeListPage reads one list body: a plain JSON array of entries or a
// paginated envelope {"count", "next", "previous", "results"}. Every entry
// must be an object. Of its first wantIDs entries (0 = none) it keeps the
// integer "id"s and counts those without one; later entries are only
// validated, their ids are never needed. Errors about the body wrap
// errInvalidBody (entries are numbered from 0 in their messages); errors
// reading r are wrapped as they are.
func decodeListPage(r io.Reader, wantIDs int) (listPage, error) {
	s := newScanner(r)
	defer s.release()
	var page listPage
	c, err := s.peekNonSpace()
	if err != nil {
		return listPage{}, err
	}
	switch c {
	case '[':
		s.pos++
		err = s.readEntries(&page, max(wantIDs, 0), 1)
	case '{':
		s.pos++
		page.Envelope = true
		err = s.readEnvelope(&page, max(wantIDs, 0))
	default:
		err = s.wrongKind(c, 0, "expected a JSON array or object")
	}
	if err == nil {
		err = s.expectEnd()
	}
	if err != nil {
		return listPage{}, err
	}
	return page, nil
}

// decodeObject reads one JSON object body and returns the string form of
// the requested top-level scalar fields that are present: strings
// unescaped, numbers as their literal text, true and false. Fields that are
// null, objects or arrays are left out. With no fields it only validates.
//
// A value longer than maxFieldValue bytes is cut (see cutField); only its
// first maxStringValue bytes are ever held. clean, when not nil, is applied
// to each value before it is cut, so that a secret it removes cannot
// survive in part at the cut.
func decodeObject(r io.Reader, fields []string, clean func(string) string) (map[string]string, error) {
	s := newScanner(r)
	defer s.release()
	c, err := s.peekNonSpace()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		return nil, s.wrongKind(c, 0, "expected a JSON object")
	}
	s.pos++
	maxKey := 0
	for _, f := range fields {
		maxKey = max(maxKey, len(f))
	}
	out := make(map[string]string, len(fields))
	seen := make([]bool, len(fields))
	err = s.readObject(1, maxKey, func(key []byte) error {
		for i, f := range fields {
			if key != nil && string(key) == f {
				if seen[i] {
					return shapeError("field %q appears twice", f)
				}
				seen[i] = true
				return s.readField(f, out, clean)
			}
		}
		return s.skipValue(1)
	})
	if err == nil {
		err = s.expectEnd()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readField reads the value of the requested field f into out.
func (s *scanner) readField(f string, out map[string]string, clean func(string) string) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	var v []byte
	var tooLong bool
	switch {
	case c == '"':
		s.pos++
		v, tooLong, err = s.readString(maxStringValue)
	case c == '-' || isDigit(c):
		s.pos++
		s.scratch = append(s.scratch[:0], c)
		_, err = s.scanNumber(c, true)
		v, tooLong = s.scratch, len(s.scratch) > maxStringValue
	case c == 't' || c == 'f':
		s.pos++
		v = literalTrue
		if c == 'f' {
			v = literalFalse
		}
		err = s.expectLiteral(v[1:])
	default: // null, objects and arrays are skipped
		return s.skipValue(1)
	}
	if err != nil {
		return withContext(err, "field %q", f)
	}
	value := string(v)
	if clean != nil {
		value = clean(value)
	}
	if tooLong || len(value) > maxFieldValue {
		value = cutField(value)
	}
	out[f] = value
	return nil
}

// cutField cuts v to its first maxFieldValue bytes, backing off to the
// start of a UTF-8 character, and appends fieldEllipsis.
func cutField(v string) string {
	if len(v) <= maxFieldValue {
		return v + fieldEllipsis
	}
	cut := maxFieldValue
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + fieldEllipsis
}

// readEnvelope reads the members of a paginated envelope; '{' is consumed.
func (s *scanner) readEnvelope(page *listPage, wantIDs int) error {
	var seenResults, seenCount, seenNext bool
	err := s.readObject(1, len("results"), func(key []byte) error {
		switch string(key) {
		case "results":
			if seenResults {
				return shapeError(`envelope has "results" twice`)
			}
			seenResults = true
			return s.readResults(page, wantIDs)
		case "count":
			if seenCount {
				return shapeError(`envelope has "count" twice`)
			}
			seenCount = true
			return s.readCount(page)
		case "next":
			if seenNext {
				return shapeError(`envelope has "next" twice`)
			}
			seenNext = true
			return s.readNext(page)
		}
		return s.skipValue(1)
	})
	if err == nil && !seenResults {
		err = shapeError(`envelope has no "results"`)
	}
	return err
}

func (s *scanner) readResults(page *listPage, wantIDs int) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	if c != '[' {
		return s.wrongKind(c, 1, `"results" is not an array`)
	}
	s.pos++
	return s.readEntries(page, wantIDs, 2)
}

func (s *scanner) readCount(page *listPage) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	switch {
	case c == 'n':
		s.pos++
		return s.expectLiteral([]byte("ull"))
	case c == '-' || isDigit(c):
		s.pos++
		n, err := s.scanNumber(c, false)
		if err != nil {
			return err
		}
		v, ok := n.int64()
		if !ok || v < 0 {
			return shapeError(`"count" is not a non-negative integer`)
		}
		page.Count, page.HasCount = v, true
		return nil
	}
	return s.wrongKind(c, 1, `"count" is not a non-negative integer`)
}

func (s *scanner) readNext(page *listPage) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	switch c {
	case 'n':
		s.pos++
		page.HasNext = true
		return s.expectLiteral([]byte("ull"))
	case '"':
		s.pos++
		page.HasNext = true
		v, tooLong, err := s.readString(maxStringValue)
		if err == nil && tooLong {
			err = tooLongError()
		}
		if err != nil {
			return withContext(err, `"next"`)
		}
		page.Next, page.NextNamed = string(v), true
		return nil
	}
	return s.wrongKind(c, 1, `"next" is not a string or null`)
}

// readEntries reads the entries of a list; '[' is consumed and depth is the
// depth of the array.
func (s *scanner) readEntries(page *listPage, wantIDs, depth int) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	if c == ']' {
		s.pos++
		return nil
	}
	if wantIDs > 0 && page.IDs == nil {
		page.IDs = make([]int64, 0, min(wantIDs, 64))
	}
	for {
		if page.Entries < wantIDs {
			err = s.readEntryID(page, depth+1)
		} else {
			err = s.skipEntry(depth + 1)
		}
		if err != nil {
			return withContext(err, "list entry %d", page.Entries)
		}
		page.Entries++
		c, err := s.nextNonSpace()
		switch {
		case err != nil:
			return err
		case c == ']':
			return nil
		case c != ',':
			return s.syntaxError(c, "after list entry")
		}
	}
}

// skipEntry skips one list entry, which must be an object at depth.
func (s *scanner) skipEntry(depth int) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	if c != '{' {
		return s.wrongKind(c, depth-1, "expected an object")
	}
	return s.skipValue(depth - 1)
}

// readEntryID reads one list entry, an object at depth, and adds its id to
// page, or counts it in page.NoID when it has no usable one.
func (s *scanner) readEntryID(page *listPage, depth int) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return err
	}
	if c != '{' {
		return s.wrongKind(c, depth-1, "expected an object")
	}
	if depth > maxDepth {
		return s.depthError()
	}
	s.pos++
	var id int64
	var ids int // times "id" appears
	var isInt bool
	err = s.readObject(depth, len("id"), func(key []byte) error {
		if string(key) != "id" {
			return s.skipValue(depth)
		}
		ids++
		var err error
		id, isInt, err = s.readID(depth)
		return err
	})
	if err != nil {
		return err
	}
	if ids == 1 && isInt && id >= 0 {
		page.IDs = append(page.IDs, id)
		return nil
	}
	if page.NoID == 0 {
		page.FirstNoID = page.Entries
	}
	page.NoID++
	return nil
}

// readID reads the value of "id" in an entry at depth. It reports whether
// the value is an integer that fits int64; any other valid value is
// skipped.
func (s *scanner) readID(depth int) (int64, bool, error) {
	c, err := s.peekNonSpace()
	if err != nil {
		return 0, false, err
	}
	if c != '-' && !isDigit(c) {
		return 0, false, s.skipValue(depth)
	}
	s.pos++
	n, err := s.scanNumber(c, false)
	if err != nil {
		return 0, false, err
	}
	v, ok := n.int64()
	return v, ok, nil
}

// readObject reads the members of an object at depth whose '{' is
// consumed. For each key it calls member, which must consume the value.
// Keys longer than maxKey bytes are passed as nil. The key is only valid
// during the call.
func (s *scanner) readObject(depth, maxKey int, member func(key []byte) error) error {
	c, err := s.nextNonSpace()
	if err != nil {
		return err
	}
	if c == '}' {
		return nil
	}
	for {
		if c != '"' {
			return s.syntaxError(c, "looking for beginning of object key string")
		}
		key, err := s.readKey(maxKey)
		if err != nil {
			return err
		}
		if s.pos < s.end && s.buf[s.pos] == ':' {
			s.pos++
		} else {
			// Reading on may refill the buffer that key points into.
			if key != nil {
				key = append(s.scratch[:0], key...)
				s.scratch = key[:0]
			}
			if err := s.expectColon(); err != nil {
				return err
			}
		}
		if err := member(key); err != nil {
			return err
		}
		if c, err = s.nextNonSpace(); err != nil {
			return err
		}
		switch c {
		case '}':
			return nil
		case ',':
			if c, err = s.nextNonSpace(); err != nil {
				return err
			}
		default:
			return s.syntaxError(c, "after object key:value pair")
		}
	}
}

// wrongKind reports that the value starting with c is not what was
// expected. It first skips the value (at the given depth of its container),
// so that a syntax error inside it takes precedence.
func (s *scanner) wrongKind(c byte, depth int, what string) error {
	kind := kindOf(c)
	if kind == "" {
		s.pos++
		return s.syntaxError(c, "looking for beginning of value")
	}
	if err := s.skipValue(depth); err != nil {
		return err
	}
	return shapeError("%s, got %s", what, kind)
}

func kindOf(c byte) string {
	switch {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || isDigit(c):
		return "number"
	}
	return ""
}

// scanner reads JSON from r through a fixed buffer.
type scanner struct {
	r        io.Reader
	buf      []byte
	pos, end int   // unread bytes are buf[pos:end]
	base     int64 // offset in the body of buf[0]
	err      error // sticky error from r, io.EOF at the end
	bufp     *[]byte
	scratch  []byte                  // decoded keys and kept values
	spare    [32]byte                // first storage of scratch
	objects  [maxDepth/64 + 1]uint64 // bit d set: the container at depth d is an object
}

var bufferPool = sync.Pool{New: func() any {
	b := make([]byte, decodeBufferSize)
	return &b
}}

func newScanner(r io.Reader) *scanner {
	bp := bufferPool.Get().(*[]byte)
	s := &scanner{r: r, buf: *bp, bufp: bp}
	s.scratch = s.spare[:0]
	return s
}

// release returns the buffer to the pool; the scanner is unusable after.
func (s *scanner) release() {
	bufferPool.Put(s.bufp)
	s.buf, s.bufp = nil, nil
}

// fill reads the next chunk once buf[pos:end] is used up. It reports
// whether there is at least one unread byte.
func (s *scanner) fill() bool {
	if s.pos < s.end {
		return true
	}
	if s.err != nil {
		return false
	}
	s.base += int64(s.end)
	s.pos, s.end = 0, 0
	for range 100 {
		n, err := s.r.Read(s.buf)
		if n < 0 || n > len(s.buf) {
			s.err = errors.New("reader returned an invalid count")
			return false
		}
		s.end, s.err = n, err
		if n > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
	s.err = io.ErrNoProgress
	return false
}

// endError is the error once fill fails in the middle of the value.
func (s *scanner) endError() error {
	if s.err == io.EOF {
		return &bodyError{
			msg:   fmt.Sprintf("unexpected end of body at offset %d", s.base+int64(s.end)),
			kind:  kindSyntax,
			cause: io.ErrUnexpectedEOF,
		}
	}
	return fmt.Errorf("read body: %w", s.err)
}

// syntaxError reports the invalid byte c just consumed.
func (s *scanner) syntaxError(c byte, context string) error {
	return &bodyError{
		msg:  fmt.Sprintf("invalid character %s %s at offset %d", quoteByte(c), context, s.base+int64(s.pos)-1),
		kind: kindSyntax,
	}
}

func tooLongError() error {
	return &bodyError{msg: fmt.Sprintf("longer than %d bytes", maxStringValue), kind: kindLimit}
}

func (s *scanner) depthError() error {
	return &bodyError{msg: fmt.Sprintf("nested deeper than %d levels", maxDepth), kind: kindLimit}
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// peekNonSpace skips whitespace and returns the next byte without consuming it.
func (s *scanner) peekNonSpace() (byte, error) {
	for {
		for s.pos < s.end {
			if c := s.buf[s.pos]; !isSpace(c) {
				return c, nil
			}
			s.pos++
		}
		if !s.fill() {
			return 0, s.endError()
		}
	}
}

// nextNonSpace skips whitespace and consumes the next byte.
func (s *scanner) nextNonSpace() (byte, error) {
	if s.pos < s.end {
		if c := s.buf[s.pos]; c > ' ' {
			s.pos++
			return c, nil
		}
	}
	c, err := s.peekNonSpace()
	if err == nil {
		s.pos++
	}
	return c, err
}

// nextByte consumes the next byte, whitespace or not.
func (s *scanner) nextByte() (byte, error) {
	if s.pos == s.end && !s.fill() {
		return 0, s.endError()
	}
	c := s.buf[s.pos]
	s.pos++
	return c, nil
}

func (s *scanner) expectColon() error {
	c, err := s.nextNonSpace()
	if err == nil && c != ':' {
		err = s.syntaxError(c, "after object key")
	}
	return err
}

// expectLiteral consumes rest, the remainder of true, false or null.
func (s *scanner) expectLiteral(rest []byte) error {
	for _, want := range rest {
		c, err := s.nextByte()
		if err != nil {
			return err
		}
		if c != want {
			return s.syntaxError(c, "in literal")
		}
	}
	return nil
}

// expectEnd checks that only whitespace follows the top-level value.
func (s *scanner) expectEnd() error {
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			s.pos++
			if !isSpace(c) {
				return s.syntaxError(c, "after top-level value")
			}
		}
		if !s.fill() {
			if s.err == io.EOF {
				return nil
			}
			return fmt.Errorf("read body: %w", s.err)
		}
	}
}

// skipValue skips one value held by a container at depth (0 for the top
// level), validating it. Nesting is tracked in s.objects rather than by
// recursion, so depth is bounded by maxDepth alone.
func (s *scanner) skipValue(depth int) error {
	base := depth
value:
	for {
		c, err := s.nextNonSpace()
		if err != nil {
			return err
		}
		switch {
		case c == '"':
			err = s.skipString()
		case c == '{':
			if depth++; depth > maxDepth {
				return s.depthError()
			}
			s.objects[depth/64] |= 1 << (depth % 64)
			if c, err = s.nextNonSpace(); err != nil {
				return err
			}
			if c == '}' {
				depth--
				break
			}
			if err = s.skipKey(c); err != nil {
				return err
			}
			continue value
		case c == '[':
			if depth++; depth > maxDepth {
				return s.depthError()
			}
			s.objects[depth/64] &^= 1 << (depth % 64)
			if c, err = s.peekNonSpace(); err != nil {
				return err
			}
			if c == ']' {
				s.pos++
				depth--
				break
			}
			continue value
		case c == '-' || isDigit(c):
			_, err = s.scanNumber(c, false)
		case c == 't':
			err = s.expectLiteral(literalTrue[1:])
		case c == 'f':
			err = s.expectLiteral(literalFalse[1:])
		case c == 'n':
			err = s.expectLiteral(literalNull[1:])
		default:
			return s.syntaxError(c, "looking for beginning of value")
		}
		if err != nil {
			return err
		}
		// After a value: close containers until another value follows.
		for depth > base {
			c, err := s.nextNonSpace()
			if err != nil {
				return err
			}
			object := s.objects[depth/64]&(1<<(depth%64)) != 0
			switch {
			case c == ',' && object:
				if c, err = s.nextNonSpace(); err != nil {
					return err
				}
				if err = s.skipKey(c); err != nil {
					return err
				}
				continue value
			case c == ',':
				continue value
			case c == '}' && object, c == ']' && !object:
				depth--
			case object:
				return s.syntaxError(c, "after object key:value pair")
			default:
				return s.syntaxError(c, "after array element")
			}
		}
		return nil
	}
}

var (
	literalTrue  = []byte("true")
	literalFalse = []byte("false")
	literalNull  = []byte("null")
)

// skipKey skips an object key starting with c, already consumed, and its colon.
func (s *scanner) skipKey(c byte) error {
	if c != '"' {
		return s.syntaxError(c, "looking for beginning of object key string")
	}
	if err := s.skipString(); err != nil {
		return err
	}
	return s.expectColon()
}

// plain marks the bytes that stand for themselves inside a string.
var plain = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// hasSpecial reports whether any of the 8 bytes in x is a quote, a
// backslash or a control character (the classic "has zero byte" and "has
// byte less than" bit tricks, exact for telling whether one exists).
func hasSpecial(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q|(b-ones)&^b|(x-ones*0x20)&^x)&highs != 0
}

// skipString skips the rest of a string whose opening quote is consumed.
func (s *scanner) skipString() error {
	for {
		buf := s.buf[:s.end]
		i := s.pos
		for i+8 <= len(buf) && !hasSpecial(binary.LittleEndian.Uint64(buf[i:])) {
			i += 8
		}
		for i < len(buf) && plain[buf[i]] {
			i++
		}
		s.pos = i
		if i == len(buf) {
			if !s.fill() {
				return s.endError()
			}
			continue
		}
		s.pos++
		switch c := buf[i]; c {
		case '"':
			return nil
		case '\\':
			if _, _, err := s.readEscape(); err != nil {
				return err
			}
		default:
			return s.syntaxError(c, "in string literal")
		}
	}
}

// readEscape reads an escape sequence after its backslash. It returns the
// character it stands for, or with u set the code unit of a \u escape.
func (s *scanner) readEscape() (r rune, u bool, err error) {
	c, err := s.nextByte()
	if err != nil {
		return 0, false, err
	}
	switch c {
	case '"', '\\', '/':
		return rune(c), false, nil
	case 'b':
		return '\b', false, nil
	case 'f':
		return '\f', false, nil
	case 'n':
		return '\n', false, nil
	case 'r':
		return '\r', false, nil
	case 't':
		return '\t', false, nil
	case 'u':
		for range 4 {
			if c, err = s.nextByte(); err != nil {
				return 0, false, err
			}
			d := hexValue(c)
			if d < 0 {
				return 0, false, s.syntaxError(c, `in \u hexadecimal character escape`)
			}
			r = r<<4 | d
		}
		return r, true, nil
	}
	return 0, false, s.syntaxError(c, "in string escape code")
}

func hexValue(c byte) rune {
	switch {
	case isDigit(c):
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// readKey reads an object key whose opening quote is consumed. It returns
// the unescaped key, or nil when the key is longer than maxKey bytes. The
// result is only valid until the scanner reads on.
func (s *scanner) readKey(maxKey int) ([]byte, error) {
	// Fast path: the whole key is in the buffer and has no escapes.
	buf := s.buf[s.pos:s.end]
	for i, c := range buf {
		if plain[c] {
			continue
		}
		if c != '"' {
			break
		}
		s.pos += i + 1
		if i > maxKey {
			return nil, nil
		}
		return buf[:i:i], nil
	}
	key, tooLong, err := s.readString(maxKey)
	if tooLong {
		key = nil
	}
	return key, err
}

// readString reads the rest of a string whose opening quote is consumed and
// returns it unescaped, with invalid UTF-8 replaced as encoding/json does.
// Past limit bytes it keeps the prefix, validates the rest without keeping
// it and reports tooLong. The result is only valid until the scanner reads on.
func (s *scanner) readString(limit int) (v []byte, tooLong bool, err error) {
	b := stringBuilder{v: s.scratch[:0], limit: limit}
	for {
		if s.pos == s.end && !s.fill() {
			return nil, false, s.endError()
		}
		i := s.pos
		for i < s.end && plain[s.buf[i]] {
			i++
		}
		if i > s.pos {
			b.write(s.buf[s.pos:i])
			s.pos = i
			continue
		}
		c := s.buf[i]
		s.pos++
		switch {
		case c == '"':
			b.flush()
			s.scratch = b.v[:0]
			return sanitizeUTF8(b.v), b.tooLong, nil
		case c != '\\':
			return nil, false, s.syntaxError(c, "in string literal")
		}
		r, u, err := s.readEscape()
		switch {
		case err != nil:
			return nil, false, err
		case u:
			b.unicode(r)
		default:
			b.flush()
			b.putRune(r)
		}
	}
}

// stringBuilder collects an unescaped string up to a limit.
type stringBuilder struct {
	v       []byte
	limit   int
	tooLong bool
	pending rune // high surrogate waiting for its pair
}

func (b *stringBuilder) write(p []byte) {
	b.flush()
	b.put(p)
}

// put appends p, keeping at most limit bytes in all: past the limit the
// string is marked too long and only its prefix is kept.
func (b *stringBuilder) put(p []byte) {
	if b.tooLong {
		return
	}
	if room := b.limit - len(b.v); len(p) > room {
		b.v = append(b.v, p[:room]...)
		b.tooLong = true
		return
	}
	b.v = append(b.v, p...)
}

func (b *stringBuilder) putRune(r rune) {
	var a [utf8.UTFMax]byte
	b.put(utf8.AppendRune(a[:0], r))
}

// flush writes a high surrogate that found no pair as U+FFFD.
func (b *stringBuilder) flush() {
	if b.pending != 0 {
		b.pending = 0
		b.putRune(utf8.RuneError)
	}
}

// unicode adds the code unit of a \u escape, joining surrogate pairs.
func (b *stringBuilder) unicode(r rune) {
	if b.pending != 0 {
		high := b.pending
		b.pending = 0
		if pair := utf16.DecodeRune(high, r); pair != utf8.RuneError {
			b.putRune(pair)
			return
		}
		b.putRune(utf8.RuneError)
	}
	switch {
	case r >= 0xD800 && r < 0xDC00:
		b.pending = r
	case utf16.IsSurrogate(r):
		b.putRune(utf8.RuneError)
	default:
		b.putRune(r)
	}
}

// sanitizeUTF8 replaces each byte of invalid UTF-8 with U+FFFD.
func sanitizeUTF8(v []byte) []byte {
	if utf8.Valid(v) {
		return v
	}
	out := make([]byte, 0, len(v)+8)
	for len(v) > 0 {
		r, n := utf8.DecodeRune(v)
		out = utf8.AppendRune(out, r)
		v = v[n:]
	}
	return out
}

// number describes a scanned JSON number.
type number struct {
	u        uint64 // magnitude of the integer part
	neg      bool
	integer  bool // no fraction and no exponent
	overflow bool // the integer part does not fit u
}

// int64 returns the value of an integer that fits int64.
func (n number) int64() (int64, bool) {
	switch {
	case !n.integer || n.overflow:
		return 0, false
	case n.neg:
		return int64(-n.u), n.u <= 1<<63
	}
	return int64(n.u), n.u <= 1<<63-1
}

// scanNumber scans a number whose first byte c is consumed. With keep, the
// literal is appended to s.scratch, which must already hold c.
func (s *scanner) scanNumber(c byte, keep bool) (number, error) {
	n := number{integer: true, neg: c == '-'}
	if n.neg {
		var err error
		if c, err = s.nextByte(); err != nil {
			return n, err
		}
		s.keep(keep, c)
		if !isDigit(c) {
			return n, s.syntaxError(c, "in numeric literal")
		}
	}
	if c != '0' {
		n.u, n.overflow = s.digitRun(keep, uint64(c-'0'))
	}
	if s.peekByte() == '.' {
		n.integer = false
		s.pos++
		s.keep(keep, '.')
		if err := s.scanDigits(keep); err != nil {
			return n, err
		}
	}
	if e := s.peekByte(); e == 'e' || e == 'E' {
		n.integer = false
		s.pos++
		s.keep(keep, e)
		if sign := s.peekByte(); sign == '+' || sign == '-' {
			s.pos++
			s.keep(keep, sign)
		}
		if err := s.scanDigits(keep); err != nil {
			return n, err
		}
	}
	return n, nil
}

// scanDigits scans one or more digits: a fraction or an exponent.
func (s *scanner) scanDigits(keep bool) error {
	c, err := s.nextByte()
	if err != nil {
		return err
	}
	if !isDigit(c) {
		return s.syntaxError(c, "in numeric literal")
	}
	s.keep(keep, c)
	s.digitRun(keep, 0) // a fraction's or exponent's value is not needed
	return nil
}

// digitRun consumes the digits that follow, across buffer refills, up to
// the first other byte or the end of the body, appending them to the kept
// literal with keep. It returns u followed by those digits as a decimal
// integer, and whether that overflowed uint64 (u is then meaningless).
// Values stay in registers: this loop reads every digit of every id.
func (s *scanner) digitRun(keep bool, u uint64) (uint64, bool) {
	overflow := false
	for s.pos < s.end || s.fill() {
		d := s.buf[s.pos]
		if !isDigit(d) {
			break
		}
		s.pos++
		s.keep(keep, d)
		if v := u*10 + uint64(d-'0'); u > (1<<64-1)/10 || v < u*10 {
			overflow = true
		} else {
			u = v
		}
	}
	return u, overflow
}

// keep appends c to the literal kept in s.scratch, up to one byte past the limit.
func (s *scanner) keep(keep bool, c byte) {
	if keep && len(s.scratch) <= maxStringValue {
		s.scratch = append(s.scratch, c)
	}
}

// peekByte returns the next byte without consuming it, or 0 at the end of
// the body or on a read error (which the next read reports again).
func (s *scanner) peekByte() byte {
	if s.pos == s.end && !s.fill() {
		return 0
	}
	return s.buf[s.pos]
}
