// Command k8scheck checks rendered Kubernetes manifests without a cluster:
// the output of `kubectl kustomize deploy/kubernetes` and of `helm template`
// on deploy/helm/deployment-service-exporter.
//
// Every object is decoded strictly into its Kubernetes API type (k8s.io/api,
// and the Prometheus Operator's types for ServiceMonitor, PrometheusRule and
// ScrapeConfig): an unknown or misspelt field, a duplicate field or a
// malformed quantity is an error, as is a kind the check does not know. Then
// the objects are checked against each other and against what the exporter
// needs: the number of objects of each kind (-want), a restricted security
// context, resources, probes on /-/healthy and /-/ready, the API key mounted
// from a Secret and read through --api.key-file, the --config.file modules,
// the key files they name and the targets their keys may go to, /metrics and
// /probe ServiceMonitors with the job labels the rules select and the
// multi-target relabelling, ScrapeConfigs whose HTTP service discovery is the
// exporter's /sd with the same relabelling, selectors and ports that connect
// (Service, ServiceMonitor, ScrapeConfig, NetworkPolicy, PodDisruptionBudget),
// rules equal to those of deploy/prometheus/rules (-rules; -rule-expr names
// a recording rule whose expression the chart's values set), and (with
// -help) container arguments the binary accepts.
//
//	kubectl kustomize deploy/kubernetes | k8scheck -help help.txt
//	helm template x deploy/helm/deployment-service-exporter -f values.yaml |
//	  k8scheck -help help.txt -want Deployment=1,Service=1,... -rules rules.yaml
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/deployment-service/deployment_service_exporter/tools/internal/flagcheck"
)

// objects holds the decoded manifests by kind, and how many of each kind.
type objects struct {
	deployments          []*appsv1.Deployment
	services             []*corev1.Service
	secrets              []*corev1.Secret
	configMaps           []*corev1.ConfigMap
	serviceAccounts      []*corev1.ServiceAccount
	networkPolicies      []*networkingv1.NetworkPolicy
	podDisruptionBudgets []*policyv1.PodDisruptionBudget
	serviceMonitors      []*monitoringv1.ServiceMonitor
	prometheusRules      []*monitoringv1.PrometheusRule
	scrapeConfigs        []*monitoringv1alpha1.ScrapeConfig
	counts               map[string]int
}

// defaultWant is what the kustomize base renders.
const defaultWant = "Deployment=1,Service=1,Secret=1,ConfigMap=1,ServiceMonitor=1,PrometheusRule=1"

func main() {
	helpFile := flag.String("help", "", "file with the exporter's --help output; container arguments must be flags it lists")
	job := flag.String("job", defaultJob, "job label the /metrics ServiceMonitor must set, which the rules (-rules) and the dashboards' defaults (-dashboards) select")
	probeJob := flag.String("probe-job", defaultProbeJob, "job label each /probe ServiceMonitor and ScrapeConfig must set, which the rules select")
	wantFlag := flag.String("want", defaultWant, "KIND=N,...: exactly N objects of each kind; kinds not named must be absent")
	rulesFile := flag.String("rules", "", "PrometheusRule file (promrulegen's output) whose spec every PrometheusRule must equal")
	var ruleExprs stringList
	flag.Var(&ruleExprs, "rule-expr", "RECORD=EXPR: with -rules, the expression that the chart's values give that recording rule, in place of the rule files' one (repeatable)")
	var external stringList
	flag.Var(&external, "external-secret", "a Secret the manifests reference but do not hold (made by the user); repeatable")
	dashboardDir := flag.String("dashboards", "", "directory of Grafana dashboards (*.json) that ConfigMaps must hold, each once")
	dashboardNS := flag.String("dashboard-namespace", "", "with -dashboards, the namespace of their ConfigMaps")
	flag.Parse()

	want, err := parseWant(*wantFlag)
	if err != nil {
		fatal(err)
	}

	in := io.Reader(os.Stdin)
	if flag.NArg() == 1 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		in = f
	}
	objs, n, err := decodeAll(in)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("ok   %d objects decoded strictly into their API types\n", n)

	c := &checker{objs: objs, job: *job, probeJob: *probeJob, want: want, externalSecrets: external}
	if *rulesFile != "" {
		if c.rules, err = loadRules(*rulesFile); err != nil {
			fatal(err)
		}
		if err := setRuleExprs(c.rules, ruleExprs); err != nil {
			fatal(err)
		}
		renameJobs(c.rules, *job, *probeJob)
	} else if len(ruleExprs) > 0 {
		fatal(errors.New("-rule-expr needs -rules"))
	}
	if *helpFile != "" {
		flags, err := flagcheck.ParseFile(*helpFile)
		if err != nil {
			fatal(err)
		}
		c.flags = flags
	}
	c.run()
	if *dashboardDir != "" {
		c.dashboards(*dashboardDir, *dashboardNS)
	}
	for _, e := range c.errs {
		fmt.Printf("FAIL %s\n", e)
	}
	fmt.Printf("%d passed, %d failed\n", c.passed, len(c.errs))
	if len(c.errs) > 0 {
		os.Exit(1)
	}
}

