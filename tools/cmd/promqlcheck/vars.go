package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// builtins are Grafana's own variables, set to what a dashboard showing the
// last hour with a short scrape interval would use.
func builtins(rateInterval, interval, rng time.Duration) map[string]string {
	return map[string]string{
		"__rate_interval":    promDuration(rateInterval),
		"__rate_interval_ms": fmt.Sprint(rateInterval.Milliseconds()),
		"__interval":         promDuration(interval),
		"__interval_ms":      fmt.Sprint(interval.Milliseconds()),
		"__range":            promDuration(rng),
		"__range_s":          fmt.Sprint(int64(rng.Seconds())),
		"__range_ms":         fmt.Sprint(rng.Milliseconds()),
	}
}

func promDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d.Seconds()))
}

// varRef matches $name, ${name}, ${name:format} and [[name]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)`)

// interpolate replaces every variable reference in expr; an unknown
// variable is an error, as it would be a broken panel in Grafana.
func interpolate(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown variable(s) %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// labelValues matches Grafana's label_values(label) and label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*$`)

// queryResult matches Grafana's query_result(expr).
var queryResult = regexp.MustCompile(`^\s*query_result\((.+)\)\s*$`)

// resolveVariables gives each template variable a value as Grafana would:
// query variables are run against Prometheus (in order, so one may use the
// ones before it) and must find at least one value.
func resolveVariables(ctx context.Context, p *prom, list []variable, vars map[string]string) error {
	for _, v := range list {
		switch v.Type {
		case "datasource", "interval", "adhoc", "textbox":
			if v.Type == "interval" || v.Type == "textbox" {
				vars[v.Name] = v.currentValue()
			}
			continue
		case "custom", "constant":
			vars[v.Name] = v.currentValue()
			continue
		case "query":
		default:
			return fmt.Errorf("variable %s: unsupported type %q", v.Name, v.Type)
		}
		q, err := interpolate(v.queryString(), vars)
		if err != nil {
			return fmt.Errorf("variable %s: %w", v.Name, err)
		}
		values, err := variableValues(ctx, p, q)
		if err != nil {
			return fmt.Errorf("variable %s: query %q: %w", v.Name, q, err)
		}
		if len(values) == 0 {
			return fmt.Errorf("variable %s: query %q found no values", v.Name, q)
		}
		// Grafana keeps a single-valued variable's saved value when the
		// query offers it; a default it never offers is a mistake here.
		if cur := v.saved(); cur != "" && !v.Multi && !v.IncludeAll {
			if !slices.Contains(values, cur) {
				return fmt.Errorf("variable %s: its saved value %q is not among the values of %q: %q", v.Name, cur, q, values)
			}
			values = []string{cur}
		}
		vars[v.Name] = formatValues(v, values)
		fmt.Printf("ok   variable %s = %s (from %s)\n", v.Name, vars[v.Name], q)
	}
	return nil
}

func variableValues(ctx context.Context, p *prom, q string) ([]string, error) {
	if m := labelValues.FindStringSubmatch(q); m != nil {
		selector, label := m[1], m[2]
		if selector == "" {
			return p.labelValues(ctx, label)
		}
		res, err := p.query(ctx, selector)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, s := range res.series {
			if v, ok := s[label]; ok && !seen[v] {
				seen[v] = true
			}
		}
		return sortedKeys(seen), nil
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		res, err := p.query(ctx, m[1])
		if err != nil {
			return nil, err
		}
		if res.empty() {
			return nil, nil
		}
		return []string{"query_result"}, nil
	}
	return nil, fmt.Errorf("unsupported variable query (use label_values or query_result)")
}

// formatValues renders the values the way Grafana's Prometheus datasource
// does inside a =~ matcher: one plain value, or a regex alternation of all
// values (or the allValue) when the variable is multi-value or has "All".
func formatValues(v variable, values []string) string {
	if !v.Multi && !v.IncludeAll {
		return values[0]
	}
	if v.IncludeAll && v.AllValue != "" {
		return v.AllValue
	}
	quoted := make([]string, len(values))
	for i, s := range values {
		quoted[i] = regexEscape(s)
	}
	return "(" + strings.Join(quoted, "|") + ")"
}

// formatSelected renders one selected value of a variable, as Grafana does
// when a multi-value variable has just that value selected.
func formatSelected(v variable, value string) string {
	if !v.Multi && !v.IncludeAll {
		return value
	}
	return regexEscape(value)
}

// regexEscape escapes a value for a regex inside a PromQL double-quoted
// string, as Grafana does: the regex's backslash is itself escaped, since
// PromQL refuses an escape such as "\." in a string.
func regexEscape(s string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(s), `\`, `\\`)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
