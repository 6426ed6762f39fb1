package collector

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// TargetSettings is everything a poll of one service needs besides its
// URL: what the command-line flags say for /metrics, or a module of the
// configuration file for /probe.
type TargetSettings struct {
	// Client is the client configuration, BaseURL left empty.
	Client      client.Config
	DetailIDs   []int64
	DetailLimit int
	InfoFields  []string
	// Timeout bounds one poll; MinInterval spaces polls out.
	Timeout     time.Duration
	MinInterval time.Duration
}

// NewTargetPoller builds the client and poller for the service at base.
func NewTargetPoller(base *url.URL, s TargetSettings, opts PollerOptions) (*Poller, error) {
	cfg := s.Client
	cfg.BaseURL = base
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	opts.Timeout, opts.MinInterval = s.Timeout, s.MinInterval
	t := &Target{Client: c, DetailIDs: uniqueIDs(s.DetailIDs), DetailLimit: s.DetailLimit, InfoFields: s.InfoFields}
	return NewPoller(t, opts), nil
}

// uniqueIDs drops repeated ids, keeping the first of each: an id given
// twice is still one location with one set of series.
func uniqueIDs(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// WriteSettingsText writes the settings a poll of one target runs with,
// as the debug view of /probe shows them: limits, subset, gzip, TLS and
// proxy, where the key comes from; never a secret.
func WriteSettingsText(w io.Writer, module string, s TargetSettings) error {
	c := s.Client.WithDefaults()
	hc := &c.HTTPClientConfig
	var b strings.Builder
	fmt.Fprintf(&b, "Module %s:\n", ModuleName(module))
	fmt.Fprintf(&b, "    timeout %s (the scrape timeout header lowers it), min_interval %s\n", s.Timeout, s.MinInterval)
	fmt.Fprintf(&b, "    concurrency %d, rate_limit %s, max_pages %d, max_response_bytes %d, gzip %v\n",
		c.Concurrency, rateText(c.RateLimit), c.MaxPages, c.MaxResponseBytes, !c.DisableGzip)
	switch {
	case len(s.DetailIDs) > 0:
		fmt.Fprintf(&b, "    detail subset: ids %v", s.DetailIDs)
	case s.DetailLimit > 0:
		fmt.Fprintf(&b, "    detail subset: the first %d locations of the list", s.DetailLimit)
	default:
		b.WriteString("    detail subset: none")
	}
	if len(s.InfoFields) > 0 {
		fmt.Fprintf(&b, ", info fields %v", s.InfoFields)
	}
	b.WriteByte('\n')
	switch a := hc.Authorization; {
	case a == nil:
		b.WriteString("    key: none (no Authorization header)\n")
	case a.CredentialsFile != "":
		fmt.Fprintf(&b, "    key: %s, read from %s\n", a.Type, a.CredentialsFile)
	default:
		fmt.Fprintf(&b, "    key: %s, given inline\n", a.Type)
	}
	t := hc.TLSConfig
	tls := []string{}
	for _, f := range []struct{ name, value string }{
		{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"server_name", t.ServerName}, {"min_version", t.MinVersion.String()},
	} {
		if f.value != "" && f.value != "0" {
			tls = append(tls, f.name+" "+f.value)
		}
	}
	if t.CA != "" {
		tls = append(tls, "ca inline")
	}
	if t.InsecureSkipVerify {
		tls = append(tls, "insecure_skip_verify (certificates NOT checked)")
	}
	if len(tls) == 0 {
		tls = append(tls, "system roots, default verification")
	}
	fmt.Fprintf(&b, "    TLS: %s\n", strings.Join(tls, ", "))
	switch {
	case hc.ProxyURL.URL != nil:
		fmt.Fprintf(&b, "    proxy: %s\n", client.RedactURL(hc.ProxyURL.URL))
	case hc.ProxyFromEnvironment:
		b.WriteString("    proxy: from the environment\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func rateText(r float64) string {
	if r <= 0 {
		return "none"
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + "/s"
}
