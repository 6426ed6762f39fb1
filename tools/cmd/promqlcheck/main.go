// Command promqlcheck sends every PromQL expression of Grafana dashboards and
// Prometheus rule files to a running Prometheus, and fails unless each one
// parses and returns data (alert expressions only need to evaluate: an empty
// result means the alert does not fire). It keeps dashboards, rules and the
// exporter's metric names from drifting apart.
//
// Each -target repeats the checks for one scraped target: the dashboard
// variables named in it are set to its values (and must offer them), every
// dashboard query using them and every recording rule must return data for
// that target. -vars does the same for the dashboard alone, for variables
// that are no labels of the rules' results (the exporter's own job).
//
//	promqlcheck -prometheus http://127.0.0.1:9090 \
//	  -dashboard grafana/dashboards/x.json -rules deploy/prometheus/rules/alerts.yml \
//	  -wait 'count_over_time(up[1m]) >= 5' \
//	  -target 'job=deployment_service,instance=127.0.0.1:10044' -vars 'exporter_job=deployment_service'
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	prometheus   string
	dashboards   stringList
	rules        stringList
	waits        stringList
	waitTimeout  time.Duration
	rateInterval time.Duration
	interval     time.Duration
	rng          time.Duration
	targets      stringList
	probeTargets stringList
	varCases     stringList
	recorded     bool
}

func main() {
	var o options
	flag.StringVar(&o.prometheus, "prometheus", "", "base URL of the Prometheus to query (required)")
	flag.Var(&o.dashboards, "dashboard", "Grafana dashboard JSON file (repeatable)")
	flag.Var(&o.rules, "rules", "Prometheus rule file (repeatable); its rules must also be loaded in that Prometheus")
	flag.Var(&o.waits, "wait", "expression that must return data before the checks start (repeatable)")
	flag.DurationVar(&o.waitTimeout, "wait-timeout", 90*time.Second, "longest wait for the -wait expressions and the first rule evaluations")
	flag.DurationVar(&o.rateInterval, "rate-interval", time.Minute, "value of $__rate_interval")
	flag.DurationVar(&o.interval, "interval", 15*time.Second, "value of $__interval")
	flag.DurationVar(&o.rng, "range", time.Hour, "value of $__range")
	flag.Var(&o.targets, "target", "name=value,... of one target: dashboard variables and recording rule labels (repeatable)")
	flag.Var(&o.probeTargets, "probe-target", "as -target, for a /probe target: recording rules that read the request families (on /metrics only) are not required to have data for it")
	flag.Var(&o.varCases, "vars", "name=value,... of dashboard variables to check the dashboards with (repeatable)")
	flag.BoolVar(&o.recorded, "recorded", false, "also require the series each recording rule writes to have data (waiting for them up to -wait-timeout)")
	flag.Parse()
	if o.prometheus == "" || len(o.dashboards)+len(o.rules) == 0 {
		fmt.Fprintln(os.Stderr, "promqlcheck: -prometheus and at least one -dashboard or -rules are required")
		os.Exit(2)
	}
	os.Exit(run(o))
}