// decodeAll reads a multi-document YAML stream and decodes each document
// strictly into the API type named by its apiVersion and kind.
func decodeAll(r io.Reader) (*objects, int, error) {
	objs := &objects{counts: map[string]int{}}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	n := 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, n, err
		}
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		n++
		if err := decode(doc, objs); err != nil {
			return nil, n, fmt.Errorf("document %d: %w", n, err)
		}
	}
	if n == 0 {
		return nil, 0, errors.New("no objects in the input")
	}
	return objs, n, nil
}

func decode(doc []byte, objs *objects) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var target any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		objs.deployments, target = append(objs.deployments, o), o
	case "v1 Service":
		o := &corev1.Service{}
		objs.services, target = append(objs.services, o), o
	case "v1 Secret":
		o := &corev1.Secret{}
		objs.secrets, target = append(objs.secrets, o), o
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		objs.configMaps, target = append(objs.configMaps, o), o
	case "v1 ServiceAccount":
		o := &corev1.ServiceAccount{}
		objs.serviceAccounts, target = append(objs.serviceAccounts, o), o
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		objs.networkPolicies, target = append(objs.networkPolicies, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		objs.podDisruptionBudgets, target = append(objs.podDisruptionBudgets, o), o
	case "monitoring.coreos.com/v1 ServiceMonitor":
		o := &monitoringv1.ServiceMonitor{}
		objs.serviceMonitors, target = append(objs.serviceMonitors, o), o
	case "monitoring.coreos.com/v1 PrometheusRule":
		o := &monitoringv1.PrometheusRule{}
		objs.prometheusRules, target = append(objs.prometheusRules, o), o
	case "monitoring.coreos.com/v1alpha1 ScrapeConfig":
		o := &monitoringv1alpha1.ScrapeConfig{}
		objs.scrapeConfigs, target = append(objs.scrapeConfigs, o), o
	default:
		return fmt.Errorf("kind %q of apiVersion %q is not known to this check; add it", tm.Kind, tm.APIVersion)
	}
	if err := yaml.UnmarshalStrict(doc, target); err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	objs.counts[tm.Kind]++
	return nil
}

// parseWant reads -want: KIND=N pairs separated by commas.
func parseWant(s string) (map[string]int, error) {
	want := map[string]int{}
	for pair := range strings.SplitSeq(s, ",") {
		kind, n, ok := strings.Cut(strings.TrimSpace(pair), "=")
		count, err := strconv.Atoi(n)
		if !ok || kind == "" || err != nil || count < 0 {
			return nil, fmt.Errorf("-want: %q is not KIND=N", pair)
		}
		want[kind] = count
	}
	return want, nil
}

// loadRules reads the PrometheusRule that promrulegen made of the rule files.
func loadRules(path string) (*monitoringv1.PrometheusRuleSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(b, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("%s: no rule groups", path)
	}
	return &pr.Spec, nil
}

// setRuleExprs replaces the expressions of the named recording rules
// ("RECORD=EXPR" each) in spec: what a chart's values set in the rules it
// renders, such as the multiple of DeploymentServiceLocationCheckStale.
func setRuleExprs(spec *monitoringv1.PrometheusRuleSpec, exprs []string) error {
	for _, e := range exprs {
		record, expr, ok := strings.Cut(e, "=")
		record, expr = strings.TrimSpace(record), strings.TrimSpace(expr)
		if !ok || record == "" || expr == "" {
			return fmt.Errorf("-rule-expr: %q is not RECORD=EXPR", e)
		}
		n := 0
		for gi := range spec.Groups {
			for ri := range spec.Groups[gi].Rules {
				if r := &spec.Groups[gi].Rules[ri]; r.Record == record {
					r.Expr = intstr.FromString(expr)
					n++
				}
			}
		}
		if n == 0 {
			return fmt.Errorf("-rule-expr: the rule files have no recording rule %s", record)
		}
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// has reports whether v is in the list.
func (l stringList) has(v string) bool { return slices.Contains(l, v) }

func stripComments(b []byte) string {
	var sb strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			sb.WriteString(line)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "k8scheck:", err)
	os.Exit(1)
}
