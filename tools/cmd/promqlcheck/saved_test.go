package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSavedValue: a single-valued query variable keeps its saved value when
// the query offers it, as Grafana does, and a saved value it never offers
// is an error.
func TestSavedValue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"success","data":["a_job","deployment_service"]}`))
	}))
	defer srv.Close()
	p := &prom{base: srv.URL, client: srv.Client()}
	for saved, want := range map[string]string{"": "a_job", "deployment_service": "deployment_service", "gone": "error"} {
		v := variable{Name: "job", Type: "query", Query: json.RawMessage(`"label_values(job)"`)}
		v.Current.Value, _ = json.Marshal(saved)
		vars := map[string]string{}
		err := resolveVariables(context.Background(), p, []variable{v}, vars)
		switch {
		case want == "error" && (err == nil || !strings.Contains(err.Error(), `saved value "gone"`)):
			t.Errorf("saved %q: error = %v, want one naming the saved value", saved, err)
		case want != "error" && (err != nil || vars["job"] != want):
			t.Errorf("saved %q: job = %q (error %v), want %q", saved, vars["job"], err, want)
		}
	}
}

// TestRecordedSeries: each recording rule, and nothing else, gives a query
// of the series it writes.
func TestRecordedSeries(t *testing.T) {
	qs := []query{
		{source: "r.yml recording rule a:b", expr: "sum(x)", record: "a:b", dashboard: -1},
		{source: "r.yml alert A", expr: "x > 0", kind: mustEvaluate, dashboard: -1},
		{source: "d.json panel", expr: "x", dashboard: 0},
	}
	got := recordedSeries(qs)
	if len(got) != 1 || got[0].expr != "a:b" || got[0].kind != mustHaveData || got[0].source != "r.yml recorded series a:b" {
		t.Errorf("recordedSeries = %+v, want one query of a:b", got)
	}
}
