package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	commoncfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v2"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// LoadHTTPClientConfig reads the http_client_config block of
// --api.http-config.file, held to a module's rules and with its files read
// once, so that a wrong path fails the start. Errors do not name the file.
func LoadHTTPClientConfig(path string) (*commoncfg.HTTPClientConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, err
	}
	c := commoncfg.DefaultHTTPClientConfig
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, explainYAML(err)
	}
	if u := c.ProxyURL.URL; u != nil && u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5" {
		return nil, errors.New("proxy_url must be an http, https or socks5 URL, such as http://proxy.example.com:3128")
	}
	c.SetDirectory(filepath.Dir(path))
	if err := checkHTTPClient(&c, ""); err != nil {
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
