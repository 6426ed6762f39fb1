package collector

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"time"

	"go.yaml.in/yaml/v2"

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

// TargetSettings is what a poll of one service needs besides its URL: the flags, or a module of the file.
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
	return slices.DeleteFunc(slices.Clone(ids), func(id int64) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
}

// WriteSettingsText writes a target's settings as YAML in the file's keys, secrets as <secret>, as blackbox's debug view does.
func WriteSettingsText(w io.Writer, module string, s TargetSettings) error {
	c := s.Client.WithDefaults()
	out, err := yaml.Marshal(map[string]any{"http_client_config": c.HTTPClientConfig, "timeout": s.Timeout, "concurrency": c.Concurrency,
		"max_pages": c.MaxPages, "max_response_bytes": c.MaxResponseBytes, "rate_limit": c.RateLimit, "gzip": !c.DisableGzip,
		"min_interval": s.MinInterval, "locations": map[string]any{"detail_ids": s.DetailIDs, "detail_limit": s.DetailLimit, "info_fields": s.InfoFields}})
	if err == nil {
		_, err = fmt.Fprintf(w, "Module %s (the scrape timeout header lowers its timeout):\n%s", module, out)
	}
	return err
}
