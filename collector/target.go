package collector

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/config"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// Target is one watched service and what to read from it.
type Target struct {
	Client      Service
	DetailIDs   []int64 // the detail subset; without them, the list's first DetailLimit
	DetailLimit int
	InfoFields  []string // detail view fields exposed as info labels
}

// Service is what a poll reads: a *client.Client, or a fake in tests.
type Service interface {
	Root(ctx context.Context) client.Result
	Projects(ctx context.Context) client.ListResult
	Locations(ctx context.Context, wantIDs int, onIDs func([]int64)) client.ListResult
	LocationDetail(ctx context.Context, id int64, fields []string) client.DetailResult
	HoldOff() (until time.Time, status int)
	Concurrency() int
	RateLimited() bool
	Close()
}

func (t *Target) wantsDetails() bool { return len(t.DetailIDs) > 0 || t.DetailLimit > 0 }

// idsFromList is how many ids of the location list make the detail subset.
func (t *Target) idsFromList() int {
	if len(t.DetailIDs) > 0 {
		return 0
	}
	return t.DetailLimit
}

// TargetSettings is what a poll of one service needs besides its URL: the
// command-line flags for /metrics, or a module of the configuration file for /probe.
type TargetSettings struct {
	Client               client.Config // BaseURL left empty
	DetailIDs            []int64
	DetailLimit          int
	InfoFields           []string
	Timeout, MinInterval time.Duration
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

// uniqueIDs drops repeated ids, keeping the first of each: one location, one set of series.
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

// WriteSettingsText writes the settings a poll of one target runs with, as
// the debug view of /probe shows them; never a secret.
func WriteSettingsText(w io.Writer, module string, s TargetSettings) error {
	c := s.Client.WithDefaults()
	hc := &c.HTTPClientConfig
	subset := "none"
	switch {
	case len(s.DetailIDs) > 0:
		subset = fmt.Sprintf("ids %v", s.DetailIDs)
	case s.DetailLimit > 0:
		subset = fmt.Sprintf("the first %d locations of the list", s.DetailLimit)
	}
	if len(s.InfoFields) > 0 {
		subset += fmt.Sprintf(", info fields %v", s.InfoFields)
	}
	key := "none (no Authorization header)"
	if a := hc.Authorization; a != nil && a.CredentialsFile != "" {
		key = a.Type + ", read from " + a.CredentialsFile
	} else if a != nil {
		key = a.Type + ", given inline"
	}
	rate := "none"
	if c.RateLimit > 0 {
		rate = strconv.FormatFloat(c.RateLimit, 'g', -1, 64) + "/s"
	}
	proxy := ""
	if hc.ProxyURL.URL != nil {
		proxy = "    proxy: " + client.RedactURL(hc.ProxyURL.URL) + "\n"
	} else if hc.ProxyFromEnvironment {
		proxy = "    proxy: from the environment\n"
	}
	_, err := fmt.Fprintf(w, "Module %s:\n    timeout %s (the scrape timeout header lowers it), min_interval %s\n"+
		"    concurrency %d, rate_limit %s, max_pages %d, max_response_bytes %d, gzip %v\n"+
		"    detail subset: %s\n    key: %s\n    TLS: %s\n%s",
		module, s.Timeout, s.MinInterval, c.Concurrency, rate, c.MaxPages, c.MaxResponseBytes,
		!c.DisableGzip, subset, key, tlsText(hc.TLSConfig), proxy)
	return err
}

// tlsText sums up a TLS configuration without its secrets.
func tlsText(t config.TLSConfig) string {
	var out []string
	fields := [][2]string{
		{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"server_name", t.ServerName}, {"min_version", t.MinVersion.String()},
	}
	for _, f := range fields {
		if f[1] != "" && f[1] != "0" {
			out = append(out, f[0]+" "+f[1])
		}
	}
	if t.CA != "" {
		out = append(out, "ca inline")
	}
	if t.InsecureSkipVerify {
		out = append(out, "insecure_skip_verify (certificates NOT checked)")
	}
	if len(out) == 0 {
		return "system roots, default verification"
	}
	return strings.Join(out, ", ")
}
