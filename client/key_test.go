package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/common/config"
)

// specialFiles makes, in dir, a file of each kind that is no key file,
// and returns their paths by what each should be refused as.
func specialFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("k", maxKeyFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"a FIFO, not a regular file":      fifo,
		"a device, not a regular file":    "/dev/zero",
		"a directory, not a regular file": dir,
		"larger than 64 KiB":              big,
	}
}

// TestReadKeyFileRefusesSpecialFiles: a device, a FIFO, a directory or a
// file over 64 KiB is refused at once, with one line naming it, without
// waiting on the FIFO or reading the device.
func TestReadKeyFileRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	for want, path := range specialFiles(t, dir) {
		_, err := ReadKeyFile(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming the file and saying %q", path, err, want)
		}
	}
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte(strings.Repeat("k", maxKeyFileBytes-1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(ok); err != nil {
		t.Errorf("a key of 64 KiB: %v", err)
	}
}

// TestCheckFilesNamesTheSetting: every file an HTTP client configuration
// names is held to the same rule, and the error names the setting and
// the file.
func TestCheckFilesNamesTheSetting(t *testing.T) {
	dir := t.TempDir()
	fifo := specialFiles(t, dir)["a FIFO, not a regular file"]
	for key, cfg := range map[string]config.HTTPClientConfig{
		"authorization.credentials_file": {Authorization: &config.Authorization{Type: "Token", CredentialsFile: fifo}},
		"http_headers.X-Api-Key.files": {HTTPHeaders: &config.Headers{Headers: map[string]config.Header{
			"X-Api-Key": {Files: []string{fifo}},
		}}},
		"tls_config.ca_file":   {TLSConfig: config.TLSConfig{CAFile: fifo}},
		"tls_config.cert_file": {TLSConfig: config.TLSConfig{CertFile: fifo, KeyFile: fifo}},
		"tls_config.key_file":  {TLSConfig: config.TLSConfig{Cert: "c", KeyFile: fifo}},
	} {
		err := CheckFiles(&cfg)
		if want := key + ": cannot read " + fifo + ": it is a FIFO"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", key, err, want)
		}
		if _, err := NewTransport(cfg, ""); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("NewTransport with %s: %v", key, err)
		}
	}
}

// TestHeaderFileReplacedSendsNothing: a header file that became a FIFO
// after the start stops the request before it is read or sent, saying
// which file, and counts no failure reason.
func TestHeaderFileReplacedSendsNothing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "header")
	if err := os.WriteFile(file, []byte("header-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFakeAPI(t, "")
	f.json("/api/", `{}`)
	obs := &recordingObserver{}
	c := f.client(t, func(cfg *Config) {
		cfg.HTTPClientConfig.HTTPHeaders = &config.Headers{Headers: map[string]config.Header{"X-Api-Key": {Files: []string{file}}}}
		cfg.Observer = obs
	})
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.Root(context.Background())
	if !errors.Is(r.Err, ErrKeyUnavailable) || ReasonOf(r.Err) != "" || !strings.Contains(r.Err.Error(), "cannot read the header file "+file+": it is a FIFO") {
		t.Errorf("%v, want a refusal naming the header file, without a reason", r.Err)
	}
	if n := f.hitCount("/api/"); n != 0 || obs.requests != 0 || len(obs.errors) != 0 {
		t.Errorf("%d requests sent, %d counted, errors %v", n, obs.requests, obs.errors)
	}
}
