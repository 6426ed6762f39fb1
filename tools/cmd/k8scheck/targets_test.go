package main

import "testing"

func TestTargetPatterns(t *testing.T) {
	tests := []struct {
		pattern       string
		concrete      bool
		match, refuse []string
	}{
		{pattern: "https://deploy.example.com", concrete: true,
			match:  []string{"https://deploy.example.com", "HTTPS://Deploy.Example.com:443/", "https://deploy.example.com//"},
			refuse: []string{"http://deploy.example.com", "https://deploy.example.com:8443", "https://deploy.example.com/deploy", "https://a.deploy.example.com"}},
		{pattern: "https://*.deploy.example.com",
			match:  []string{"https://eu.deploy.example.com", "https://EU.deploy.example.com/"},
			refuse: []string{"https://deploy.example.com", "https://a.b.deploy.example.com", "https://eu.deploy.example.com/x"}},
		{pattern: "http://127.0.0.1:*/deploy/",
			match:  []string{"http://127.0.0.1:8080/deploy", "http://127.0.0.1/deploy", "http://127.0.0.1:1/deploy/"},
			refuse: []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/deploy/x", "http://127.0.0.1:8080/deployx", "http://127.0.0.2:8080/deploy", "https://127.0.0.1:8080/deploy"}},
		{pattern: "http://[::1]:8080", concrete: true,
			match:  []string{"http://[::1]:8080/"},
			refuse: []string{"http://[::2]:8080"}},
	}
	for _, tt := range tests {
		p, err := parseTarget(tt.pattern)
		if err != nil {
			t.Errorf("parseTarget(%q): %v", tt.pattern, err)
			continue
		}
		if p.concrete() != tt.concrete {
			t.Errorf("%q: concrete %v, want %v", tt.pattern, p.concrete(), tt.concrete)
		}
		for _, raw := range tt.match {
			if target, err := parseTarget(raw); err != nil || !p.matches(target) {
				t.Errorf("%q does not match %q (%v)", tt.pattern, raw, err)
			}
		}
		for _, raw := range tt.refuse {
			if target, err := parseTarget(raw); err == nil && p.matches(target) {
				t.Errorf("%q matches %q", tt.pattern, raw)
			}
		}
	}
	if p, _ := parseTarget("HTTPS://Deploy.Example.com:443/a/"); p.String() != "https://deploy.example.com/a" {
		t.Errorf("spelling %q, want https://deploy.example.com/a", p.String())
	}
	for _, bad := range []string{"deploy.example.com", "ftp://a", "https://u:p@a", "https://a/*", "https://a-*.b", "https://a:8x", "https://a..b", "https://a/?q"} {
		if _, err := parseTarget(bad); err == nil {
			t.Errorf("parseTarget(%q) accepted it", bad)
		}
	}
}
