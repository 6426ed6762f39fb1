package main

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// serviceMonitors checks each ServiceMonitor, and that together they scrape
// /metrics under the job the rules select and no /probe pair twice.
func (c *checker) serviceMonitors() {
	metrics := 0
	for _, sm := range c.objs.serviceMonitors {
		svc := c.serviceMonitorService(sm)
		if svc == nil {
			continue
		}
		c.expect(len(sm.Spec.Endpoints) > 0, "ServiceMonitor %s: no endpoints", sm.Name)
		for _, ep := range sm.Spec.Endpoints {
			c.scrapeEndpoint(sm, svc, &ep)
			c.expect(dropsLabel(ep.RelabelConfigs, "endpoint"),
				"ServiceMonitor %s: must drop the target label endpoint (action labeldrop, regex endpoint): the operator sets it to the port's name, "+
					"which renames the exporter's own endpoint label to exported_endpoint, and the dashboard and the alerts read endpoint", sm.Name)
			switch ep.Path {
			case "", "/metrics":
				metrics++
				c.expect(setsLabel(ep.RelabelConfigs, "job", c.job), "ServiceMonitor %s: must set job=%q, which the alert rules select", sm.Name, c.job)
			case "/probe":
				target, module := c.probeEndpoint(sm, &ep)
				c.probed(target, module, "ServiceMonitor "+sm.Name)
			default:
				c.expect(false, "ServiceMonitor %s: path %q is neither /metrics nor /probe", sm.Name, ep.Path)
			}
		}
	}
	if len(c.objs.serviceMonitors) > 0 {
		c.expect(metrics == 1, "want exactly 1 ServiceMonitor endpoint for /metrics (job %q, which the exporter alerts need), have %d", c.job, metrics)
	}
}

// serviceMonitorService returns the Service that sm selects, in a namespace
// it looks in, or nil after recording a failure.
func (c *checker) serviceMonitorService(sm *monitoringv1.ServiceMonitor) *corev1.Service {
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	for _, s := range c.objs.services {
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(s.Labels)) {
			continue
		}
		ns := sm.Spec.NamespaceSelector
		c.expect(s.Namespace == sm.Namespace || ns.Any || slices.Contains(ns.MatchNames, s.Namespace),
			"ServiceMonitor %s in namespace %q: its namespaceSelector must name the Service's namespace %q", sm.Name, sm.Namespace, s.Namespace)
		return s
	}
	c.expect(false, "ServiceMonitor %s: selector selects no Service", sm.Name)
	return nil
}

// scrapeEndpoint checks what every endpoint needs: a port of the Service and
// a scrape timeout within the interval.
func (c *checker) scrapeEndpoint(sm *monitoringv1.ServiceMonitor, svc *corev1.Service, ep *monitoringv1.Endpoint) {
	c.expect(slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }),
		"ServiceMonitor %s: port %q is not a port name of Service %s", sm.Name, ep.Port, svc.Name)
	interval, err1 := time.ParseDuration(string(ep.Interval))
	timeout, err2 := time.ParseDuration(string(ep.ScrapeTimeout))
	c.expect(err1 == nil && err2 == nil && timeout > 0 && timeout <= interval,
		"ServiceMonitor %s: needs interval and scrapeTimeout with scrapeTimeout <= interval", sm.Name)
}

