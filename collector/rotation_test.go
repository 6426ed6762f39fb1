package collector

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

// TestReloadKeepsLocationChecks: a reload that changes a /probe pair's
// module keeps the last checks of the locations still in its subset and
// forgets the others, and those of a module whose info fields changed.
func TestReloadKeepsLocationChecks(t *testing.T) {
	svc := sampleservice.New(sampleservice.Options{Key: "k-probe", Locations: 5})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	settings := keySettings("k-probe")
	settings.DetailIDs, settings.InfoFields = []int64{1, 2}, []string{"name"}
	l := &versionedLookup{settings: settings}
	h := NewProbeHandler(l.lookup, nil, nil)
	target := mustTarget(t, srv.URL)
	if code, _ := probe(t, h, "target="+url.QueryEscape(srv.URL)); code != 200 {
		t.Fatalf("probe: %d", code)
	}
	_, before := checked(defaultEntry(t, h, target).poller, 2)
	reload := func(ids []int64, fields []string) *Poller {
		l.mu.Lock()
		l.settings.DetailIDs, l.settings.InfoFields = ids, fields
		l.version++
		l.mu.Unlock()
		h.Prune()
		return defaultEntry(t, h, target).poller
	}
	kept, at := checked(reload([]int64{2, 3}, []string{"name"}), 2)
	if !slices.Equal(kept, []int64{2}) || !at.Equal(before) {
		t.Errorf("after the subset became [2 3]: checks of %v, location 2's of %v; want [2] of %v", kept, at, before)
	}
	if kept, _ = checked(reload([]int64{2, 3}, []string{"region"}), 2); len(kept) != 0 {
		t.Errorf("after the info fields changed: checks of %v kept", kept)
	}
}
