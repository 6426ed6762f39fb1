package config

import (
	"net/url"
	"strings"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// probeSpelling turns raw into the target /probe would poll.
func probeSpelling(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := client.ParseTarget(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return u
}

func TestTargetPatternMatches(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		refuse  []string
	}{
		{
			pattern: "https://deploy.example.com",
			match:   []string{"https://deploy.example.com", "https://deploy.example.com/", "HTTPS://Deploy.Example.COM", "https://deploy.example.com:443", "https://deploy.example.com:0443/"},
			refuse: []string{
				"http://deploy.example.com", "https://deploy.example.com:8443", "https://deploy.example.com.evil.example",
				"https://evil.example/deploy.example.com", "https://deploy.example.com/deploy", "https://x.deploy.example.com",
				"https://deploy.example.co", "https://deploy.example.com.",
			},
		},
		{
			pattern: "https://*.deploy.example.com",
			match:   []string{"https://eu.deploy.example.com", "https://US.deploy.example.com/", "https://eu.deploy.example.com:443"},
			refuse: []string{
				"https://deploy.example.com", "https://a.b.deploy.example.com", "https://eu.deploy.example.com/x",
				"https://eu.deploy.example.com:8443", "https://eu.deploy.example.com.evil.example", "https://eudeploy.example.com",
			},
		},
		{
			pattern: "http://127.0.0.1:*/deploy/",
			match:   []string{"http://127.0.0.1:8080/deploy", "http://127.0.0.1/deploy", "http://127.0.0.1:1/deploy/"},
			refuse:  []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/deploy/x", "http://127.0.0.1:8080/deployx", "http://127.0.0.2:8080/deploy", "https://127.0.0.1:8080/deploy", "http://localhost:8080/deploy"},
		},
		{
			pattern: "http://localhost:08080",
			match:   []string{"http://localhost:8080", "http://LOCALHOST:8080/"},
			refuse:  []string{"http://localhost", "http://localhost:8081"},
		},
		{
			pattern: "http://[::1]:*",
			match:   []string{"http://[::1]:9000"},
			refuse:  []string{"http://[::2]:9000", "http://127.0.0.1:9000"},
		},
		{
			pattern: "https://*",
			match:   []string{"https://intranet"},
			refuse:  []string{"https://a.example", "https://intranet:444", "https://[::1]", "https://127.0.0.1"},
		},
		{
			// A lone "*" matches no address in any spelling: in brackets,
			// or as a name some resolver reads as one.
			pattern: "http://*:8080/deploy",
			match:   []string{"http://localhost:8080/deploy", "http://deploy-1:8080/deploy"},
			refuse: []string{
				"http://[::ffff:127.0.0.1]:8080/deploy", "http://[::1]:8080/deploy", "http://[::ffff:7f00:1]:8080/deploy",
				"http://2130706433:8080/deploy", "http://0x7f000001:8080/deploy", "http://0X7F000001:8080/deploy",
				"http://017700000001:8080/deploy", "http://0x:8080/deploy",
			},
		},
		{
			// Short forms (127.1) and mixed bases end in a number too.
			pattern: "http://*.1",
			refuse:  []string{"http://127.1", "http://0x7f.1", "http://127.0x1"},
		},
		{
			pattern: "http://*.*.*.*",
			match:   []string{"http://127.0.0.1"},
			refuse:  []string{"http://0177.0.0.1", "http://127.0.0.0x1", "http://[::ffff:127.0.0.1]"},
		},
		{
			// An IPv6 pattern matches its address in any spelling, and
			// only that.
			pattern: "http://[::ffff:127.0.0.1]:*",
			match:   []string{"http://[::ffff:7f00:1]:8080", "http://[0:0:0:0:0:ffff:127.0.0.1]"},
			refuse:  []string{"http://127.0.0.1:8080", "http://[::1]:8080"},
		},
		{
			// "*" stands for octets of an address, never for a name.
			pattern: "http://10.0.*.*:*",
			match:   []string{"http://10.0.3.4:8080", "http://10.0.0.255"},
			refuse:  []string{"http://10.0.attacker.example:8080", "http://10.0.0.a", "http://10.1.3.4"},
		},
		{
			pattern: "https://deploy.example.com/a%2Fb",
			match:   []string{"https://deploy.example.com/a%2fb"},
			refuse:  []string{"https://deploy.example.com/a/b"},
		},
	}
	for _, tt := range tests {
		p, err := parseTargetPattern(tt.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tt.pattern, err)
		}
		for _, raw := range tt.match {
			if !p.matches(probeSpelling(t, raw)) {
				t.Errorf("%s does not match %s", tt.pattern, raw)
			}
		}
		for _, raw := range tt.refuse {
			if p.matches(probeSpelling(t, raw)) {
				t.Errorf("%s matches %s", tt.pattern, raw)
			}
		}
	}
}

