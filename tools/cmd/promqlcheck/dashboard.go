package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// query is one PromQL expression to send to Prometheus, with where it came from.
type query struct {
	source    string // a human-readable origin, e.g. `dashboard.json panel "API up" A`
	expr      string
	kind      kind
	dashboard int    // index of the dashboard among the -dashboard files; -1 for a rule
	record    string // the series a recording rule writes
}

type kind int

const (
	mustHaveData kind = iota // dashboards and recording rules: must parse and return data
	mustEvaluate             // alert rules: must parse and evaluate; empty is fine
)

// variable is a dashboard template variable.
type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	Current    struct {
		Value json.RawMessage `json:"value"`
	} `json:"current"`
	Options []struct {
		Value string `json:"value"`
	} `json:"options"`
}

// queryString returns the variable's query, which Grafana stores either as
// a string or as an object with a "query" field.
func (v variable) queryString() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil {
		return o.Query
	}
	return ""
}

// saved returns the value saved as the variable's current one, if a single string.
func (v variable) saved() string {
	var s string
	_ = json.Unmarshal(v.Current.Value, &s)
	return s
}

// currentValue returns the first selected value of a custom or constant variable.
func (v variable) currentValue() string {
	var s string
	if json.Unmarshal(v.Current.Value, &s) == nil && s != "" {
		return s
	}
	var l []string
	if json.Unmarshal(v.Current.Value, &l) == nil && len(l) > 0 {
		return l[0]
	}
	if len(v.Options) > 0 {
		return v.Options[0].Value
	}
	first, _, _ := strings.Cut(v.queryString(), ",")
	return strings.TrimSpace(first)
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"` // panels of a collapsed row
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
		Hide  bool   `json:"hide"`
	} `json:"targets"`
}

type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// loadDashboard reads a dashboard JSON file and returns its template
// variables and the expressions of every panel target.
func loadDashboard(path string, index int) ([]variable, []query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					continue
				}
				qs = append(qs, query{
					source:    fmt.Sprintf("%s panel %q %s", path, p.Title, t.RefID),
					expr:      t.Expr,
					kind:      mustHaveData,
					dashboard: index,
				})
			}
		}
	}
	walk(d.Panels)
	if len(qs) == 0 {
		return nil, nil, fmt.Errorf("%s: no panel has a PromQL expression", path)
	}
	return d.Templating.List, qs, nil
}
