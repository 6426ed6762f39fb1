package client

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// readers returns the ways a test body is served: whole, and in chunks of
// a few bytes so that chunk boundaries fall everywhere.
func readers(body string) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(body) },
		"1 byte":   func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"2 bytes":  func() io.Reader { return &chunkReader{r: strings.NewReader(body), sizes: []int{2}} },
		"3 bytes":  func() io.Reader { return &chunkReader{r: strings.NewReader(body), sizes: []int{3}} },
		"5 bytes":  func() io.Reader { return &chunkReader{r: strings.NewReader(body), sizes: []int{5}} },
		"with EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
	}
}

// chunkReader returns at most sizes[i] bytes from its ith Read, cycling.
type chunkReader struct {
	r     io.Reader
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	n := c.sizes[c.i%len(c.sizes)]
	c.i++
	return c.r.Read(p[:min(n, len(p))])
}

func TestDecodeListPage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		wantIDs int
		want    listPage
	}{
		{"empty plain list", `[]`, 5, listPage{}},
		{"plain list keeps all ids", `[{"id":1},{"id":2},{"id":3}]`, 5, listPage{Entries: 3, IDs: []int64{1, 2, 3}}},
		{"plain list keeps wantIDs ids", `[{"id":1},{"id":2},{"id":3}]`, 2, listPage{Entries: 3, IDs: []int64{1, 2}}},
		{"no ids wanted", `[{"id":1},{"id":2}]`, 0, listPage{Entries: 2}},
		{"negative wantIDs", `[{"id":1}]`, -1, listPage{Entries: 1}},
		{"int64 extremes", `[{"id":9223372036854775807},{"id":0},{"id":-0}]`, 3,
			listPage{Entries: 3, IDs: []int64{9223372036854775807, 0, 0}}},
		{"negative ids are no ids", `[{"id":-1},{"id":2},{"id":-9223372036854775808}]`, 3,
			listPage{Entries: 3, IDs: []int64{2}, NoIDs: []int{0, 2}}},
		{"envelope", `{"count":12,"next":"https://h/api/projects/projects/?page=2","previous":null,"results":[{"id":4},{"id":5}]}`, 1,
			listPage{Entries: 2, Count: 12, HasCount: true, Next: "https://h/api/projects/projects/?page=2", HasNext: true, IDs: []int64{4}}},
		{"envelope with count and next after results", `{"results":[{"id":4}],"next":"n","count":1}`, 1,
			listPage{Entries: 1, Count: 1, HasCount: true, Next: "n", HasNext: true, IDs: []int64{4}}},
		{"envelope with results only", `{"results":[]}`, 1, listPage{}},
		{"envelope with null count and next", `{"count":null,"next":null,"results":[]}`, 1, listPage{HasNext: true}},
		{"envelope with zero count", `{"count":0,"results":[]}`, 1, listPage{HasCount: true}},
		{"envelope with escaped next", `{"next":"https:\/\/h\/?a=1\u0026b=\"2\"","results":[]}`, 1,
			listPage{Next: `https://h/?a=1&b="2"`, HasNext: true}},
		{"next of escapes at the limit", `{"next":"` + strings.Repeat(`\u0041`, maxStringValue) + `","results":[]}`, 1,
			listPage{Next: strings.Repeat("A", maxStringValue), HasNext: true}},
		{"envelope skips unknown members", `{"previous":"p","extra":{"a":[1,{"b":null}]},"results":[{"id":1}],"more":[true,false]}`, 1,
			listPage{Entries: 1, IDs: []int64{1}}},
		{"escaped keys", `{"r\u0065sults":[{"\u0069\u0064":7,"\u0069":1}],"\u0063ount":3,"n\u0065xt":null}`, 1,
			listPage{Entries: 1, Count: 3, HasCount: true, HasNext: true, IDs: []int64{7}}},
		{"keys that only look like ours", `{"Results":1,"results":[{"ID":"x","id ":"y","idx":null,"id":1}],"counts":"x","next_page":1}`, 1,
			listPage{Entries: 1, IDs: []int64{1}}},
		{"id after other fields", `[{"name":"x","tags":["a"],"id":42}]`, 1, listPage{Entries: 1, IDs: []int64{42}}},
		{"nested values are skipped", `[{"a":{"b":{"c":[[[{"d":"}]"}]]]}},"id":1,"e":[{},[],"",0,-1.5e+3,true,false,null]}]`, 1,
			listPage{Entries: 1, IDs: []int64{1}}},
		{"strings with every escape", `[{"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00\ud800","id":1}]`, 1, listPage{Entries: 1, IDs: []int64{1}}},
		{"invalid UTF-8 inside strings", "[{\"s\":\"\xff\xc3\",\"id\":1}]", 1, listPage{Entries: 1, IDs: []int64{1}}},
		{"whitespace everywhere", " \t\r\n{ \"count\" : 1 ,\n\"results\" :\t[ { \"id\" : 1 , \"x\" : [ 1 , { } ] } ] } \n", 1,
			listPage{Entries: 1, Count: 1, HasCount: true, IDs: []int64{1}}},
		{"duplicate unknown keys are allowed", `{"previous":1,"previous":2,"results":[{"id":1,"x":1,"x":2}]}`, 1,
			listPage{Entries: 1, IDs: []int64{1}}},
		{"envelope with next null has a next member", `{"next":null,"results":[]}`, 1, listPage{HasNext: true}},
		{"envelope with next has a next member", `{"next":"n","results":[]}`, 1, listPage{Next: "n", HasNext: true}},
		// Entries without a usable id are counted; among the wanted ones
		// they are noted, not replaced by later entries.
		{"hyperlinked entries carry a url instead of an id", `[{"url":"https://h/api/x/1/"},{"url":"https://h/api/x/2/"},{"url":"https://h/api/x/3/"}]`, 2,
			listPage{Entries: 3, IDs: []int64{}, NoIDs: []int{0, 1}}},
		{"entries without ids are counted when no ids are wanted", `[{"url":"a"},{},{"id":"x"}]`, 0, listPage{Entries: 3}},
		{"entry without id among the wanted", `[{"id":1},{"name":"x"},{"id":3}]`, 2, listPage{Entries: 3, IDs: []int64{1}, NoIDs: []int{1}}},
		{"entries without ids past the wanted are not noted", `[{"id":1},{"name":"x"}]`, 1, listPage{Entries: 2, IDs: []int64{1}}},
		{"empty entry", `[{}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id is a string", `[{"id":"1"},{"id":2}]`, 2, listPage{Entries: 2, IDs: []int64{2}, NoIDs: []int{0}}},
		{"id is null", `[{"id":1},{"id":null}]`, 2, listPage{Entries: 2, IDs: []int64{1}, NoIDs: []int{1}}},
		{"id is an object", `[{"id":{"id":1}}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id is an array", `[{"id":[1,{"id":2}]}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id is a boolean", `[{"id":true}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id has a fraction", `[{"id":1.0}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id has an exponent", `[{"id":1e2}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id overflows int64", `[{"id":9223372036854775808}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id underflows int64", `[{"id":-9223372036854775809}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"id overflows uint64", `[{"id":123456789012345678901234567890}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"duplicate id", `[{"id":1},{"id":1,"id":2}]`, 2, listPage{Entries: 2, IDs: []int64{1}, NoIDs: []int{1}}},
		{"duplicate escaped id", `[{"id":1,"\u0069d":1}]`, 1, listPage{Entries: 1, IDs: []int64{}, NoIDs: []int{0}}},
		{"first entry without id is the one named", `[{"id":1},{},{"id":3},{"url":"u"}]`, 4, listPage{Entries: 4, IDs: []int64{1, 3}, NoIDs: []int{1, 3}}},
	} {
		for how, r := range readers(tc.body) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				got, err := decodeListPage(r(), tc.wantIDs)
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !samePage(got, tc.want) {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
			})
		}
	}
}

func TestDecodeListPageInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantErr string
		eof                 bool // the error also matches io.ErrUnexpectedEOF
	}{
		// Shape errors.
		{"string", `"x"`, "expected a JSON array or object, got string", false},
		{"number", ` 12 `, "expected a JSON array or object, got number", false},
		{"null", `null`, "expected a JSON array or object, got null", false},
		{"boolean", `true`, "expected a JSON array or object, got boolean", false},
		{"entry is not an object", `[{"id":1},[]]`, "list entry 1: expected an object, got array", false},
		{"entry is a number", `[1]`, "list entry 0: expected an object, got number", false},
		{"entry beyond the wanted ids is not an object", `[{"id":1},{"id":2},{"id":3},{"id":4},"x"]`, "list entry 4: expected an object, got string", false},
		{"syntax error in an entry beyond the wanted ids", `[{"id":1},{"id":2},{"id":3},{"id":4},{"a":}]`, "list entry 4: missing value after object name at offset 42", false},
		{"syntax error in an id", `[{"id":1.}]`, "invalid character '}'", false},
		{"syntax error in a skipped id", `[{"id":[1,]}]`, "list entry 0: invalid character ',' at start of value at offset 9", false},
		{"envelope without results", `{"count":1,"next":null}`, `envelope has no "results"`, false},
		{"empty envelope", `{}`, `envelope has no "results"`, false},
		{"results is an object", `{"results":{}}`, `"results" is not an array, got object`, false},
		{"results is null", `{"results":null}`, `"results" is not an array, got null`, false},
		{"duplicate results", `{"results":[],"results":[]}`, `envelope has "results" twice`, false},
		{"count is negative", `{"count":-1,"results":[]}`, `"count" is not a non-negative integer`, false},
		{"count is a fraction", `{"count":1.5,"results":[]}`, `"count" is not a non-negative integer`, false},
		{"count is a string", `{"count":"1","results":[]}`, `"count" is not a non-negative integer, got string`, false},
		{"count overflows", `{"count":92233720368547758070,"results":[]}`, `"count" is not a non-negative integer`, false},
		{"duplicate count", `{"count":1,"count":1,"results":[]}`, `envelope has "count" twice`, false},
		{"next is a number", `{"next":2,"results":[]}`, `"next" is not a string or null, got number`, false},
		{"next is an object", `{"next":{},"results":[]}`, `"next" is not a string or null, got object`, false},
		{"duplicate next", `{"next":null,"next":null,"results":[]}`, `envelope has "next" twice`, false},
		{"next too long", `{"next":"` + strings.Repeat("a", maxStringValue+1) + `","results":[]}`, `"next": longer than`, false},
		{"next of escapes too long", `{"next":"` + strings.Repeat(`\u0041`, maxStringValue+1) + `","results":[]}`, `"next": longer than`, false},
		{"next far too long", `{"next":"` + strings.Repeat(`\n`, 10*maxStringValue) + `","results":[]}`, `"next": longer than`, false},
		{"entry error inside envelope", `{"results":[{"id":1},true]}`, `list entry 1: expected an object, got boolean`, false},
		// Syntax errors.
		{"empty body", ``, "unexpected end of body at offset 0", true},
		{"only whitespace", " \n\t", "unexpected end of body", true},
		{"byte order mark", "\ufeff[]", "invalid character", false},
		{"bare word", `nope`, "invalid character 'o' in literal", false},
		{"garbage", `x`, "invalid character 'x' at start of value at offset 0", false},
		{"trailing garbage", `[{"id":1}] x`, "invalid character 'x' at start of value at offset 11", false},
		{"second value", `[][]`, "another value after the top-level value", false},
		{"trailing comma in list", `[{"id":1},]`, "list entry 1: invalid character ',' at start of value at offset 9", false},
		{"trailing comma in object", `[{"id":1,}]`, "invalid character ',' at start of value at offset 8", false},
		{"missing comma", `[{"id":1} {"id":2}]`, "invalid character '{' after array element (expecting ',' or ']')", false},
		{"missing colon", `[{"id" 1}]`, "invalid character '1' after object name (expecting ':')", false},
		{"unquoted key", `[{id:1}]`, "invalid character 'i' at start of value", false},
		{"single quotes", `[{'id':1}]`, "invalid character '\\''", false},
		{"leading zero", `[{"id":01}]`, "invalid character '1' after object value (expecting ',' or '}')", false},
		{"leading plus", `[{"id":+1}]`, "invalid character '+' at start of value", false},
		{"bare minus", `[{"x":-,"id":1}]`, "invalid character ',' in number (expecting digit)", false},
		{"fraction without digits", `[{"x":1.,"id":1}]`, "invalid character ','", false},
		{"exponent without digits", `[{"x":1e+,"id":1}]`, "invalid character ','", false},
		{"hex number", `[{"x":0x1,"id":1}]`, "invalid character 'x'", false},
		{"NaN", `[{"x":NaN,"id":1}]`, "invalid character 'N'", false},
		{"bad literal", `[{"x":tru,"id":1}]`, "invalid character ',' in literal", false},
		{"capitalised literal", `[{"x":True,"id":1}]`, "invalid character 'T'", false},
		{"control character in string", "[{\"x\":\"a\nb\",\"id\":1}]", `invalid character '\n' in string (expecting non-control character)`, false},
		{"control character in key", "[{\"i\td\":1}]", `invalid character '\t' in string (expecting non-control character)`, false},
		{"bad escape", `[{"x":"\x","id":1}]`, "invalid escape sequence `\\x` in string", false},
		{"short unicode escape", `[{"x":"\u12","id":1}]`, "invalid escape sequence `\\u12\"", false},
		{"bad escape in key", `[{"i\d":1}]`, "invalid escape sequence `\\d` in string", false},
		{"mismatched brackets", `[{"x":[1}],"id":1}]`, "invalid character '}' after array element", false},
		{"mismatched braces", `[{"x":{"a":1],"id":1}]`, "invalid character ']' after object value (expecting ',' or '}')", false},
		{"syntax error in skipped envelope member", `{"previous":[1,,2],"results":[]}`, "invalid character ','", false},
		{"syntax error inside a wrong-kind value", `{"results":{"a":}}`, "missing value after object name", false},
		{"invalid top-level byte", "\x00", `invalid character '\x00' at start of value`, false},
		{"invalid high byte", "[\xff]", `invalid character '\xff' at start of value`, false},
		// Truncated bodies.
		{"truncated list", `[{"id":1}`, "unexpected end of body at offset 9", true},
		{"truncated in string", `[{"id":1,"name":"abc`, "unexpected end of body", true},
		{"truncated in escape", `[{"id":1,"name":"\u00`, "unexpected end of body", true},
		{"truncated in key", `[{"i`, "unexpected end of body", true},
		{"truncated in number", `[{"id":-`, "unexpected end of body", true},
		{"truncated after number", `[{"id":12`, "unexpected end of body", true},
		{"truncated in literal", `[{"x":nu`, "unexpected end of body", true},
		{"truncated envelope", `{"results":[],"count":`, "unexpected end of body", true},
	} {
		for how, r := range readers(tc.body) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				got, err := decodeListPage(r(), 3)
				checkInvalid(t, err, tc.wantErr, tc.eof)
				if !samePage(got, listPage{}) {
					t.Errorf("got %+v alongside an error, want the zero page", got)
				}
			})
		}
	}
}