func TestTargetPatternInvalid(t *testing.T) {
	for raw, want := range map[string]string{
		"deploy.example.com":                                    "absolute",
		"ftp://deploy.example.com":                              "http or https",
		"https://":                                              "no host",
		"https://user:hunter2@deploy.example":                   "credentials",
		"https://deploy.example.com?x=1":                        "query",
		"https://deploy.example.com/a*":                         "never for part of the path",
		"https://deploy.example.com/*":                          "never for part of the path",
		"https://de*.example.com":                               "one whole host label",
		"https://**.example.com":                                "one whole host label",
		"https://a..example.com":                                "empty label",
		"https://deploy.example.com:8*":                         "whole port",
		"https://deploy.example.com:99999":                      "port",
		"http://[::*]:80":                                       "not a valid URL",
		"https://deploy.example.com#fragment":                   "fragment",
		"https://*.example.com:*/x/*/y":                         "never for part of the path",
		"https://deploy.example.com:*:*":                        "whole port",
		"https://deploy.example.com:80/a?b=*":                   "never for part of the path",
		"https://deploy.example.com/%zz":                        "not a valid URL",
		"https://deploy example.com":                            "not a valid URL",
		"http://*.127.0.0.1.nip.io:*/deploy/*":                  "never for part of the path",
		"https://deploy.example.*":                              "top-level domain",
		"https://deploy。example.com":                            "ASCII",
		"http://[fe80::1%25eth0]:*":                             "zone",
		"https://*." + strings.Repeat("a", 64) + ".example.com": "label longer than 63",
		"https://*." + strings.Repeat("a.", 125) + "com":        "longer than 253",
	} {
		_, err := parseTargetPattern(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q lacks %q", raw, err, want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error %q repeats a password", raw, err)
		}
	}
}

