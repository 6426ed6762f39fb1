package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// fuzzSeeds are bodies of every shape, valid and not, for both fuzz targets.
var fuzzSeeds = []string{
	`[]`,
	`{}`,
	`[{"id":1},{"id":2}]`,
	` [ { "id" : 1 , "name" : "a" } ] `,
	`{"count":2,"next":null,"previous":null,"results":[{"id":1},{"id":2}]}`,
	`{"results":[{"id":3,"tags":["a","b"],"meta":{"x":[1,2,{"y":null}]}}],"count":1,"next":"https://h/api/?page=2"}`,
	`{"results":[{"\u0069d":7}],"c\u006funt":0}`,
	`[{"id":-9223372036854775808},{"id":9223372036854775807}]`,
	`[{"id":9223372036854775808}]`,
	`[{"id":1.0}]`,
	`[{"id":1e3}]`,
	`[{"id":"1"}]`,
	`[{"id":1,"id":2}]`,
	`[{"ID":1}]`,
	`[{}]`,
	`[1]`,
	`{"count":-1,"results":[]}`,
	`{"count":null,"results":[]}`,
	`{"next":1,"results":[]}`,
	`{"results":[],"results":[]}`,
	`{"results":null}`,
	`"str"`,
	`null`,
	`[{"id":1}] x`,
	`[{"id":1}`,
	`[{"id":1,}]`,
	`[{"id":01}]`,
	`[{"id":1,"s":"\ud83d\ude00 \ud800 \udc00 \u00e9 \"\\\/\b\f\n\r\t"}]`,
	"[{\"id\":1,\"s\":\"\xff\xfe\"}]",
	"[{\"id\":1,\"s\":\"a\tb\"}]",
	`[{"id":1,"x":[[[[[[[[[[]]]]]]]]]]}]`,
	`[{"id":1,"n":-0.5e+10,"m":0,"t":true,"f":false,"z":null}]`,
	`{"name":"loc","id":5,"enabled":true,"region":{"a":1},"x":null}`,
	`{"name":"a","name":"b"}`,
	"\ufeff[]",
	`[{"url":"https://h/api/x/1/"},{"url":"https://h/api/x/2/","id":null}]`,
	`[{"id":[1]},{"id":{"id":2}},{"id":"3"},{"id":4,"id":4}]`,
	`{"name":"` + strings.Repeat("\u00e9", 520) + `","n":` + strings.Repeat("9", 1030) + `}`,
	`{"s":"` + strings.Repeat("€", 350) + `","name":"` + strings.Repeat("x", 1025) + `"}`,
}

func FuzzDecodeListPage(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint8(i%4))
	}
	f.Fuzz(func(t *testing.T, data []byte, want uint8) {
		wantIDs := int(want % 8)
		page, err := decodeListPage(bytes.NewReader(data), wantIDs)
		checkAgainstValid(t, data, err)

		if json.Valid(data) {
			ref, refErr := referenceListPage(data, wantIDs)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("decodeListPage error %v, encoding/json reference error %v", err, refErr)
			}
			if err == nil && !samePage(page, ref) {
				t.Fatalf("decodeListPage = %+v, encoding/json reference = %+v", page, ref)
			}
		}

		for name, r := range chunkedReaders(data) {
			p2, err2 := decodeListPage(r, wantIDs)
			if !sameError(err, err2) || !samePage(page, p2) {
				t.Fatalf("%s: got %+v, %v; want %+v, %v", name, p2, err2, page, err)
			}
		}
	})
}

func FuzzDecodeObject(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	fields := []string{"name", "id", "enabled", "region", "x", "s", "n"}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeObject(bytes.NewReader(data), fields, nil)
		checkAgainstValid(t, data, err)

		if json.Valid(data) {
			ref, refErr := referenceObject(data, fields)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("decodeObject error %v, encoding/json reference error %v", err, refErr)
			}
			if err == nil && !equalMaps(got, ref) {
				t.Fatalf("decodeObject = %q, encoding/json reference = %q", got, ref)
			}
		}

		for name, r := range chunkedReaders(data) {
			got2, err2 := decodeObject(r, fields, nil)
			if !sameError(err, err2) || !equalMaps(got, got2) {
				t.Fatalf("%s: got %q, %v; want %q, %v", name, got2, err2, got, err)
			}
		}
	})
}