// checkInvalid checks that err reports an invalid body with a message
// containing want.
func checkInvalid(t *testing.T, err error, want string, eof bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if !errors.Is(err, errInvalidBody) {
		t.Errorf("error %q does not wrap errInvalidBody", err)
	}
	if got := errors.Is(err, io.ErrUnexpectedEOF); got != eof {
		t.Errorf("errors.Is(%q, io.ErrUnexpectedEOF) = %t, want %t", err, got, eof)
	}
}

// maxDepth is the nesting that the tokenizer and encoding/json allow, counting
// the top-level value as 1.
const maxDepth = 10000

func TestDecodeListPageDepth(t *testing.T) {
	// The list is depth 1, an entry depth 2, so a value nested k deep
	// inside an entry reaches depth 2+k.
	nested := func(k int, open, close string) string {
		return `[{"id":1,"x":` + strings.Repeat(open, k) + strings.Repeat(close, k) + `}]`
	}
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"arrays at the limit", nested(maxDepth-2, "[", "]"), true},
		{"arrays past the limit", nested(maxDepth-1, "[", "]"), false},
		{"objects at the limit", `[{"id":1,"x":` + strings.Repeat(`{"a":`, maxDepth-2) + "1" + strings.Repeat("}", maxDepth-2) + `}]`, true},
		{"objects past the limit", `[{"id":1,"x":` + strings.Repeat(`{"a":`, maxDepth-1) + "1" + strings.Repeat("}", maxDepth-1) + `}]`, false},
		{"entries past the limit", strings.Repeat("[", maxDepth+10), false},
		{"very deep envelope member", `{"previous":` + strings.Repeat("[", 100000) + `,"results":[]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeListPage(strings.NewReader(tc.body), 1)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case !tc.ok:
				checkInvalid(t, err, "exceeded max depth", false)
			}
		})
	}
}

var errBoom = errors.New("boom")

func TestDecodeListPageReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    func() io.Reader
		want error
	}{
		{"error mid-way", func() io.Reader {
			return io.MultiReader(strings.NewReader(`[{"id":1},`), iotest.ErrReader(errBoom))
		}, errBoom},
		{"error with the last data", func() io.Reader {
			return &dataThenError{data: []byte(`[{"id":1},{"id"`), err: errBoom}
		}, errBoom},
		{"error after a complete body", func() io.Reader {
			return io.MultiReader(strings.NewReader(`[{"id":1}]`), iotest.ErrReader(errBoom))
		}, errBoom},
		{"truncated by the transport", func() io.Reader {
			return io.MultiReader(strings.NewReader(`[{"id":1},`), iotest.ErrReader(io.ErrUnexpectedEOF))
		}, io.ErrUnexpectedEOF},
		{"reader that makes no progress", func() io.Reader { return noProgress{} }, io.ErrNoProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeListPage(tc.r(), 1)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v does not wrap %v", err, tc.want)
			}
			if errors.Is(err, errInvalidBody) {
				t.Errorf("read error %v wraps errInvalidBody", err)
			}
		})
	}
}

func TestDecodeListPageMaxBytesReader(t *testing.T) {
	body := `[{"id":1},{"id":2},{"id":3}]`
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(body)), int64(len(body)-3))
	_, err := decodeListPage(r, 1)
	var tooLarge *http.MaxBytesError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("error %v is not a *http.MaxBytesError", err)
	}
	if errors.Is(err, errInvalidBody) {
		t.Errorf("read error %v wraps errInvalidBody", err)
	}
}

// dataThenError returns all its data and err from the same Read.
type dataThenError struct {
	data []byte
	err  error
}

func (r *dataThenError) Read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, r.err
	}
	return n, nil
}

type noProgress struct{}

func (noProgress) Read([]byte) (int, error) { return 0, nil }

// entryStream serves a plain list of n entries of about 1 KiB each
// without holding it in memory.
type entryStream struct {
	n, sent int
	pending []byte // unsent part of buf
	buf     []byte
	entry   []byte
}

func newEntryStream(n int) *entryStream {
	entry := `{"id":7,"pad":"` + strings.Repeat("x", 1000) + `","nested":{"a":[1,2,{"b":"c"}]}}`
	return &entryStream{n: n, pending: []byte("["), entry: []byte(entry), buf: make([]byte, 0, len(entry)+2)}
}

func (s *entryStream) Read(p []byte) (int, error) {
	if len(s.pending) == 0 {
		if s.sent == s.n {
			return 0, io.EOF
		}
		s.pending = s.buf[:0]
		if s.sent > 0 {
			s.pending = append(s.pending, ',')
		}
		s.pending = append(s.pending, s.entry...)
		if s.sent++; s.sent == s.n {
			s.pending = append(s.pending, ']')
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func TestDecodeListPageLargeBodyMemory(t *testing.T) {
	const entries = 20_000 // about 21 MB
	stream := newEntryStream(entries)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	page, err := decodeListPage(stream, 5)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if page.Entries != entries || len(page.IDs) != 5 {
		t.Fatalf("got %d entries and %d ids", page.Entries, len(page.IDs))
	}
	// The stream's own buffers account for a few KiB; the decoder must stay
	// within its pooled buffer.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Errorf("decoding a 21 MB body allocated %d bytes", alloc)
	}
}

func TestDecodeErrorsAreShort(t *testing.T) {
	long := strings.Repeat("A", 10000)
	for _, body := range []string{
		`[{"id":"` + long + `\x"}]`,
		`[{"` + long + `" 1}]`,
		`[{"id":1},"` + long + `"]`,
		`{"results":[],"next":"` + long + "\x01\"}",
		long,
		`[{"id":1}]` + long,
	} {
		_, err := decodeListPage(strings.NewReader(body), 1)
		if err == nil || len(err.Error()) > 100 || strings.Contains(err.Error(), "AA") {
			t.Errorf("error %q echoes the body", err)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	fields := []string{"name", "id", "enabled", "ratio", "region", "tags", "missing", "nothing", "text"}
	for _, tc := range []struct {
		name, body string
		fields     []string
		want       map[string]string
	}{
		{"scalars", `{"name":"Berlin","id":12,"enabled":true,"ratio":-1.50e+2,"region":null,"tags":["a"],"other":"x"}`, fields,
			map[string]string{"name": "Berlin", "id": "12", "enabled": "true", "ratio": "-1.50e+2"}},
		{"false and empty string", `{"enabled":false,"name":""}`, fields, map[string]string{"enabled": "false", "name": ""}},
		{"objects and arrays are left out", `{"region":{"name":"x"},"tags":[],"nothing":{}}`, fields, map[string]string{}},
		{"escapes are decoded", `{"text":"a\"b\\c\/d\n\u00e9\ud83d\ude00\ud800x"}`, fields,
			map[string]string{"text": "a\"b\\c/d\n\u00e9\U0001F600\uFFFDx"}},
		{"broken surrogate pairs", `{"text":"\ud800\u0041 \ud800\ud83d\ude00 \udc00\ud800 \ud800\n"}`, fields,
			map[string]string{"text": "\uFFFDA \uFFFD\U0001F600 \uFFFD\uFFFD \uFFFD\n"}},
		{"escaped key", `{"n\u0061me":"x"}`, fields, map[string]string{"name": "x"}},
		{"invalid UTF-8 is replaced", "{\"name\":\"a\xffb\"}", fields, map[string]string{"name": "a\uFFFDb"}},
		{"nested fields of the same name are ignored", `{"region":{"name":"inner"},"name":"outer"}`, fields, map[string]string{"name": "outer"}},
		{"no fields only validates", `{"name":"x","a":[1,{"b":2}]}`, nil, map[string]string{}},
		{"empty object", ` { } `, fields, map[string]string{}},
		{"long unrequested key", `{"` + strings.Repeat("k", 100) + `":1,"id":3}`, fields, map[string]string{"id": "3"}},
		{"duplicate unrequested keys", `{"a":1,"a":2}`, fields, map[string]string{}},
	} {
		for how, r := range readers(tc.body) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				got, err := decodeObject(r(), tc.fields, nil)
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !equalMaps(got, tc.want) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

func TestDecodeObjectLongFields(t *testing.T) {
	a1024 := strings.Repeat("a", maxFieldValue)
	euros := strings.Repeat("€", 400) // 1,200 bytes; 1,024 falls inside the 342nd
	for _, tc := range []struct {
		name, value, want string // value is the JSON text of the field
	}{
		{"exactly the limit is kept whole", `"` + a1024 + `"`, a1024},
		{"one byte over is cut", `"` + a1024 + `b"`, a1024 + "…"},
		{"20 KiB", `"` + strings.Repeat("x", 20<<10) + `"`, strings.Repeat("x", maxFieldValue) + "…"},
		{"cut at a character boundary", `"` + euros + `"`, strings.Repeat("€", 341) + "…"},
		{"escapes count as what they stand for", `"` + strings.Repeat(`\u00e9`, 600) + `"`, strings.Repeat("é", 512) + "…"},
		{"escaped characters at the cut", `"a` + strings.Repeat(`\u00e9`, 600) + `"`, "a" + strings.Repeat("é", 511) + "…"},
		{"surrogate pairs at the cut", `"` + strings.Repeat(`\ud83d\ude00`, 300) + `"`, strings.Repeat("\U0001F600", 256) + "…"},
		{"invalid UTF-8 is replaced before the cut", `"` + strings.Repeat("\xff", 400) + `"`, strings.Repeat("\uFFFD", 341) + "…"},
		{"control characters are replaced before the cut", `"` + strings.Repeat(`\u0001`, 600) + `"`, strings.Repeat("\uFFFD", 341) + "…"},
		{"control characters among text at the cut", `"` + strings.Repeat(`a\u007f`, 600) + `"`, strings.Repeat("a\uFFFD", 256) + "…"},
		{"control characters but the line feed", `"tab\there\u0000\u007f\u0085\u009f\r\u001b[0m two\nlines"`, "tab\uFFFDhere\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD[0m two\nlines"},
		{"long number", strings.Repeat("7", 2000), strings.Repeat("7", maxFieldValue) + "…"},
		{"number longer than the scanner keeps", "-" + strings.Repeat("1", maxStringValue+10) + ".5e3", "-" + strings.Repeat("1", maxFieldValue-1) + "…"},
	} {
		body := `{"before":1,"name":` + tc.value + `,"after":[1]}`
		for how, r := range readers(body) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				got, err := decodeObject(r(), []string{"name"}, nil)
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got["name"] != tc.want {
					t.Errorf("got %d bytes %.40q…, want %d bytes %.40q…", len(got["name"]), got["name"], len(tc.want), tc.want)
				}
			})
		}
	}
}

// TestDecodeObjectCleansBeforeTheCut checks that a secret straddling the
// cut is removed whole before the value is cut, so no part of it stays.
func TestDecodeObjectCleansBeforeTheCut(t *testing.T) {
	value := strings.Repeat("a", maxFieldValue-3) + testKey + strings.Repeat("b", 100)
	redact := &secrets{fixed: []string{testKey}}
	got, err := decodeObject(strings.NewReader(`{"name":"`+value+`"}`), []string{"name"}, redact)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("a", maxFieldValue-3) + "<se…"; got["name"] != want {
		t.Errorf("got ...%q, want ...%q", got["name"][maxFieldValue-10:], want[maxFieldValue-10:])
	}
}

// runStream serves head, then unit n times, then tail, without holding
// the run in memory.
type runStream struct {
	head, unit, tail string
	n                int
	pending, chunk   string
}

func (r *runStream) Read(p []byte) (int, error) {
	for r.pending == "" {
		switch {
		case r.head != "":
			r.pending, r.head = r.head, ""
		case r.n > 0:
			if r.chunk == "" {
				r.chunk = strings.Repeat(r.unit, 1+4096/len(r.unit))
			}
			k := min(r.n, len(r.chunk)/len(r.unit))
			r.pending, r.n = r.chunk[:k*len(r.unit)], r.n-k
		case r.tail != "":
			r.pending, r.tail = r.tail, ""
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// allocated returns the bytes allocated by f.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecodeObjectLongFieldMemory(t *testing.T) {
	var got map[string]string
	var err error
	alloc := allocated(func() {
		got, err = decodeObject(&runStream{head: `{"name":"`, unit: "x", n: 10 << 20, tail: `","id":1}`}, []string{"name", "id"}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["name"] != strings.Repeat("x", maxFieldValue)+"…" || got["id"] != "1" {
		t.Fatalf("got %d bytes of name, id %q", len(got["name"]), got["id"])
	}
	// The tokenizer is handed maxRun bytes of the string at most: nothing
	// near the size of the field.
	if alloc > 256<<10 {
		t.Errorf("decoding a 10 MiB field allocated %d bytes", alloc)
	}
}

// TestDecodeLongRunsMemory: a run of string characters, digits or
// whitespace far longer than maxRun costs a small buffer, whatever the
// characters, and the answer is the same as for a short run.
func TestDecodeLongRunsMemory(t *testing.T) {
	const n = 4 << 20
	for _, tc := range []struct {
		name, head, unit, tail string
		want                   string // the field "x", when there is one
	}{
		{"whitespace between entries", `[`, " ", `{"id":1}]`, ""},
		{"whitespace before a value", `[{"id":`, "\r\n\t ", `1}]`, ""},
		{"digits", `[{"x":1`, "0", `,"id":1}]`, "1" + strings.Repeat("0", maxFieldValue-1) + "…"},
		{"fraction digits", `[{"x":1.`, "5", `e3,"id":1}]`, "1." + strings.Repeat("5", maxFieldValue-2) + "…"},
		{"string", `[{"x":"`, "é", `","id":1}]`, strings.Repeat("é", maxFieldValue/2) + "…"},
		{"escapes", `[{"x":"`, `\n`, `","id":1}]`, strings.Repeat("\n", maxFieldValue) + "…"},
		{"unicode escapes", `[{"x":"`, `\ud83d\ude00`, `","id":1}]`, strings.Repeat("\U0001F600", maxFieldValue/4) + "…"},
		{"name", `[{"`, "k", `":1,"id":1}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var page listPage
			var err error
			alloc := allocated(func() {
				page, err = decodeListPage(&runStream{head: tc.head, unit: tc.unit, n: n / len(tc.unit), tail: tc.tail}, 1)
			})
			if err != nil || page.Entries != 1 || len(page.IDs) != 1 || page.IDs[0] != 1 {
				t.Fatalf("got %+v, %v", page, err)
			}
			// Six bytes of escapes make one character: the tokenizer's
			// buffer grows to hold 6 × maxRun bytes at most.
			if alloc > 1<<20 {
				t.Errorf("decoding a run of %d bytes allocated %d bytes", n, alloc)
			}
			if tc.want == "" {
				return
			}
			body := `{"x":` + strings.TrimPrefix(tc.head, `[{"x":`) + strings.Repeat(tc.unit, n/len(tc.unit)) + strings.TrimSuffix(tc.tail, `,"id":1}]`) + "}"
			got, err := decodeObject(strings.NewReader(body), []string{"x"}, nil)
			if err != nil || got["x"] != tc.want {
				t.Errorf("field x: got %d bytes %.40q…, %v; want %.40q…", len(got["x"]), got["x"], err, tc.want)
			}
		})
	}
}

func TestDecodeObjectInvalid(t *testing.T) {
	fields := []string{"name", "id"}
	for _, tc := range []struct {
		name, body, wantErr string
		eof                 bool
	}{
		{"array", `[]`, "expected a JSON object, got array", false},
		{"string", `"x"`, "expected a JSON object, got string", false},
		{"empty", ``, "unexpected end of body", true},
		{"truncated", `{"name":"x"`, "unexpected end of body", true},
		{"trailing garbage", `{} {}`, "another value after the top-level value", false},
		{"duplicate field", `{"name":"a","name":"b"}`, `field "name" appears twice`, false},
		{"duplicate field via escape", `{"id":null,"\u0069d":1}`, `field "id" appears twice`, false},
		{"syntax error in a field", `{"id":1.}`, `field "id": invalid character '}'`, false},
		{"syntax error elsewhere", `{"x":[1 2]}`, "invalid character '2' after array element", false},
		{"syntax error in a long field", `{"name":"` + strings.Repeat("a", maxStringValue+1) + `\x"}`, "invalid escape sequence", false},
		{"control character in a long field", `{"name":"` + strings.Repeat("a", 2*maxRun) + "\x01\"}", `field "name": invalid character '\x01' in string`, false},
		{"short unicode escape in a long field", `{"name":"` + strings.Repeat("a", 2*maxRun) + `\u12"}`, "invalid escape sequence", false},
		{"truncated long field", `{"name":"` + strings.Repeat("a", maxStringValue+1), "unexpected end of body", true},
		{"too deep", `{"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, "exceeded max depth", false},
	} {
		for how, r := range readers(tc.body) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				got, err := decodeObject(r(), fields, nil)
				checkInvalid(t, err, tc.wantErr, tc.eof)
				if got != nil {
					t.Errorf("got %q alongside an error", got)
				}
			})
		}
	}
}

func TestDecodeObjectReadError(t *testing.T) {
	_, err := decodeObject(io.MultiReader(strings.NewReader(`{"name":"x`), iotest.ErrReader(errBoom)), []string{"name"}, nil)
	if !errors.Is(err, errBoom) || errors.Is(err, errInvalidBody) {
		t.Fatalf("got %v, want a read error wrapping %v", err, errBoom)
	}
}

func TestDecodeKeepsBufferBound(t *testing.T) {
	// A body larger than the buffer, with strings, keys and numbers
	// crossing chunk boundaries at every offset.
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"` + strings.Repeat("k", i%37) + `":"` + strings.Repeat("v\\n", i%23) + `","id":` + strings.Repeat("0", 0) + "12345" + `}`)
	}
	b.WriteString(`],"count":3000,"next":"` + strings.Repeat("\\u00e9", 100) + `"}`)
	page, err := decodeListPage(&b, 3000)
	if err != nil {
		t.Fatal(err)
	}
	if page.Entries != 3000 || len(page.IDs) != 3000 || page.IDs[2999] != 12345 || page.Count != 3000 || page.Next != strings.Repeat("é", 100) {
		t.Fatalf("got entries=%d ids=%d count=%d next=%q", page.Entries, len(page.IDs), page.Count, page.Next)
	}
}