// probeEndpoint checks the multi-target pattern: the service's URL and a
// module of the configuration as URL parameters, the module listing the
// URL, the target as instance, and the probe job. It returns the target
// (in the exporter's spelling) and module, which must be probed once.
func (c *checker) probeEndpoint(sm *monitoringv1.ServiceMonitor, ep *monitoringv1.Endpoint) (string, string) {
	targets, modules := ep.Params["target"], ep.Params["module"]
	var target, module string
	var parsed *targetPattern
	if c.expect(len(targets) == 1, "ServiceMonitor %s: /probe needs exactly one target parameter, has %d", sm.Name, len(targets)) {
		target = targets[0]
		u, err := url.Parse(target)
		p, perr := parseTarget(target)
		if c.expect(err == nil && perr == nil && u.Host != "" && u.User == nil && p.concrete(),
			"ServiceMonitor %s: target %q is no http(s) base URL without credentials", sm.Name, target) {
			parsed, target = &p, p.String()
		}
	}
	if c.expect(len(modules) == 1 && modules[0] != "", "ServiceMonitor %s: /probe needs exactly one module parameter", sm.Name) {
		module = modules[0]
		c.expect(c.configFile, "ServiceMonitor %s: /probe needs the exporter to run with --config.file", sm.Name)
		if c.modules != nil && c.expect(c.modules[module] != nil, "ServiceMonitor %s: module %q is not in the exporter's --config.file", sm.Name, module) && parsed != nil {
			c.expect(c.modules[module].allows(*parsed),
				"ServiceMonitor %s: module %q does not list %s under targets: the exporter would answer 403 and send nothing", sm.Name, module, target)
		}
	}
	c.expect(slices.ContainsFunc(ep.RelabelConfigs, func(r monitoringv1.RelabelConfig) bool {
		return isReplace(r) && r.TargetLabel == "instance" && slices.Equal(r.SourceLabels, []monitoringv1.LabelName{"__param_target"}) &&
			(r.Replacement == nil || *r.Replacement == "$1" || *r.Replacement == "${1}")
	}), "ServiceMonitor %s: /probe must copy __param_target to instance, so series name the service, not the exporter's pod", sm.Name)
	c.expect(setsLabel(ep.RelabelConfigs, "job", c.probeJob), "ServiceMonitor %s: /probe must set job=%q", sm.Name, c.probeJob)
	c.expect(module == "" || setsLabel(ep.RelabelConfigs, "module", module),
		"ServiceMonitor %s: /probe must set module=%q, which tells the alerts and the SLO the target's modules apart", sm.Name, module)
	for _, r := range ep.RelabelConfigs {
		c.expect(r.TargetLabel != "__param_target" && r.TargetLabel != "__param_module" && r.TargetLabel != "__address__",
			"ServiceMonitor %s: a relabeling overwrites %s, which the params set", sm.Name, r.TargetLabel)
	}
	return target, module
}

// probed records that what scrapes /probe of target with module; the
// same pair scraped twice would make colliding series.
func (c *checker) probed(target, module, what string) {
	if c.probedBy == nil {
		c.probedBy = map[string]string{}
	}
	key := target + " " + module
	if other, dup := c.probedBy[key]; dup {
		c.expect(false, "%s and %s probe the same target (%s) with the same module (%s): their series would collide", other, what, target, module)
		return
	}
	c.probedBy[key] = what
}

