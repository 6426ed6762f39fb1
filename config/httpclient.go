package config

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	commoncfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v2"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// LoadHTTPClientConfig reads a file that holds one http_client_config
// block at its top level, as --api.http-config.file does: TLS, proxy and
// header settings of prometheus/common for the service behind /metrics.
//
// It is read strictly (an unknown key is an error) and relative file names
// in it are taken relative to the file's directory. An authorization in it
// is held to the rules of a module's (type Token, with a key); unlike a
// module's it may be left out, for the key to come from elsewhere. Other
// schemes are refused. Its files are read once here (each must be a
// regular file, see client.CheckFiles), so that a wrong path fails the
// start rather than every poll. Errors do
// not name the file (the caller does) and never quote a value from it.
func LoadHTTPClientConfig(path string) (*commoncfg.HTTPClientConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, err
	}
	// An empty file unmarshals to nothing: it means the defaults.
	c := commoncfg.DefaultHTTPClientConfig
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, explainYAML(err)
	}
	if u := c.ProxyURL.URL; u != nil && u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5" {
		return nil, errors.New("proxy_url must be an http, https or socks5 URL, such as http://proxy.example.com:3128")
	}
	if c.Authorization != nil || c.BasicAuth != nil || c.OAuth2 != nil || c.BearerToken != "" || c.BearerTokenFile != "" {
		if err := validateAuth(&c, ""); err != nil {
			return nil, err
		}
	}
	if err := validateHeaders(&c, ""); err != nil {
		return nil, err
	}
	c.SetDirectory(filepath.Dir(path))
	if err := checkCredentialsFile(c.Authorization, ""); err != nil {
		return nil, err
	}
	if err := client.CheckFiles(&c); err != nil {
		return nil, err
	}
	if _, err := commoncfg.NewTLSConfig(&c.TLSConfig); err != nil {
		return nil, fmt.Errorf("tls_config: %w", err)
	}
	return &c, nil
}

// ourHeaders are set by the exporter on every request: the contract
// promises them, so http_headers may not replace them. (prometheus/common
// refuses Authorization, Accept-Encoding and the like itself.)
var ourHeaders = []string{"Accept"}

// validateHeaders refuses http_headers that would replace a header the
// exporter sends on every request. block prefixes key names in errors, as
// in validateAuth.
func validateHeaders(c *commoncfg.HTTPClientConfig, block string) error {
	if c.HTTPHeaders == nil {
		return nil
	}
	for name := range c.HTTPHeaders.Headers {
		for _, ours := range ourHeaders {
			if http.CanonicalHeaderKey(name) == ours {
				return fmt.Errorf("%s: %s is set by the exporter on every request (%s: application/json) and cannot be replaced", blockKey(block)("http_headers"), ours, ours)
			}
		}
	}
	return nil
}
