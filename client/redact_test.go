package client

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// base64Key is a key in the style of many services: base64, with "+", "/" and "=".
const base64Key = "Qk3Lp0a+/x9mZvYmFy7T2wN8e+Hq="

// secretForms are the ways a service may echo a secret: each returns the
// echo and the part of it that is made of the secret alone.
var secretForms = map[string]func(string) (echo, secretPart string){
	"percent-encoded in next=": func(s string) (string, string) {
		e := url.QueryEscape(s)
		return "/login/?next=/api/%3Fkey%3D" + e, e
	},
	"all percent-encoded": func(s string) (string, string) {
		var b strings.Builder
		for _, c := range []byte(s) {
			fmt.Fprintf(&b, "%%%02X", c)
		}
		return b.String(), b.String()
	},
	"JSON-escaped": func(s string) (string, string) {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return `{"detail": "` + b.String() + `"}`, b.String()
	},
	"JSON solidus": func(s string) (string, string) {
		e := strings.ReplaceAll(s, "/", `\/`)
		return `"` + e + `"`, e
	},
	"full-width": func(s string) (string, string) {
		e := strings.Map(func(r rune) rune {
			if r > ' ' && r < 0x7f {
				return r - '!' + '！'
			}
			return r
		}, s)
		return e, e
	},
	"zero-width spaces": func(s string) (string, string) {
		e := strings.Join(strings.Split(s, ""), "\u200b")
		return e, e
	},
	"soft hyphens": func(s string) (string, string) {
		e := strings.Join(strings.Split(s, ""), "\u00ad")
		return e, e
	},
	"hex":       func(s string) (string, string) { return hex.EncodeToString([]byte(s)), hex.EncodeToString([]byte(s)) },
	"HEX":       func(s string) (string, string) { e := strings.ToUpper(hex.EncodeToString([]byte(s))); return e, e },
	"base64":    base64Form(base64.StdEncoding, ""),
	"base64url": base64Form(base64.RawURLEncoding, ""),
	"base64 +1": base64Form(base64.StdEncoding, "u"),
	"base64 +2": base64Form(base64.RawStdEncoding, "u:"),
	"base64url +1 and after": func(s string) (string, string) {
		return base64Form(base64.URLEncoding, "x")(s + "tail")
	},
}

// base64Form encodes what follows prefix in enc; the secret part leaves out the characters that prefix touches.
func base64Form(enc *base64.Encoding, prefix string) func(string) (string, string) {
	return func(s string) (string, string) {
		e := enc.EncodeToString([]byte(prefix + s))
		skip := (8*len(prefix) + 5) / 6
		return "Basic " + e, e[skip : skip+(8*len(s))/6-2]
	}
}

// windowShown tells whether a run of secretRun characters of part shows in text, in any case, other than in ignore.
func windowShown(text, part, ignore string) bool {
	text, part, ignore = strings.ToLower(text), strings.ToLower(part), strings.ToLower(ignore)
	rs := []rune(part)
	for i := 0; i+secretRun <= len(rs); i++ {
		if w := string(rs[i : i+secretRun]); strings.Contains(text, w) && !strings.Contains(ignore, w) {
			return true
		}
	}
	return false
}

// TestRedactorFoldsEncodings: a secret echoed in any encoding a service
// may use shows no run of 12 of its characters in that encoding.
func TestRedactorFoldsEncodings(t *testing.T) {
	s := &secrets{fixed: []string{base64Key, "s3cr3t-test-key-4f9a"}}
	for _, secret := range s.fixed {
		for name, form := range secretForms {
			echo, part := form(secret)
			in := "the service said " + echo + " then."
			got := s.clean(in)
			if windowShown(got, part, "") || !strings.Contains(got, secretMarker) {
				t.Errorf("%s of %s: %q shows it", name, secret, got)
			}
		}
	}
}

// TestShortSecretsHideAsWords: a secret under 12 characters is hidden
// where it stands as a word, never inside the service's own words.
func TestShortSecretsHideAsWords(t *testing.T) {
	s := &secrets{fixed: []string{"europe"}}
	for in, want := range map[string]string{
		"Europe-West 2":                "Europe-West 2",
		"eu_europe":                    "eu_europe",
		"europe2":                      "europe2",
		"proxy auth europe failed":     "proxy auth <secret> failed",
		"user:EUROPE@proxy":            "user:<secret>@proxy",
		"pw=%65urope.":                 "pw=<secret>.",
		`{"p": "\u0065urope"}`:         `{"p": "<secret>"}`,
		"ｅｕｒｏｐｅ, in full width":        "<secret>, in full width",
		"location Europe-West, europe": "location Europe-West, <secret>",
	} {
		if got := s.clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzRedactor embeds a secret, in one of the forms a service may echo it,
// anywhere in any text: no run of 12 of its characters in that form shows.
func FuzzRedactor(f *testing.F) {
	names := slices.Sorted(maps.Keys(secretForms))
	f.Add("before ", " after", uint8(0))
	f.Add(`\`, "%", uint8(3))
	f.Add("%4", "\u200b", uint8(7))
	f.Fuzz(func(t *testing.T, before, after string, form uint8) {
		if !utf8.ValidString(before + after) {
			return
		}
		s := &secrets{fixed: []string{base64Key}}
		echo, part := secretForms[names[int(form)%len(names)]](base64Key)
		got := s.clean(before + echo + after)
		if windowShown(got, part, before+"\x00"+after) {
			t.Errorf("%q shows the secret", got)
		}
	})
}