// FuzzDecodeLongRuns inserts a run of more than maxRun characters into a
// body. The tokenizer is then handed a body with the run cut, and the answer
// must still be the one encoding/json gives for the whole body.
func FuzzDecodeLongRuns(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(i*5), uint8(i))
	}
	units := []string{" ", "\n", "7", "x", "é", `\n`, `\u00e9`, `\ud83d\ude00`, "\xff", `\u12`, "\x01"}
	fields := []string{"name", "id", "s", "n", "x"}
	f.Fuzz(func(t *testing.T, data []byte, at uint16, unit uint8) {
		pos := int(at) % (len(data) + 1)
		body := slices.Concat(data[:pos], bytes.Repeat([]byte(units[int(unit)%len(units)]), maxRun+10), data[pos:])
		valid := json.Valid(body)

		page, err := decodeListPage(bytes.NewReader(body), 4)
		checkAgainstValid(t, body, err)
		if valid {
			ref, refErr := referenceListPage(body, 4)
			if (err == nil) != (refErr == nil) || err == nil && !samePage(page, ref) {
				t.Fatalf("decodeListPage = %+v, %v; encoding/json reference = %+v, %v", page, err, ref, refErr)
			}
		}

		got, err := decodeObject(bytes.NewReader(body), fields, nil)
		checkAgainstValid(t, body, err)
		if valid {
			ref, refErr := referenceObject(body, fields)
			if (err == nil) != (refErr == nil) || err == nil && !equalMaps(got, ref) {
				t.Fatalf("decodeObject = %.80q, %v; encoding/json reference = %.80q, %v", got, err, ref, refErr)
			}
		}
	})
}

// checkAgainstValid checks err against json.Valid: invalid JSON must fail
// as an invalid body, and valid JSON must never fail as a syntax error.
func checkAgainstValid(t *testing.T, data []byte, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, errInvalidBody) {
		t.Fatalf("error %v from an in-memory body does not wrap errInvalidBody", err)
	}
	if err != nil && len(err.Error()) > 200 {
		t.Fatalf("error message of %d bytes", len(err.Error()))
	}
	var se *jsontext.SyntacticError
	isSyntax := errors.As(err, &se)
	switch valid := json.Valid(data); {
	case !valid && err == nil:
		t.Fatalf("accepted a body that json.Valid rejects")
	case valid && isSyntax:
		t.Fatalf("syntax error %v on a body that json.Valid accepts", err)
	case !valid && !isSyntax && errors.Is(err, io.ErrUnexpectedEOF):
		t.Fatalf("truncation error %v is not a syntax error", err)
	}
}

// chunkedReaders serve data in unusual chunks, which must not change the outcome.
func chunkedReaders(data []byte) map[string]io.Reader {
	return map[string]io.Reader{
		"one byte at a time": iotest.OneByteReader(bytes.NewReader(data)),
		"data with EOF":      iotest.DataErrReader(bytes.NewReader(data)),
		"half reads":         iotest.HalfReader(bytes.NewReader(data)),
		"chunks of 2 to 7":   &chunkReader{r: bytes.NewReader(data), sizes: []int{2, 3, 5, 7, 4, 6}},
	}
}

// sameError tells whether two errors report the same: the same message, or
// syntax errors at the same offset (the tokenizer quotes the bad character
// from what it holds, which may be part of a UTF-8 sequence).
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	var sa, sb *jsontext.SyntacticError
	if errors.As(a, &sa) && errors.As(b, &sb) {
		return sa.ByteOffset == sb.ByteOffset && errors.Is(a, io.ErrUnexpectedEOF) == errors.Is(b, io.ErrUnexpectedEOF)
	}
	return a.Error() == b.Error()
}