func TestConcreteTargets(t *testing.T) {
	cfg, err := parse(t, `
modules:
  m:
    targets: [https://b.example, "https://*.example", "http://a.example:*", "HTTPS://B.example:443/", "https://a.example/deploy/"]
    http_client_config: {authorization: {type: Token, credentials: k}}
`, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Modules["m"].ConcreteTargets()
	if want := "https://b.example https://a.example/deploy"; strings.Join(got, " ") != want {
		t.Errorf("concrete targets %q, want %q (file order, /probe's spelling, each once, no patterns)", got, want)
	}
}

// TestTargetsBindCredentials: a module with credentials goes only to its
// targets and must list some, unless it says allow_any_target; one
// without credentials may go anywhere unless it lists targets.
func TestTargetsBindCredentials(t *testing.T) {
	listed, other := "https://deploy.example.com", "http://attacker.example:8080"
	tests := []struct {
		name, module string
		loadErr      string // a fragment of the load error; "" loads
		allowed      []string
		refused      []string
	}{
		{"key and targets", "{targets: [" + listed + "], http_client_config: {authorization: {type: Token, credentials: k}}}", "", []string{listed}, []string{other}},
		{"key file and targets", "{targets: [" + listed + "], http_client_config: {authorization: {type: Token, credentials_file: key}}}", "", []string{listed}, []string{other}},
		{"key without targets", "{http_client_config: {authorization: {type: Token, credentials: k}}}", `module "m": carries credentials (http_client_config.authorization) but lists no targets: add targets`, nil, nil},
		{"key with an empty list", "{targets: [], http_client_config: {authorization: {type: Token, credentials: k}}}", "lists no targets", nil, nil},
		{"secret header without targets", "{http_client_config: {http_headers: {X-Api-Key: {secrets: [k]}}}}", "http_client_config.http_headers.X-Api-Key", nil, nil},
		{"header file without targets", "{http_client_config: {http_headers: {X-Api-Key: {files: [key]}}}}", "http_client_config.http_headers.X-Api-Key", nil, nil},
		{"client certificate without targets", "{http_client_config: {tls_config: {cert_file: c.pem, key_file: k.pem}}}", "http_client_config.tls_config (a client certificate)", nil, nil},
		{"inline client certificate without targets", "{http_client_config: {tls_config: {cert: c, key: k}}}", "http_client_config.tls_config (a client certificate)", nil, nil},
		{"proxy password without targets", "{http_client_config: {proxy_url: 'http://u:pw@proxy.example:3128'}}", "http_client_config.proxy_url (a password)", nil, nil},
		{"proxy connect header without targets", "{http_client_config: {proxy_url: 'http://proxy.example:3128', proxy_connect_header: {Proxy-Authorization: [Basic dTpwdw==]}}}", "http_client_config.proxy_connect_header", nil, nil},
		{"proxy password with targets", "{targets: [" + listed + "], http_client_config: {proxy_url: 'http://u:pw@proxy.example:3128'}}", "", []string{listed}, []string{other}},
		{"proxy password with allow_any_target", "{allow_any_target: true, http_client_config: {proxy_url: 'http://u:pw@proxy.example:3128'}}", "", []string{listed, other}, nil},
		{"proxy without a password", "{http_client_config: {proxy_url: 'http://u@proxy.example:3128'}}", "", []string{listed, other}, nil},
		{"key with allow_any_target", "{allow_any_target: true, http_client_config: {authorization: {type: Token, credentials: k}}}", "", []string{listed, other}, nil},
		{"allow_any_target beside targets", "{allow_any_target: true, targets: [" + listed + "], http_client_config: {authorization: {type: Token, credentials: k}}}", "", []string{listed, other}, nil},
		{"no credentials", "{timeout: 5s}", "", []string{listed, other}, nil},
		{"plain header", "{http_client_config: {http_headers: {X-Team: {values: [a]}}}}", "", []string{listed, other}, nil},
		{"no credentials but targets", "{targets: [" + listed + "]}", "", []string{listed}, []string{other}},
		{"a bad pattern", "{targets: [\"https://de*.example.com\"], http_client_config: {authorization: {type: Token, credentials: k}}}", `module "m": targets[0]: "*" must stand for one whole host label`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "key", "k\n")
			path := writeFile(t, dir, "config.yml", "modules:\n  m: "+tt.module+"\n")
			cfg, err := load(path)
			if tt.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.loadErr) {
					t.Fatalf("load error %v, want one with %q", err, tt.loadErr)
				}
				if got := Check(path); len(got) != 1 || !strings.Contains(got[0], tt.loadErr) || !strings.Contains(got[0], path) {
					t.Errorf("Check says %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := Check(path); got != nil {
				t.Errorf("Check of a good file says %q", got)
			}
			m := cfg.Modules["m"]
			for _, raw := range tt.allowed {
				if err := m.CheckTarget(probeSpelling(t, raw)); err != nil {
					t.Errorf("%s refused: %v", raw, err)
				}
			}
			for _, raw := range tt.refused {
				if err := m.CheckTarget(probeSpelling(t, raw)); err == nil {
					t.Errorf("%s allowed", raw)
				}
			}
		})
	}
}

// TestUnicodeDotsNeverMatch: a target host written with a Unicode full
// stop, which Go's transport dials as an ASCII dot, is refused before it
// can be matched label by label.
func TestUnicodeDotsNeverMatch(t *testing.T) {
	for _, raw := range []string{"http://10.0.0.1\u3002attacker\u3002example:8080", "https://evil\uff0ecom", "https://a%E3%80%82b.example.com"} {
		if _, err := client.ParseBaseURL(raw); err == nil || !strings.Contains(err.Error(), "ASCII") {
			t.Errorf("%s: %v, want refused as not ASCII", raw, err)
		}
	}
}
