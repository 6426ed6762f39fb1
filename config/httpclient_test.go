package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
)

// writeCertPair writes a self-signed certificate and its key as PEM files
// into dir, for tls_config's ca_file, cert_file and key_file.
func writeCertPair(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "exporter test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IsCA:         true,
		KeyUsage:     x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		// Needed for IsCA to count.
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, dir, "client.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, dir, "client-key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

func TestLoadHTTPClientConfigValid(t *testing.T) {
	dir := t.TempDir()
	writeCertPair(t, dir)
	writeFile(t, dir, "key", "abc\n")
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, dir string, c *commoncfg.HTTPClientConfig)
	}{
		{"empty file means the defaults", "", func(t *testing.T, _ string, c *commoncfg.HTTPClientConfig) {
			if !c.EnableHTTP2 || c.Authorization != nil || c.ProxyURL.URL != nil {
				t.Errorf("got %+v, want prometheus/common's defaults", c)
			}
		}},
		{"comments only", "# nothing yet\n", func(t *testing.T, _ string, c *commoncfg.HTTPClientConfig) {
			if !c.EnableHTTP2 {
				t.Error("the defaults were lost")
			}
		}},
		{"relative TLS files", "tls_config: {ca_file: client.pem, cert_file: client.pem, key_file: client-key.pem, server_name: api.internal}\n",
			func(t *testing.T, dir string, c *commoncfg.HTTPClientConfig) {
				if c.TLSConfig.CAFile != filepath.Join(dir, "client.pem") || c.TLSConfig.KeyFile != filepath.Join(dir, "client-key.pem") {
					t.Errorf("files not resolved against %s: %+v", dir, c.TLSConfig)
				}
			}},
		{"Token authorization with a relative key file", "authorization: {type: Token, credentials_file: key}\n",
			func(t *testing.T, dir string, c *commoncfg.HTTPClientConfig) {
				if c.Authorization == nil || c.Authorization.CredentialsFile != filepath.Join(dir, "key") {
					t.Errorf("authorization %+v", c.Authorization)
				}
			}},
		{"proxy and headers", "proxy_url: http://127.0.0.1:3128\nno_proxy: internal.example\nproxy_connect_header: {X-Tenant: [a]}\nhttp_headers: {X-Tenant: {values: [a]}}\nenable_http2: false\n",
			func(t *testing.T, _ string, c *commoncfg.HTTPClientConfig) {
				if c.ProxyURL.URL == nil || c.ProxyURL.Host != "127.0.0.1:3128" || c.EnableHTTP2 || c.HTTPHeaders == nil {
					t.Errorf("got %+v", c)
				}
			}},
		{"proxy from the environment", "proxy_from_environment: true\n", func(t *testing.T, _ string, c *commoncfg.HTTPClientConfig) {
			if !c.ProxyFromEnvironment {
				t.Error("proxy_from_environment lost")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, dir, "http.yml", tt.yaml)
			c, err := LoadHTTPClientConfig(p)
			if err != nil {
				t.Fatalf("LoadHTTPClientConfig: %v", err)
			}
			tt.check(t, dir, &c)
		})
	}
}

func TestLoadHTTPClientConfigInvalid(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "empty-key", "\n")
	// A PEM that is not a certificate.
	writeFile(t, dir, "bad.pem", "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n")
	tests := []struct {
		name string
		yaml string
		want []string // fragments of the one-line error
	}{
		{"unknown key", "authorisation: {type: Token}\n", []string{"line 1", "authorisation", "unknown key"}},
		{"module syntax", "http_client_config: {tls_config: {}}\n", []string{"http_client_config", "unknown key"}},
		{"wrong type", "enable_http2: hunter2\n", []string{"line 1", "wrong type"}},
		{"basic auth", "basic_auth: {username: u, password: hunter2}\n", []string{"Token", "basic_auth"}},
		{"oauth2", "oauth2: {client_id: c, client_secret: hunter2, token_url: 'http://127.0.0.1:1/token'}\n", []string{"Token", "oauth2"}},
		{"bearer token", "bearer_token: hunter2\n", []string{"authorization.type must be Token", "Bearer"}},
		{"bearer token file", "bearer_token_file: key\n", []string{"authorization.type must be Token"}},
		{"authorization without type", "authorization: {credentials: hunter2}\n", []string{"authorization.type must be Token", "Bearer"}},
		{"authorization of another type", "authorization: {type: Digest, credentials: hunter2}\n", []string{"authorization.type must be Token"}},
		{"Token without a key", "authorization: {type: Token}\n", []string{"authorization has no key"}},
		{"Token from a secret manager", "authorization: {type: Token, credentials_ref: vault}\n", []string{"authorization has no key"}},
		{"Token key file empty", "authorization: {type: Token, credentials_file: empty-key}\n", []string{"credentials_file", "empty"}},
		{"Token key file missing", "authorization: {type: Token, credentials_file: nope}\n", []string{"credentials_file", "nope"}},
		{"Authorization header", "http_headers: {authorization: {values: [Token hunter2]}}\n", []string{`"Authorization" is not allowed`}},
		{"Accept header", "http_headers: {accept: {values: [text/html]}}\n", []string{"http_headers: Accept is set by the exporter"}},
		{"Accept header and empty key file", "http_headers: {accept: {values: [text/html]}}\nauthorization: {type: Token, credentials_file: empty-key}\n", []string{"http_headers: Accept"}},
		{"missing CA file", "tls_config: {ca_file: nope.pem}\n", []string{"tls_config", "nope.pem"}},
		{"CA file not a certificate", "tls_config: {ca_file: bad.pem}\n", []string{"CA cert", "bad.pem"}},
		{"client cert without key", "tls_config: {cert_file: bad.pem}\n", []string{"key"}},
		{"proxy URL does not parse", "proxy_url: 'http://user:hunter2@[::1'\n", []string{"URL does not parse"}},
		{"proxy URL of another scheme", "proxy_url: 'ftp://user:hunter2@127.0.0.1'\n", []string{"proxy_url must be an http, https, socks5 or socks5h URL"}},
		{"proxy twice", "proxy_url: http://127.0.0.1:3128\nproxy_from_environment: true\n", []string{"proxy_from_environment"}},
		{"no_proxy without a proxy", "no_proxy: example.com\n", []string{"no_proxy"}},
		{"not YAML", "tls_config: [\n", []string{"line"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, dir, "http.yml", tt.yaml)
			_, err := LoadHTTPClientConfig(p)
			if err == nil {
				t.Fatal("LoadHTTPClientConfig accepted it")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "hunter2") {
				t.Errorf("error %q: want one line that quotes no secret", msg)
			}
		})
	}
	if _, err := LoadHTTPClientConfig(filepath.Join(dir, "missing.yml")); err == nil || strings.Contains(err.Error(), "missing.yml") {
		t.Errorf("missing file: %v (the caller names the file)", err)
	}
}

// TestModuleProxyURLErrorQuotesNoPassword covers the module file too:
// net/url quotes a URL that does not parse, password included.
func TestModuleProxyURLErrorQuotesNoPassword(t *testing.T) {
	_, err := parse(t, "modules:\n  m:\n    http_client_config: {proxy_url: 'http://u:hunter2@[::1', authorization: {type: Token, credentials: k}}\n", t.TempDir())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v", err)
	}
}
