package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record string `json:"record"`
			Alert  string `json:"alert"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// loadRules returns the expressions of a Prometheus rule file: recording
// rules must return data, alert rules must evaluate.
func loadRules(path string) ([]query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var qs []query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			q := query{expr: r.Expr, kind: mustHaveData, dashboard: -1}
			switch {
			case r.Record != "":
				q.source = fmt.Sprintf("%s recording rule %s", path, r.Record)
				q.record = r.Record
			case r.Alert != "":
				q.source = fmt.Sprintf("%s alert %s", path, r.Alert)
				q.kind = mustEvaluate
			default:
				return nil, fmt.Errorf("%s: group %s has a rule that is neither record nor alert", path, g.Name)
			}
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%s: no rules", path)
	}
	return qs, nil
}

// recordedSeries returns, for each recording rule among qs, a query of the
// series it writes: that must have data too, wherever the rules' results go
// (vmalert writes them back through remote write).
func recordedSeries(qs []query) []query {
	var out []query
	for _, q := range qs {
		if q.record != "" {
			out = append(out, query{source: strings.Replace(q.source, "recording rule", "recorded series", 1), expr: q.record, kind: mustHaveData, dashboard: -1})
		}
	}
	return out
}
