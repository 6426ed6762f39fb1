package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// prom is a minimal client of the Prometheus HTTP API.
type prom struct {
	base   string
	client *http.Client
}

type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

// result is the answer to an instant query.
type result struct {
	resultType string
	series     []map[string]string // label sets of a vector or matrix
	scalar     bool
}

func (r result) empty() bool { return !r.scalar && len(r.series) == 0 }

func (p *prom) get(ctx context.Context, path string, params url.Values) (json.RawMessage, error) {
	u := strings.TrimRight(p.base, "/") + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var ar apiResponse
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("HTTP %d, body is not an API response: %w", resp.StatusCode, err)
	}
	if ar.Status != "success" {
		return nil, fmt.Errorf("status %q: %s: %s", ar.Status, ar.ErrorType, ar.Error)
	}
	return ar.Data, nil
}

// query runs an instant query at the current time.
func (p *prom) query(ctx context.Context, expr string) (result, error) {
	data, err := p.get(ctx, "/api/v1/query", url.Values{
		"query": {expr},
		"time":  {fmt.Sprintf("%.3f", float64(time.Now().UnixMilli())/1000)},
	})
	if err != nil {
		return result{}, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return result{}, err
	}
	r := result{resultType: d.ResultType}
	switch d.ResultType {
	case "vector", "matrix":
		var items []struct {
			Metric map[string]string `json:"metric"`
		}
		if err := json.Unmarshal(d.Result, &items); err != nil {
			return result{}, err
		}
		for _, it := range items {
			r.series = append(r.series, it.Metric)
		}
	case "scalar", "string":
		r.scalar = true
	default:
		return result{}, fmt.Errorf("unknown result type %q", d.ResultType)
	}
	return r, nil
}

func (p *prom) labelValues(ctx context.Context, label string) ([]string, error) {
	data, err := p.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", nil)
	if err != nil {
		return nil, err
	}
	var vs []string
	return vs, json.Unmarshal(data, &vs)
}

// ruleHealth is one loaded rule as /api/v1/rules reports it.
type ruleHealth struct {
	Group     string
	Name      string
	Health    string
	LastError string
}

func (p *prom) rules(ctx context.Context) ([]ruleHealth, error) {
	data, err := p.get(ctx, "/api/v1/rules", nil)
	if err != nil {
		return nil, err
	}
	var d struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	var out []ruleHealth
	for _, g := range d.Groups {
		for _, r := range g.Rules {
			out = append(out, ruleHealth{Group: g.Name, Name: r.Name, Health: r.Health, LastError: r.LastError})
		}
	}
	return out, nil
}
