package collector

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

func TestParseTargetSpellsOneTargetOneWay(t *testing.T) {
	tests := []struct {
		spellings []string
		want      string
	}{
		{[]string{"https://h", "https://h/", "HTTPS://H:443", "https://h:443/", "hTtPs://H:0443//", "https://h:/"}, "https://h"},
		{[]string{"http://h", "http://h:80/", "HTTP://H"}, "http://h"},
		{[]string{"https://h:80", "https://h:080/"}, "https://h:80"},
		{[]string{"http://h:443/"}, "http://h:443"},
		{[]string{"https://h/deploy", "https://h/deploy/", "https://H:443/deploy/", "https://h/%64eploy"}, "https://h/deploy"},
		{[]string{"https://h/Deploy"}, "https://h/Deploy"},
		{[]string{"https://h/a%2fb/", "https://h/a%2Fb"}, "https://h/a%2Fb"},
		{[]string{"http://[::1]", "http://[::1]:80/", "HTTP://[::1]"}, "http://[::1]"},
		{[]string{"http://[::1]:8080/", "http://[::1]:8080"}, "http://[::1]:8080"},
		{[]string{"http://[FE80::1]:8080/"}, "http://[fe80::1]:8080"},
		{[]string{"http://[0:0::1]/", "http://[::0001]"}, "http://[::1]"},
		{[]string{"http://127.0.0.1:8080/x/"}, "http://127.0.0.1:8080/x"},
	}
	for _, tt := range tests {
		for _, raw := range tt.spellings {
			u, err := client.ParseTarget(raw)
			if err != nil {
				t.Errorf("%s: %v", raw, err)
				continue
			}
			if got := u.String(); got != tt.want {
				t.Errorf("%s: spelled %s, want %s", raw, got, tt.want)
			}
			// The spelling must stay a valid base URL for the client.
			if _, err := url.Parse(u.String()); err != nil {
				t.Errorf("%s: spelled %s, which does not parse: %v", raw, u, err)
			}
		}
	}
}

// TestProbeSpellingsShareOnePoller probes one service under several
// spellings of its URL: one poller, so one poll inside the minimum
// interval, and one hold-off.
func TestProbeSpellingsShareOnePoller(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "spelling-key", Locations: 5, Prefix: "/deploy"})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	settings := keySettings("spelling-key")
	settings.MinInterval = time.Hour
	h := NewProbeHandler(staticLookup(map[string]TargetSettings{"default": settings}), nil, nil)
	u, _ := url.Parse(srv.URL)
	for _, target := range []string{
		"http://" + u.Host + "/deploy",
		"http://" + u.Host + "/deploy/",
		"HTTP://" + u.Host + "/deploy//",
		"http://" + u.Hostname() + ":0" + u.Port() + "/deploy",
	} {
		code, body := probe(t, h, "target="+url.QueryEscape(target))
		if code != 200 || !strings.Contains(body, "deployment_service_up 1") {
			t.Errorf("probe of %s: %d\n%s", target, code, body)
		}
	}
	if n := len(h.pollers); n != 1 {
		t.Errorf("%d pollers for one service", n)
	}
	// Root, two lists and one detail view: one poll.
	if n := svc.TotalRequests(); n != 4 {
		t.Errorf("%d requests, want 4: one poll inside the minimum interval", n)
	}
}
