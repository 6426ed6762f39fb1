package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func goodFlags() flagValues {
	return flagValues{
		apiURL:           "https://deploy.example.com/prefix",
		key:              "k",
		timeout:          defaultTimeout,
		concurrency:      4,
		maxPages:         1000,
		maxResponseBytes: 64 << 20,
		gzip:             true,
		metricsPath:      "/metrics",
	}
}

func TestGzipFlag(t *testing.T) {
	for _, gzip := range []bool{true, false} {
		f := goodFlags()
		f.gzip = gzip
		s, err := validate(f)
		if err != nil {
			t.Fatal(err)
		}
		if s.target.Client.DisableGzip == gzip {
			t.Errorf("--api.gzip=%t gave DisableGzip %t", gzip, s.target.Client.DisableGzip)
		}
	}
}

func TestValidateRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	emptyKey := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyKey, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(*flagValues)
		want   string // a fragment of the one-line error
	}{
		{"no URL", func(f *flagValues) { f.apiURL = "" }, "--api.url"},
		{"relative URL", func(f *flagValues) { f.apiURL = "deploy.example.com" }, "--api.url"},
		{"wrong scheme", func(f *flagValues) { f.apiURL = "ftp://deploy.example.com" }, "--api.url"},
		{"credentials in URL", func(f *flagValues) { f.apiURL = "https://user:hunter2@deploy.example.com" }, "--api.url"},
		{"unparsable URL", func(f *flagValues) { f.apiURL = "http://[::1" }, "--api.url"},
		{"no key", func(f *flagValues) { f.key = "" }, "DEPLOYMENT_SERVICE_API_KEY"},
		{"both key sources", func(f *flagValues) { f.keyFile = emptyKey }, "use one"},
		{"unreadable key file", func(f *flagValues) { f.key, f.keyFile = "", filepath.Join(dir, "missing") }, "--api.key-file"},
		{"empty key file", func(f *flagValues) { f.key, f.keyFile = "", emptyKey }, "empty"},
		{"zero timeout", func(f *flagValues) { f.timeout = 0 }, "--api.timeout"},
		{"zero concurrency", func(f *flagValues) { f.concurrency = 0 }, "--api.concurrency"},
		{"zero pages", func(f *flagValues) { f.maxPages = 0 }, "--api.max-pages"},
		{"zero body size", func(f *flagValues) { f.maxResponseBytes = 0 }, "--api.max-response-bytes"},
		{"negative limit", func(f *flagValues) { f.detailLimit = -1 }, "--locations.detail-limit"},
		{"negative rate", func(f *flagValues) { f.rateLimit = -1 }, "--api.rate-limit"},
		{"negative interval", func(f *flagValues) { f.minInterval = -time.Second }, "--api.min-interval"},
		{"ids and limit", func(f *flagValues) { f.detailIDs, f.detailLimit = []int64{1}, 3 }, "conflict"},
		{"negative id", func(f *flagValues) { f.detailIDs = []int64{-4} }, "--locations.detail-id"},
		{"demo and URL", func(f *flagValues) { f.demo = true }, "--demo"},
		{"info field not a label name", func(f *flagValues) { f.infoFields = []string{"last-deploy"} }, "not a valid label name"},
		{"info field starting with a digit", func(f *flagValues) { f.infoFields = []string{"1st"} }, "not a valid label name"},
		{"info field reserved", func(f *flagValues) { f.infoFields = []string{"__name__"} }, "reserved"},
		{"info field location_id", func(f *flagValues) { f.infoFields = []string{"location_id"} }, "clashes"},
		{"info field job", func(f *flagValues) { f.infoFields = []string{"job"} }, "clashes"},
		{"info field instance", func(f *flagValues) { f.infoFields = []string{"instance"} }, "clashes"},
		{"info field twice", func(f *flagValues) { f.infoFields = []string{"name", "name"} }, "twice"},
		{"NaN rate", func(f *flagValues) { f.rateLimit = math.NaN() }, "--api.rate-limit"},
		{"URL with an impossible port", func(f *flagValues) { f.apiURL = "http://127.0.0.1:99999" }, "port"},
		{"URL with port 0", func(f *flagValues) { f.apiURL = "http://127.0.0.1:0" }, "port"},
		{"key with a line break", func(f *flagValues) { f.key = "abc\ndef" }, "control"},
		{"telemetry path without slash", func(f *flagValues) { f.metricsPath = "metrics" }, "--web.telemetry-path"},
		{"empty telemetry path", func(f *flagValues) { f.metricsPath = "" }, "--web.telemetry-path"},
		{"telemetry path taken by /probe", func(f *flagValues) { f.metricsPath = "/probe" }, "taken"},
		{"telemetry path taken by health", func(f *flagValues) { f.metricsPath = "/-/healthy" }, "taken"},
		{"telemetry path with a pattern", func(f *flagValues) { f.metricsPath = "/metrics{x}" }, "plain, clean path"},
		{"telemetry path not clean", func(f *flagValues) { f.metricsPath = "/x/../metrics" }, "plain, clean path"},
		{"telemetry path with a double slash", func(f *flagValues) { f.metricsPath = "//metrics" }, "plain, clean path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			tt.modify(&f)
			_, err := validate(f)
			if err == nil {
				t.Fatal("validate accepted it")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line mentioning %q", msg, tt.want)
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q repeats the URL's password", msg)
			}
		})
	}
}

func TestValidateAcceptsGoodFlags(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(*flagValues)
	}{
		{"key from the environment", func(*flagValues) {}},
		{"key from a file", func(f *flagValues) { f.key, f.keyFile = "", keyFile }},
		{"demo needs no URL or key", func(f *flagValues) { f.apiURL, f.key, f.demo = "", "", true }},
		{"config file alone", func(f *flagValues) { f.apiURL, f.key, f.configFile = "", "", "modules.yml" }},
		{"ids and info fields", func(f *flagValues) { f.detailIDs, f.infoFields = []int64{3, 5, 3}, []string{"name", "region"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFlags()
			tt.modify(&f)
			s, err := validate(f)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if s == nil {
				t.Fatal("no settings")
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "64MiB": 64 << 20, "1KiB": 1024, "10MB": 10_000_000} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	var b byteSize
	if err := b.Set("lots"); err == nil {
		t.Error("Set accepted \"lots\"")
	}
}

func TestIneffectiveFlagsAreNamed(t *testing.T) {
	f := goodFlags()
	if w := ineffectiveFlags(f); len(w) != 0 {
		t.Errorf("warnings for a sound configuration: %v", w)
	}
	f.demo, f.apiURL = true, ""
	if w := ineffectiveFlags(f); len(w) != 1 || !strings.Contains(w[0], "--demo") {
		t.Errorf("demo with a key: %v", w)
	}
	f = goodFlags()
	f.apiURL, f.configFile, f.detailIDs, f.rateLimit, f.concurrency = "", "modules.yml", []int64{4}, 3, 1
	w := ineffectiveFlags(f)
	if len(w) != 1 || !strings.Contains(w[0], "--locations.detail-id") || !strings.Contains(w[0], "--api.rate-limit") ||
		!strings.Contains(w[0], "--api.key-file") || !strings.Contains(w[0], "--api.concurrency") || strings.Contains(w[0], "--api.timeout") {
		t.Errorf("probe-only mode with single-target flags: %v", w)
	}
}
