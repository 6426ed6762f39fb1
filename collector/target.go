package collector

import (
	"net/url"
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