func samePage(a, b listPage) bool {
	return a.Entries == b.Entries && a.Count == b.Count && a.HasCount == b.HasCount &&
		a.Next == b.Next && a.HasNext == b.HasNext && slices.Equal(a.IDs, b.IDs) &&
		slices.Equal(a.NoIDs, b.NoIDs)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// member is one key and raw value of an object, as encoding/json reads them.
type member struct {
	key   string
	value json.RawMessage
}

// referenceMembers lists the members of a JSON object with encoding/json,
// keeping duplicates and order.
func referenceMembers(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: tok.(string), value: bytes.TrimSpace(v)})
	}
	return ms, nil
}

// lookup returns the value of the only member named key.
func lookup(ms []member, key string) (json.RawMessage, bool, error) {
	var v json.RawMessage
	found := false
	for _, m := range ms {
		if m.key == key {
			if found {
				return nil, false, errors.New("duplicate " + key)
			}
			v, found = m.value, true
		}
	}
	return v, found, nil
}

// referenceInt parses a JSON number that is an integer fitting int64.
func referenceInt(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) || bytes.ContainsAny(raw, ".eE") {
		return 0, errors.New("not an integer")
	}
	return strconv.ParseInt(string(raw), 10, 64)
}

// referenceListPage applies the shape rules of decodeListPage to a valid
// JSON body with encoding/json.
func referenceListPage(data []byte, wantIDs int) (listPage, error) {
	data = bytes.TrimSpace(data)
	var page listPage
	results := json.RawMessage(data)
	if data[0] == '{' {
		ms, err := referenceMembers(data)
		if err != nil {
			return page, err
		}
		r, ok, err := lookup(ms, "results")
		if err != nil || !ok || r[0] != '[' {
			return page, errors.New("bad results")
		}
		results = r
		if c, ok, err := lookup(ms, "count"); err != nil {
			return page, err
		} else if ok && string(c) != "null" {
			if page.Count, err = referenceInt(c); err != nil || page.Count < 0 {
				return page, errors.New("bad count")
			}
			page.HasCount = true
		}
		if n, ok, err := lookup(ms, "next"); err != nil {
			return page, err
		} else if ok {
			page.HasNext = true
			if string(n) != "null" && (n[0] != '"' || json.Unmarshal(n, &page.Next) != nil || len(page.Next) > maxStringValue) {
				return page, errors.New("bad next")
			}
		}
	} else if data[0] != '[' {
		return page, errors.New("not a list")
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(results, &entries); err != nil {
		return page, err
	}
	if wantIDs > 0 && len(entries) > 0 {
		page.IDs = []int64{}
	}
	for _, e := range entries {
		ms, err := referenceMembers(e)
		if err != nil {
			return page, err
		}
		if page.Entries < wantIDs {
			// An entry has a usable id when "id" appears once, as an
			// integer of 0 or more that fits int64.
			raw, ok, err := lookup(ms, "id")
			id, idErr := referenceInt(raw)
			if err == nil && ok && idErr == nil && id >= 0 {
				page.IDs = append(page.IDs, id)
			} else {
				page.NoIDs = append(page.NoIDs, page.Entries)
			}
		}
		page.Entries++
	}
	return page, nil
}

// referenceCut applies the length rule of decodeObject: a value over
// maxFieldValue bytes keeps its longest prefix of whole characters that
// fits, followed by an ellipsis.
func referenceCut(s string) string {
	if len(s) <= maxFieldValue {
		return s
	}
	prefix := ""
	for _, r := range s {
		if len(prefix)+utf8.RuneLen(r) > maxFieldValue {
			break
		}
		prefix += string(r)
	}
	return prefix + "…"
}

// referenceObject applies the rules of decodeObject to a valid JSON body
// with encoding/json.
func referenceObject(data []byte, fields []string) (map[string]string, error) {
	ms, err := referenceMembers(bytes.TrimSpace(data))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range fields {
		v, ok, err := lookup(ms, f)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		switch c := v[0]; {
		case c == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			out[f] = referenceCut(strings.Map(func(r rune) rune { // control characters but the line feed are U+FFFD
				if unicode.IsControl(r) && r != '\n' {
					return utf8.RuneError
				}
				return r
			}, s))
		case c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f':
			out[f] = referenceCut(string(v))
		}
	}
	return out, nil
}