func run(o options) int {
	ctx := context.Background()
	p := &prom{base: o.prometheus, client: &http.Client{Timeout: 30 * time.Second}}

	var cases []checkCase
	for _, t := range o.targets {
		c, err := parseCase(t, true)
		if err != nil {
			return fail(err)
		}
		cases = append(cases, c)
	}
	for _, t := range o.probeTargets {
		c, err := parseCase(t, true)
		if err != nil {
			return fail(err)
		}
		c.probe = true
		cases = append(cases, c)
	}
	for _, t := range o.varCases {
		c, err := parseCase(t, false)
		if err != nil {
			return fail(err)
		}
		cases = append(cases, c)
	}

	var all []query
	var varLists [][]variable
	for i, path := range o.dashboards {
		vs, qs, err := loadDashboard(path, i)
		if err != nil {
			return fail(err)
		}
		varLists = append(varLists, vs)
		all = append(all, qs...)
	}
	nRules := 0
	for _, path := range o.rules {
		qs, err := loadRules(path)
		if err != nil {
			return fail(err)
		}
		nRules += len(qs)
		all = append(all, qs...)
	}
	var recorded []query
	if o.recorded {
		recorded = recordedSeries(all)
		all = append(all, recorded...)
	}

	if err := waitFor(ctx, p, o.waits, nRules, recorded, o.waitTimeout); err != nil {
		return fail(err)
	}

	passed, failed := 0, 0
	if nRules > 0 {
		if err := checkRuleHealth(ctx, p, nRules); err != nil {
			fmt.Printf("FAIL loaded rules: %v\n", err)
			failed++
		} else {
			fmt.Printf("ok   loaded rules: %d rules, all healthy\n", nRules)
			passed++
		}
	}

	vars := builtins(o.rateInterval, o.interval, o.rng)
	for _, vl := range varLists {
		if err := resolveVariables(ctx, p, vl, vars); err != nil {
			fmt.Printf("FAIL %v\n", err)
			failed++
		} else {
			passed += countQueryVars(vl)
		}
	}

	for _, q := range all {
		if err := check(ctx, p, q, vars, checkCase{}); err != nil {
			fmt.Printf("FAIL %s: %v\n     expr: %s\n", q.source, err, oneLine(q.expr))
			failed++
			continue
		}
		passed++
	}
	for _, c := range cases {
		p, f := checkCase1(ctx, p, c, o, varLists, all)
		passed += p
		failed += f
	}

	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// checkCase1 runs the checks of one case: the dashboard queries that use
// a pinned variable, and with c.rules the recording rules, each of which
// must return data for the case's target. It returns the passed and failed counts.
func checkCase1(ctx context.Context, p *prom, c checkCase, o options, varLists [][]variable, all []query) (passed, failed int) {
	fmt.Printf("---- case %s\n", c)
	// Each dashboard resolves its own variables; queries are attributed to
	// their dashboard by source.
	varsByDashboard := make([]map[string]string, len(varLists))
	for i, vl := range varLists {
		vars := builtins(o.rateInterval, o.interval, o.rng)
		if err := resolvePinned(ctx, p, vl, vars, c); err != nil {
			fmt.Printf("FAIL [%s] %s: %v\n", c, o.dashboards[i], err)
			failed++
			continue
		}
		varsByDashboard[i] = vars
	}
	for _, q := range all {
		var vars map[string]string
		switch {
		case q.dashboard >= 0:
			if !c.usesAny(q.expr) || varsByDashboard[q.dashboard] == nil {
				continue
			}
			vars = varsByDashboard[q.dashboard]
		case c.rules && q.kind == mustHaveData && !(c.probe && metricsOnly.MatchString(q.expr)):
			vars = map[string]string{}
		default:
			continue
		}
		cq := q
		cq.source = fmt.Sprintf("[%s] %s", c, q.source)
		if err := check(ctx, p, cq, vars, c); err != nil {
			fmt.Printf("FAIL %s: %v\n     expr: %s\n", cq.source, err, oneLine(q.expr))
			failed++
			continue
		}
		passed++
	}
	return passed, failed
}

// check sends one expression and judges the answer by the query's kind.
// With a case, only the result series of the case's target count.
func check(ctx context.Context, p *prom, q query, vars map[string]string, c checkCase) error {
	expr, err := interpolate(q.expr, vars)
	if err != nil {
		return err
	}
	res, err := p.query(ctx, expr)
	if err != nil {
		return err
	}
	if q.dashboard < 0 && len(c.pins) > 0 && !res.scalar {
		// A recording rule: keep the series of the case's target. A rule
		// none of whose series carries any pinned label is about no target
		// (an SLO's objective, say: one series per SLO) and holds for all.
		if q.kind == mustHaveData && !res.empty() && !slices.ContainsFunc(res.series, c.labelsAny) {
			fmt.Printf("ok   %s: %s for no target in particular\n", q.source, describe(res))
			return nil
		}
		n := len(res.series)
		res.series = slices.DeleteFunc(res.series, func(s map[string]string) bool { return !c.matches(s) })
		if q.kind == mustHaveData && len(res.series) == 0 {
			return fmt.Errorf("returned no data for %s (%d series for other targets)", c, n)
		}
	}
	switch {
	case q.kind == mustEvaluate:
		state := "quiet"
		if !res.empty() {
			state = fmt.Sprintf("would fire for %d series", len(res.series))
		}
		fmt.Printf("ok   %s: evaluates (%s)\n", q.source, state)
	case res.empty():
		return fmt.Errorf("returned no data (expr as sent: %s)", oneLine(expr))
	default:
		fmt.Printf("ok   %s: %s\n", q.source, describe(res))
	}
	return nil
}

func describe(r result) string {
	if r.scalar {
		return r.resultType
	}
	return fmt.Sprintf("%d series", len(r.series))
}

// waitFor polls until every wait expression returns data, every rule has
// been evaluated at least once and every recorded series has data (those
// still without any by the deadline fail in the checks that follow).
func waitFor(ctx context.Context, p *prom, waits []string, nRules int, recorded []query, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, w := range waits {
		for {
			res, err := p.query(ctx, w)
			if err == nil && !res.empty() {
				fmt.Printf("ok   waited for %s\n", w)
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("gave up after %s waiting for %s (last error: %v)", timeout, w, err)
			}
			time.Sleep(time.Second)
		}
	}
	for nRules > 0 {
		rs, err := p.rules(ctx)
		if err == nil && len(rs) >= nRules && allEvaluated(rs) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s waiting for %d rules to be loaded and evaluated (have %d, last error: %v)", timeout, nRules, len(rs), err)
		}
		time.Sleep(time.Second)
	}
	for _, q := range recorded {
		for {
			res, err := p.query(ctx, q.expr)
			if err == nil && !res.empty() || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

func allEvaluated(rs []ruleHealth) bool {
	for _, r := range rs {
		if r.Health == "unknown" || r.Health == "" {
			return false
		}
	}
	return true
}

// checkRuleHealth requires exactly the rules of the files to be loaded, all healthy.
func checkRuleHealth(ctx context.Context, p *prom, nRules int) error {
	rs, err := p.rules(ctx)
	if err != nil {
		return err
	}
	if len(rs) != nRules {
		return fmt.Errorf("%d rules are loaded in Prometheus, the rule files hold %d", len(rs), nRules)
	}
	for _, r := range rs {
		if r.Health != "ok" {
			return fmt.Errorf("rule %s in group %s is %s: %s", r.Name, r.Group, r.Health, r.LastError)
		}
	}
	return nil
}

func countQueryVars(vl []variable) int {
	n := 0
	for _, v := range vl {
		if v.Type == "query" {
			n++
		}
	}
	return n
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "promqlcheck:", err)
	return 1
}