// scrapeConfig checks a ScrapeConfig that probes the services the
// exporter's /sd lists: HTTP service discovery on /sd of a Service of the
// manifests, /probe as metrics path, the multi-target relabelling with the
// exporter's address from the discovery URL, the probe job, and modules
// that list services to discover, none of them probed twice.
func (c *checker) scrapeConfig(sc *monitoringv1alpha1.ScrapeConfig) {
	name := "ScrapeConfig " + sc.Name
	spec := &sc.Spec
	c.expect(c.configFile, "%s: probes the targets of /sd, which needs the exporter to run with --config.file", name)
	c.expect(spec.MetricsPath != nil && *spec.MetricsPath == "/probe", "%s: metricsPath must be /probe", name)
	scheme := "http"
	if spec.Scheme != nil {
		scheme = strings.ToLower(string(*spec.Scheme))
	}
	interval, err1 := time.ParseDuration(durationOf(spec.ScrapeInterval))
	timeout, err2 := time.ParseDuration(durationOf(spec.ScrapeTimeout))
	c.expect(err1 == nil && err2 == nil && timeout > 0 && timeout <= interval,
		"%s: needs scrapeInterval and scrapeTimeout with scrapeTimeout <= scrapeInterval", name)

	c.expect(len(spec.HTTPSDConfigs) > 0, "%s: needs httpSDConfigs with the exporter's /sd", name)
	exporter := ""
	var modules []string // those of ?module=; "" for every module
	for _, sd := range spec.HTTPSDConfigs {
		u, err := url.Parse(string(sd.URL))
		if !c.expect(err == nil && u.Path == "/sd" && u.Fragment == "", "%s: httpSDConfigs url %q is not the exporter's /sd", name, sd.URL) {
			continue
		}
		c.expect(u.Scheme == scheme, "%s: httpSDConfigs url %q and scheme %s must agree: both reach the exporter", name, sd.URL, scheme)
		c.expect(c.exporterService(u.Host, sc.Namespace), "%s: httpSDConfigs url %q: %s is no port of the exporter's Service", name, sd.URL, u.Host)
		c.expect(exporter == "" || exporter == u.Host, "%s: httpSDConfigs reach the exporter at %s and at %s", name, exporter, u.Host)
		exporter = u.Host
		q := u.Query()
		module := q.Get("module")
		c.expect(len(q) == 0 || len(q) == 1 && len(q["module"]) == 1 && module != "",
			"%s: httpSDConfigs url %q: /sd takes one parameter, module", name, sd.URL)
		if module != "" {
			c.expect(c.modules == nil || c.modules[module] != nil, "%s: httpSDConfigs url %q: module %q is not in the exporter's --config.file", name, sd.URL, module)
		}
		c.expect(!slices.Contains(modules, module), "%s: discovers the targets of %s twice", name, cmp.Or(module, "every module"))
		modules = append(modules, module)
	}

	rs := spec.RelabelConfigs
	target := slices.IndexFunc(rs, func(r monitoringv1.RelabelConfig) bool {
		return copies(r, "__address__", "__param_target")
	})
	address := slices.IndexFunc(rs, func(r monitoringv1.RelabelConfig) bool {
		return isReplace(r) && r.TargetLabel == "__address__" && len(r.SourceLabels) == 0 && r.Replacement != nil && *r.Replacement == exporter
	})
	c.expect(target >= 0 && address > target,
		"%s: must copy __address__ (the service /sd names) to __param_target, then set __address__ to the exporter's %s", name, exporter)
	c.expect(slices.ContainsFunc(rs, func(r monitoringv1.RelabelConfig) bool { return copies(r, "__param_target", "instance") }),
		"%s: must copy __param_target to instance, so series name the service, not the exporter", name)
	c.expect(setsLabel(rs, "job", c.probeJob), "%s: must set job=%q", name, c.probeJob)
	for i, r := range rs {
		c.expect(r.TargetLabel != "__param_module" && r.TargetLabel != "module" && (r.TargetLabel != "__address__" || i == address),
			"%s: a relabeling overwrites %s, which the discovery sets", name, r.TargetLabel)
	}

	if c.modules == nil {
		return // a configuration file made by the user: its targets cannot be seen here
	}
	if slices.Contains(modules, "") {
		modules = slices.Sorted(maps.Keys(c.modules))
	}
	n := 0
	for _, m := range modules {
		if c.modules[m] == nil {
			continue // refused above
		}
		for _, t := range c.modules[m].concrete() {
			c.probed(t.String(), m, name)
			n++
		}
	}
	c.expect(n > 0, "%s: the modules it discovers list no concrete target (one without *): /sd hands Prometheus nothing", name)
}

// exporterService reports whether host (name[.namespace[.svc[.cluster.local]]]:port,
// from a ScrapeConfig in namespace ns) is a port of a Service of the
// manifests.
func (c *checker) exporterService(host, ns string) bool {
	h, port, ok := strings.Cut(host, ":")
	labels := strings.Split(h, ".")
	if !ok || len(labels) > 5 || len(labels) > 2 && strings.Join(labels[2:], ".") != "svc" && strings.Join(labels[2:], ".") != "svc.cluster.local" {
		return false
	}
	if len(labels) > 1 {
		ns = labels[1]
	}
	return slices.ContainsFunc(c.objs.services, func(s *corev1.Service) bool {
		return s.Name == labels[0] && s.Namespace == ns && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
			return strconv.Itoa(int(p.Port)) == port
		})
	})
}

// copies reports whether r copies the label from to the label to.
func copies(r monitoringv1.RelabelConfig, from, to string) bool {
	return isReplace(r) && r.TargetLabel == to && slices.Equal(r.SourceLabels, []monitoringv1.LabelName{monitoringv1.LabelName(from)}) &&
		(r.Replacement == nil || *r.Replacement == "$1" || *r.Replacement == "${1}")
}

func durationOf(d *monitoringv1.Duration) string {
	if d == nil {
		return ""
	}
	return string(*d)
}

func isReplace(r monitoringv1.RelabelConfig) bool {
	return r.Action == "" || strings.EqualFold(r.Action, "replace")
}

// dropsLabel reports whether a relabeling drops the target label name.
func dropsLabel(rs []monitoringv1.RelabelConfig, name string) bool {
	return slices.ContainsFunc(rs, func(r monitoringv1.RelabelConfig) bool {
		if !strings.EqualFold(r.Action, "labeldrop") || r.Regex == "" {
			return false
		}
		re, err := regexp.Compile("^(?:" + r.Regex + ")$")
		return err == nil && re.MatchString(name)
	})
}

