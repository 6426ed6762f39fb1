package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// A checkCase narrows the checks to one scraped target, so that a query
// returning data for some target cannot hide one that returns nothing for
// another (a /probe target next to the /metrics one, a job that stores
// only native histograms next to one with classic buckets).
//
// pins sets dashboard variables, whose names are also the label names the
// recording rules' results must carry (job and instance). Only dashboard
// queries that use a pinned variable are checked for the case; with
// rules set, every recording rule must return a series with those labels.
type checkCase struct {
	pins  map[string]string
	rules bool
	probe bool // a /probe target, which has no request families
}

// metricsOnly matches the families that /metrics carries and /probe does not.
var metricsOnly = regexp.MustCompile(`deployment_service_request(s_|s:|_errors|_duration_seconds)`)

// parseCase reads "name=value,name=value".
func parseCase(s string, rules bool) (checkCase, error) {
	c := checkCase{pins: map[string]string{}, rules: rules}
	for part := range strings.SplitSeq(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || value == "" {
			return c, fmt.Errorf("case %q: want name=value[,name=value...]", s)
		}
		if _, dup := c.pins[name]; dup {
			return c, fmt.Errorf("case %q: %s given twice", s, name)
		}
		c.pins[name] = value
	}
	return c, nil
}

func (c checkCase) String() string {
	parts := make([]string, 0, len(c.pins))
	for _, k := range slices.Sorted(maps.Keys(c.pins)) {
		parts = append(parts, k+"="+c.pins[k])
	}
	return strings.Join(parts, ",")
}

// usesAny reports whether expr refers to one of the pinned variables.
func (c checkCase) usesAny(expr string) bool {
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		if _, ok := c.pins[m[1]+m[2]+m[3]]; ok {
			return true
		}
	}
	return false
}

// matches reports whether a result series carries every pinned label.
func (c checkCase) matches(labels map[string]string) bool {
	for k, v := range c.pins {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// labelsAny reports whether a result series carries any of the pinned
// label names, whatever their values.
func (c checkCase) labelsAny(labels map[string]string) bool {
	for k := range c.pins {
		if _, ok := labels[k]; ok {
			return true
		}
	}
	return false
}

// resolvePinned resolves a dashboard's variables as resolveVariables does,
// except that a pinned variable takes its pinned value, which its own query
// must offer: a target the variable cannot select is a broken dashboard.
func resolvePinned(ctx context.Context, p *prom, list []variable, vars map[string]string, c checkCase) error {
	for _, v := range list {
		pinned, ok := c.pins[v.Name]
		if !ok {
			if err := resolveVariables(ctx, p, []variable{v}, vars); err != nil {
				return err
			}
			continue
		}
		if v.Type != "query" {
			return fmt.Errorf("variable %s: only query variables can be pinned, not %q", v.Name, v.Type)
		}
		q, err := interpolate(v.queryString(), vars)
		if err != nil {
			return fmt.Errorf("variable %s: %w", v.Name, err)
		}
		values, err := variableValues(ctx, p, q)
		if err != nil {
			return fmt.Errorf("variable %s: query %q: %w", v.Name, q, err)
		}
		if !slices.Contains(values, pinned) {
			return fmt.Errorf("variable %s: query %q does not offer %q (it offers %q)", v.Name, q, pinned, values)
		}
		vars[v.Name] = formatSelected(v, pinned)
	}
	for name := range c.pins {
		if !slices.ContainsFunc(list, func(v variable) bool { return v.Name == name }) {
			return fmt.Errorf("no dashboard variable %s to pin", name)
		}
	}
	return nil
}
