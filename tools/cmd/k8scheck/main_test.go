package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"known kind", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  k: v\n", true},
		{"unknown field", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringDta:\n  k: v\n", false},
		{"duplicate field", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nmetadata:\n  name: t\n", false},
		{"bad quantity", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        resources:\n          limits:\n            memory: 1Mo\n", false},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", false},
		{"scrape config", "apiVersion: monitoring.coreos.com/v1alpha1\nkind: ScrapeConfig\nmetadata:\n  name: s\nspec:\n  httpSDConfigs:\n    - url: http://e:10044/sd\n", true},
		{"scrape config unknown field", "apiVersion: monitoring.coreos.com/v1alpha1\nkind: ScrapeConfig\nmetadata:\n  name: s\nspec:\n  httpSDConfig:\n    - url: http://e:10044/sd\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeAll(strings.NewReader("# comment\n---\n" + tt.doc))
			if (err == nil) != tt.ok {
				t.Errorf("decodeAll error = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// fixture returns the rendered full-values case of the Helm chart.
func fixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/helm-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// check runs every check on manifests as helm.sh does for the full case.
func check(t *testing.T, manifests, want string, external ...string) []string {
	t.Helper()
	objs, _, err := decodeAll(strings.NewReader(manifests))
	if err != nil {
		t.Fatalf("decodeAll: %v", err)
	}
	wantCounts, err := parseWant(want)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := loadRules("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{objs: objs, job: "deployment_service", probeJob: "deployment_service_probe",
		want: wantCounts, externalSecrets: external, rules: rules}
	c.run()
	return c.errs
}

const fullWant = "Deployment=1,Service=1,ServiceAccount=1,Secret=2,ServiceMonitor=3,ScrapeConfig=1,PrometheusRule=1,NetworkPolicy=1,PodDisruptionBudget=1"

func TestChecks(t *testing.T) {
	tests := []struct {
		name      string
		old, new  string // replaced once in the fixture
		want      string // -want; fullWant when empty
		noExtern  bool   // leave out -external-secret deployment-service-keys
		wantError string // substring of an expected failure; "" = no failure
	}{
		{name: "valid"},
		{name: "counts", want: strings.Replace(fullWant, "NetworkPolicy=1", "NetworkPolicy=0", 1),
			wantError: "want 0 NetworkPolicy, have 1"},
		{name: "unlisted kind", want: strings.Replace(fullWant, ",PodDisruptionBudget=1", "", 1),
			wantError: "want 0 PodDisruptionBudget, have 1"},
		{name: "external secret not named", noExtern: true,
			wantError: "Secret deployment-service-keys, which is neither in the manifests nor named by -external-secret"},
		{name: "image latest",
			old:       `image: "registry.example.com/team/deployment-service-exporter@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`,
			new:       `image: registry.example.com/team/deployment-service-exporter:latest`,
			wantError: "needs a tag other than latest"},
		{name: "service account", old: "serviceAccountName: dse-exporter", new: "serviceAccountName: other",
			wantError: `serviceAccountName "other" is not the ServiceAccount`},
		{name: "demo with a URL", old: `- "--log.level=debug"`, new: `- "--demo"`,
			wantError: "--demo conflicts with the service URL"},
		{name: "module without a Token", old: "type: Token", new: "type: Bearer",
			wantError: "module default needs http_client_config.authorization of type Token"},
		{name: "module key file not mounted", old: "credentials_file: /etc/deployment-service/api-key", new: "credentials_file: /etc/elsewhere/key",
			wantError: "module default: no volume is mounted where /etc/elsewhere/key lies"},
		{name: "metrics job", old: "replacement: deployment_service\n", new: "replacement: exporter\n",
			wantError: `must set job="deployment_service"`},
		{name: "probe instance", old: "sourceLabels: [__param_target]", new: "sourceLabels: [__address__]",
			wantError: "/probe must copy __param_target to instance"},
		{name: "probe job", old: "replacement: deployment_service_probe", new: "replacement: deployment_service",
			wantError: `/probe must set job="deployment_service_probe"`},
		{name: "probe module label", old: "targetLabel: module\n          replacement: \"staging\"", new: "targetLabel: module\n          replacement: \"default\"",
			wantError: `ServiceMonitor dse-staging: /probe must set module="staging"`},
		{name: "probe module unknown", old: `- "staging"`, new: `- "prod"`,
			wantError: `module "prod" is not in the exporter's --config.file`},
		{name: "probe target", old: `- "https://deploy-staging.example.com"`, new: `- "deploy-staging.example.com"`,
			wantError: `target "deploy-staging.example.com" is no http(s) base URL`},
		{name: "probes collide", old: "- \"https://deploy-staging.example.com\"\n        module:\n          - \"staging\"",
			new:       "- \"https://deploy.example.com/prefix\"\n        module:\n          - \"default\"",
			wantError: "probe the same target (https://deploy.example.com/prefix) with the same module (default)"},
		{name: "service monitor namespace", old: "    matchNames:\n      - observability\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: dse\n      app.kubernetes.io/instance: dse\n  endpoints:\n    - port: http-metrics\n      path: /metrics",
			new:       "    matchNames:\n      - elsewhere\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: dse\n      app.kubernetes.io/instance: dse\n  endpoints:\n    - port: http-metrics\n      path: /metrics",
			wantError: `its namespaceSelector must name the Service's namespace "observability"`},
		{name: "endpoint label kept", old: "replacement: deployment_service\n        # The operator labels every target endpoint=<port name>, which would\n" +
			"        # rename the exporter's own endpoint label (root, projects, ...) to\n        # exported_endpoint; the dashboard and the alerts read endpoint.\n" +
			"        - action: labeldrop\n          regex: endpoint\n",
			new:       "replacement: deployment_service\n",
			wantError: "ServiceMonitor dse: must drop the target label endpoint"},
		{name: "module without targets", old: "        targets:\n        - https://deploy.example.com/prefix\n", new: "",
			wantError: "module default carries credentials but lists no targets"},
		{name: "module for any target", old: "        targets:\n        - https://deploy.example.com/prefix\n", new: "        allow_any_target: true\n"},
		{name: "module target malformed", old: "- https://*.deploy-eu.example.com", new: "- https://deploy-*.eu.example.com",
			wantError: `module eu: targets entry "https://deploy-*.eu.example.com"`},
		{name: "probe target not listed", old: `- "https://deploy-staging.example.com"`, new: `- "https://deploy-qa.example.com"`,
			wantError: `ServiceMonitor dse-staging: module "staging" does not list https://deploy-qa.example.com under targets`},
		{name: "scrape config service", old: "url: http://dse.observability.svc:10044/sd", new: "url: http://dse.monitoring.svc:10044/sd",
			wantError: `ScrapeConfig dse-probe: httpSDConfigs url "http://dse.monitoring.svc:10044/sd?module=eu": dse.monitoring.svc:10044 is no port of the exporter's Service`},
		{name: "scrape config path", old: "url: http://dse.observability.svc:10044/sd", new: "url: http://dse.observability.svc:10044/metrics",
			wantError: "is not the exporter's /sd"},
		{name: "scrape config scheme", old: "scheme: HTTP", new: "scheme: HTTPS",
			wantError: "and scheme https must agree"},
		{name: "scrape config module", old: "/sd?module=eu", new: "/sd?module=us",
			wantError: `module "us" is not in the exporter's --config.file`},
		{name: "scrape config metrics path", old: "metricsPath: /probe", new: "metricsPath: /metrics",
			wantError: "ScrapeConfig dse-probe: metricsPath must be /probe"},
		{name: "scrape config address", old: "replacement: dse.observability.svc:10044", new: "replacement: dse.observability.svc:9090",
			wantError: "then set __address__ to the exporter's dse.observability.svc:10044"},
		{name: "scrape config instance", old: "      sourceLabels: [__param_target]\n      targetLabel: instance\n    # ...while Prometheus scrapes",
			new:       "      sourceLabels: [__address__]\n      targetLabel: instance\n    # ...while Prometheus scrapes",
			wantError: "ScrapeConfig dse-probe: must copy __param_target to instance"},
		{name: "scrape config job", old: "      replacement: deployment_service_probe\n    - action: replace\n      replacement: eu",
			new:       "      replacement: deployment_service\n    - action: replace\n      replacement: eu",
			wantError: `ScrapeConfig dse-probe: must set job="deployment_service_probe"`},
		{name: "scrape config module label", old: "      replacement: eu\n      targetLabel: region", new: "      replacement: eu\n      targetLabel: module",
			wantError: "a relabeling overwrites module, which the discovery sets"},
		{name: "scrape config timeout", old: "scrapeTimeout: 20s\n  relabelings", new: "scrapeTimeout: 90s\n  relabelings",
			wantError: "ScrapeConfig dse-probe: needs scrapeInterval and scrapeTimeout with scrapeTimeout <= scrapeInterval"},
		{name: "scrape config and service monitor", old: "/sd?module=eu", new: "/sd?module=staging",
			wantError: "ServiceMonitor dse-staging and ScrapeConfig dse-probe probe the same target (https://deploy-staging.example.com) with the same module (staging)"},
		{name: "scrape config finds nothing", old: "        - https://deploy-eu.example.com\n", new: "",
			wantError: "ScrapeConfig dse-probe: the modules it discovers list no concrete target"},
		{name: "rules differ", old: "for: 5m", new: "for: 10m",
			wantError: "differs from the rule files"},
		{name: "network policy port", old: "- port: http-metrics\n          protocol: TCP\n      from:", new: "- port: metrics\n          protocol: TCP\n      from:",
			wantError: "ingress port metrics is no container port"},
		{name: "network policy DNS", old: "        - port: 53\n          protocol: UDP\n        - port: 53\n", new: "        - port: 80\n          protocol: UDP\n        - port: 80\n",
			wantError: "restricts egress without allowing DNS"},
		{name: "pdb maxUnavailable 0", old: "maxUnavailable: 1", new: "maxUnavailable: 0",
			wantError: "maxUnavailable 0 of 2 replicas blocks every eviction"},
		{name: "pdb minAvailable all", old: "maxUnavailable: 1", new: "minAvailable: 100%",
			wantError: "minAvailable 100% of 2 replicas blocks every eviction"},
		{name: "pdb selector", old: "spec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: dse",
			new:       "spec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: other",
			wantError: "PodDisruptionBudget dse: selector selects no Deployment's pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifests := fixture(t)
			if tt.old != "" {
				if !strings.Contains(manifests, tt.old) {
					t.Fatalf("fixture has no %q", tt.old)
				}
				manifests = strings.Replace(manifests, tt.old, tt.new, 1)
			}
			want := tt.want
			if want == "" {
				want = fullWant
			}
			var external []string
			if !tt.noExtern {
				external = []string{"deployment-service-keys"}
			}
			errs := check(t, manifests, want, external...)
			switch {
			case tt.wantError == "" && len(errs) > 0:
				t.Errorf("failures on valid manifests: %q", errs)
			case tt.wantError != "" && !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, tt.wantError) }):
				t.Errorf("failures %q, want one saying %q", errs, tt.wantError)
			}
		})
	}
}

func TestSetRuleExprs(t *testing.T) {
	const doc = `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: r
spec:
  groups:
    - name: g
      rules:
        - record: instance:x:poll_intervals
          expr: 5 + 0 * x
        - alert: A
          expr: y > 0
          for: 5m
`
	path := t.TempDir() + "/rules.yaml"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := loadRules(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := setRuleExprs(spec, []string{"instance:x:poll_intervals=8 + 0 * x{job=\"a\"}"}); err != nil {
		t.Fatal(err)
	}
	if got := spec.Groups[0].Rules[0].Expr.String(); got != `8 + 0 * x{job="a"}` {
		t.Errorf("expr = %q, want the one given", got)
	}
	if got := spec.Groups[0].Rules[1].Expr.String(); got != "y > 0" {
		t.Errorf("the alert's expr changed to %q", got)
	}
	for _, bad := range []string{"instance:x:poll_intervals", "=5", "instance:x:poll_intervals=", "A=1"} {
		if err := setRuleExprs(spec, []string{bad}); err == nil {
			t.Errorf("setRuleExprs(%q) succeeded", bad)
		}
	}
}
