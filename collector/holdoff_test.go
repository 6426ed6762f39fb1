package collector

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// TestHoldOffBelongsToTheCredentials: a 429 with Retry-After met by a
// module without credentials on another path of the origin, or by another
// key, holds off neither the /metrics service nor a module with its key.
func TestHoldOffBelongsToTheCredentials(t *testing.T) {
	for _, tt := range []struct{ name, module, path string }{
		{"a module without credentials", "open", "/open"},
		{"another key", "other", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := sampleservice.New(sampleservice.Options{Key: "k-main", Locations: 3})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Token k-main" {
					w.Header().Set("Retry-After", "3600")
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return
				}
				svc.ServeHTTP(w, r)
			}))
			defer srv.Close()
			modules := map[string]TargetSettings{"default": keySettings("k-main"), "open": {Timeout: 5 * time.Second}, "other": keySettings("k-other")}
			h := NewProbeHandler(staticLookup(modules), nil, nil)
			if _, body := probe(t, h, "module="+tt.module+"&target="+url.QueryEscape(srv.URL+tt.path)); !strings.Contains(body, `deployment_service_endpoint_status_code{endpoint="root"} 429`) {
				t.Fatalf("the %s module did not meet the 429:\n%s", tt.module, body)
			}
			if _, body := probe(t, h, "target="+url.QueryEscape(srv.URL+svc.Prefix())); !strings.Contains(body, "deployment_service_up 1") {
				t.Errorf("the module with the key is held off:\n%s", body)
			}
			// The /metrics service shares the store of hold-offs, as main.go wires it.
			s := keySettings("k-main")
			s.Client.HoldOffs = h.HoldOffs
			p, err := NewTargetPoller(mustTarget(t, srv.URL+svc.Prefix()), s, PollerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if snap := p.Poll(t.Context()); !snap.up() {
				t.Errorf("the /metrics service is held off: %+v", snap.Endpoints)
			}
		})
	}
}
