package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDashboardsLint checks the repository's dashboards for what Grafana
// does not report on import: templated datasource on every panel and query,
// job and instance variables read from deployment_service_up, unique panel
// ids and panels that do not overlap.
func TestDashboardsLint(t *testing.T) {
	files, err := filepath.Glob("../../../grafana/dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { lintDashboard(t, f) })
	}
}

type lintPanel struct {
	ID         int                      `json:"id"`
	Title      string                   `json:"title"`
	Type       string                   `json:"type"`
	Datasource json.RawMessage          `json:"datasource"`
	GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
	Targets    []struct {
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
}

func lintDashboard(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string      `json:"uid"`
		Panels     []lintPanel `json:"panels"`
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" {
		t.Error("dashboard has no uid: provisioning would give it a new one on every load")
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if vars["datasource"].Type != "datasource" {
		t.Error("no datasource variable")
	}
	for _, name := range []string{"job", "instance"} {
		if v, ok := vars[name]; !ok || !strings.Contains(v.queryString(), "deployment_service_up") {
			t.Errorf("variable %s must be read from deployment_service_up", name)
		}
	}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: duplicate id %d", p.Title, p.ID)
		}
		ids[p.ID] = true
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Fatalf("panel %q overlaps panel %q at x=%d y=%d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is wider than the grid", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(string(tg.Datasource), "${datasource}") {
				t.Errorf("panel %q has a query that does not use the datasource variable", p.Title)
			}
		}
	}
}