// setsLabel reports whether a relabeling sets label to value.
func setsLabel(rs []monitoringv1.RelabelConfig, label, value string) bool {
	return slices.ContainsFunc(rs, func(r monitoringv1.RelabelConfig) bool {
		return isReplace(r) && r.TargetLabel == label && r.Replacement != nil && *r.Replacement == value && len(r.SourceLabels) == 0
	})
}

func (c *checker) prometheusRule(pr *monitoringv1.PrometheusRule) {
	n := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert != "" {
				// Sloth's burn-rate alerts (label sloth_severity) need no
				// for: their short window does its work.
				c.expect((r.For != nil || r.Labels["sloth_severity"] != "") && r.Labels["severity"] != "" && r.Annotations["summary"] != "" &&
					r.Annotations["description"] != "" && r.Annotations["runbook_url"] != "",
					"PrometheusRule %s alert %s: needs for (unless a Sloth burn-rate alert), severity, summary, description and runbook_url", pr.Name, r.Alert)
			}
		}
	}
	c.expect(n > 0, "PrometheusRule %s has no rules", pr.Name)
	if c.rules != nil {
		got, err1 := yaml.Marshal(pr.Spec)
		want, err2 := yaml.Marshal(c.rules)
		c.expect(err1 == nil && err2 == nil && bytes.Equal(got, want),
			"PrometheusRule %s differs from the rule files (-rules): %s", pr.Name, firstDiff(got, want))
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d of the spec is %q, want %q", i+1, gl, wl)
		}
	}
	return "no difference in the text"
}

// networkPolicy checks that it selects the exporter's pods, lets scrapes
// reach the metrics port, and, when it restricts egress, allows DNS.
func (c *checker) networkPolicy(np *networkingv1.NetworkPolicy) {
	d := c.selectedDeployment(&np.Spec.PodSelector)
	if !c.expect(d != nil, "NetworkPolicy %s: podSelector selects no Deployment's pods", np.Name) {
		return
	}
	types := np.Spec.PolicyTypes
	c.expect(slices.Contains(types, networkingv1.PolicyTypeIngress), "NetworkPolicy %s: policyTypes must hold Ingress", np.Name)
	open := false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				open = true
				continue
			}
			found := false
			for i := range d.Spec.Template.Spec.Containers {
				found = found || containerPort(&d.Spec.Template.Spec.Containers[i], *p.Port) != nil
			}
			c.expect(found, "NetworkPolicy %s: ingress port %s is no container port", np.Name, p.Port.String())
			open = open || found
		}
	}
	c.expect(open, "NetworkPolicy %s: no ingress rule lets Prometheus reach the metrics port", np.Name)
	if slices.Contains(types, networkingv1.PolicyTypeEgress) {
		dns := slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
			return slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool {
				return p.Port != nil && p.Port.Type == intstr.Int && p.Port.IntVal == 53
			})
		})
		c.expect(dns, "NetworkPolicy %s: restricts egress without allowing DNS (port 53)", np.Name)
	}
}

// podDisruptionBudget checks that it selects the exporter's pods and lets at
// least one be evicted, or a node drain would wait for ever.
func (c *checker) podDisruptionBudget(pdb *policyv1.PodDisruptionBudget) {
	d := c.selectedDeployment(pdb.Spec.Selector)
	if !c.expect(d != nil, "PodDisruptionBudget %s: selector selects no Deployment's pods", pdb.Name) {
		return
	}
	c.expect((pdb.Spec.MinAvailable == nil) != (pdb.Spec.MaxUnavailable == nil), "PodDisruptionBudget %s: set minAvailable or maxUnavailable", pdb.Name)
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	if pdb.Spec.MinAvailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, replicas, true)
		c.expect(err == nil && n < replicas, "PodDisruptionBudget %s: minAvailable %s of %d replicas blocks every eviction", pdb.Name, pdb.Spec.MinAvailable.String(), replicas)
	}
	if pdb.Spec.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, false)
		c.expect(err == nil && n > 0, "PodDisruptionBudget %s: maxUnavailable %s of %d replicas blocks every eviction", pdb.Name, pdb.Spec.MaxUnavailable.String(), replicas)
	}
}

// selectedDeployment returns the Deployment whose pods sel selects.
func (c *checker) selectedDeployment(ls *metav1.LabelSelector) *appsv1.Deployment {
	if ls == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return nil
	}
	for _, d := range c.objs.deployments {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			return d
		}
	}
	return nil
}
