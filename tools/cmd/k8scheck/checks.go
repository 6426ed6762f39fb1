package main

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/deployment-service/deployment_service_exporter/tools/internal/flagcheck"
)

const keyFileFlag = "--api.key-file="

type checker struct {
	objs   *objects
	job    string
	flags  flagcheck.Set
	passed int
	errs   []string
}

// expect records one check: ok, or a failure described by format and args.
func (c *checker) expect(ok bool, format string, args ...any) {
	if ok {
		c.passed++
		return
	}
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *checker) run() {
	o := c.objs
	c.expect(len(o.deployments) == 1, "want 1 Deployment, have %d", len(o.deployments))
	c.expect(len(o.services) == 1, "want 1 Service, have %d", len(o.services))
	c.expect(len(o.secrets) == 1, "want 1 Secret, have %d", len(o.secrets))
	c.expect(len(o.serviceMonitors) == 1, "want 1 ServiceMonitor, have %d", len(o.serviceMonitors))
	c.expect(len(o.prometheusRules) == 1, "want 1 PrometheusRule, have %d", len(o.prometheusRules))
	c.metadata()
	for _, d := range o.deployments {
		c.deployment(d)
	}
	for _, s := range o.services {
		c.service(s)
	}
	for _, sm := range o.serviceMonitors {
		c.serviceMonitor(sm)
	}
	for _, pr := range o.prometheusRules {
		c.prometheusRule(pr)
	}
}

// metadata checks every object's name and labels as the API server would.
func (c *checker) metadata() {
	var metas []*metav1.ObjectMeta
	for _, d := range c.objs.deployments {
		metas = append(metas, &d.ObjectMeta, &d.Spec.Template.ObjectMeta)
	}
	for _, s := range c.objs.services {
		metas = append(metas, &s.ObjectMeta)
	}
	for _, s := range c.objs.secrets {
		metas = append(metas, &s.ObjectMeta)
	}
	for _, m := range c.objs.configMaps {
		metas = append(metas, &m.ObjectMeta)
	}
	for _, m := range c.objs.serviceMonitors {
		metas = append(metas, &m.ObjectMeta)
	}
	for _, m := range c.objs.prometheusRules {
		metas = append(metas, &m.ObjectMeta)
	}
	for _, m := range metas {
		if m.Name != "" { // a pod template has no name
			errs := validation.IsDNS1123Subdomain(m.Name)
			c.expect(len(errs) == 0, "name %q: %s", m.Name, strings.Join(errs, "; "))
		}
		errs := metav1validation.ValidateLabels(m.Labels, field.NewPath("metadata", "labels"))
		c.expect(len(errs) == 0, "%s labels: %v", m.Name, errs.ToAggregate())
	}
}

func (c *checker) deployment(d *appsv1.Deployment) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	c.expect(err == nil && !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)),
		"Deployment %s: selector %v does not select its pod template labels %v", d.Name, d.Spec.Selector, d.Spec.Template.Labels)
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	c.expect(pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken,
		"Deployment %s: automountServiceAccountToken must be false (the exporter needs no Kubernetes API)", d.Name)
	c.expect(len(pod.Containers) == 1, "Deployment %s: want 1 container, have %d", d.Name, len(pod.Containers))
	for i := range pod.Containers {
		ct := &pod.Containers[i]
		c.securityContext(d.Name, psc, ct)
		c.resources(d.Name, ct)
		c.probes(d.Name, ct)
		c.args(d.Name, ct)
		c.apiKey(d.Name, &pod, ct)
		c.apiURL(d.Name, ct)
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			c.expect(c.secret(v.Secret.SecretName) != nil, "Deployment %s: volume %s uses Secret %s, which is not in the manifests", d.Name, v.Name, v.Secret.SecretName)
		}
	}
}

// securityContext requires what the "restricted" Pod Security Standard
// requires, plus a read-only root filesystem.
func (c *checker) securityContext(name string, psc *corev1.PodSecurityContext, ct *corev1.Container) {
	sc := ct.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	where := fmt.Sprintf("Deployment %s container %s", name, ct.Name)
	c.expect(sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation must be false", where)
	c.expect(sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem must be true", where)
	c.expect(sc.Privileged == nil || !*sc.Privileged, "%s: must not be privileged", where)
	c.expect(sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL") && len(sc.Capabilities.Add) == 0,
		"%s: capabilities must drop ALL and add none", where)

	nonRoot := firstBool(sc.RunAsNonRoot, psc.RunAsNonRoot)
	c.expect(nonRoot != nil && *nonRoot, "%s: runAsNonRoot must be true", where)
	user := firstInt(sc.RunAsUser, psc.RunAsUser)
	c.expect(user == nil || *user != 0, "%s: runAsUser must not be 0", where)
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	c.expect(seccomp != nil && (seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault || seccomp.Type == corev1.SeccompProfileTypeLocalhost),
		"%s: seccompProfile must be RuntimeDefault or Localhost", where)
}

func (c *checker) resources(name string, ct *corev1.Container) {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := ct.Resources.Requests[r]
		lim, hasLim := ct.Resources.Limits[r]
		c.expect(hasReq && hasLim && !req.IsZero() && req.Cmp(lim) <= 0,
			"Deployment %s container %s: %s needs a request and a limit, request <= limit", name, ct.Name, r)
	}
}

func (c *checker) probes(name string, ct *corev1.Container) {
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/-/healthy", ct.LivenessProbe}, {"readiness", "/-/ready", ct.ReadinessProbe}} {
		ok := p.probe != nil && p.probe.HTTPGet != nil && p.probe.HTTPGet.Path == p.path &&
			containerPort(ct, p.probe.HTTPGet.Port) != nil
		c.expect(ok, "Deployment %s container %s: %s probe must GET %s on a container port", name, ct.Name, p.kind, p.path)
	}
}

func (c *checker) args(name string, ct *corev1.Container) {
	c.expect(len(ct.Command) == 0, "Deployment %s container %s: command overrides the image's entrypoint", name, ct.Name)
	if c.flags == nil {
		return
	}
	errs := c.flags.Check(ct.Args)
	c.expect(len(errs) == 0, "Deployment %s container %s: arguments the binary refuses: %v", name, ct.Name, errs)
}

// apiKey checks that the key comes from a Secret volume through
// --api.key-file, never from a literal in the manifests.
func (c *checker) apiKey(name string, pod *corev1.PodSpec, ct *corev1.Container) {
	where := fmt.Sprintf("Deployment %s container %s", name, ct.Name)
	for _, e := range ct.Env {
		c.expect(!(e.Name == "DEPLOYMENT_SERVICE_API_KEY" && e.Value != ""), "%s: the API key must not be a literal env value", where)
	}
	var keyFile string
	for _, a := range ct.Args {
		if strings.HasPrefix(a, keyFileFlag) {
			keyFile = strings.TrimPrefix(a, keyFileFlag)
		}
	}
	if !path.IsAbs(keyFile) {
		c.expect(false, "%s: needs %s with an absolute path", where, keyFileFlag)
		return
	}
	for _, m := range ct.VolumeMounts {
		rel, ok := strings.CutPrefix(keyFile, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		c.expect(m.SubPath == "" && m.SubPathExpr == "", "%s: the key's mount must not use subPath, or the kubelet never updates it", where)
		vol := volume(pod, m.Name)
		if vol == nil || vol.Secret == nil {
			c.expect(false, "%s: %s is not on a Secret volume", where, keyFile)
			return
		}
		key := secretKeyForPath(vol.Secret, rel)
		s := c.secret(vol.Secret.SecretName)
		c.expect(s != nil && key != "" && hasKey(s, key),
			"%s: %s needs key %q in Secret %s", where, keyFile, key, vol.Secret.SecretName)
		return
	}
	c.expect(false, "%s: no volume is mounted where %s points (%s)", where, keyFileFlag, keyFile)
}

// apiURL checks that the container gets a base URL: --api.url, or
// DEPLOYMENT_SERVICE_URL from env or a ConfigMap, or --demo.
func (c *checker) apiURL(name string, ct *corev1.Container) {
	var raw string
	for _, a := range ct.Args {
		if v, ok := strings.CutPrefix(a, "--api.url="); ok {
			raw = v
		}
		if a == "--demo" {
			c.passed++
			return
		}
	}
	for _, e := range ct.Env {
		if e.Name == "DEPLOYMENT_SERVICE_URL" && e.Value != "" {
			raw = e.Value
		}
	}
	for _, ef := range ct.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		cm := c.configMap(ef.ConfigMapRef.Name)
		c.expect(cm != nil, "Deployment %s: envFrom ConfigMap %s is not in the manifests", name, ef.ConfigMapRef.Name)
		if cm != nil && cm.Data["DEPLOYMENT_SERVICE_URL"] != "" {
			raw = cm.Data["DEPLOYMENT_SERVICE_URL"]
		}
	}
	u, err := url.Parse(raw)
	c.expect(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "",
		"Deployment %s container %s: needs an http(s) base URL through --api.url or DEPLOYMENT_SERVICE_URL (have %q)", name, ct.Name, raw)
}

func (c *checker) service(s *corev1.Service) {
	var pod *corev1.PodTemplateSpec
	for _, d := range c.objs.deployments {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			pod = &d.Spec.Template
		}
	}
	if pod == nil {
		c.expect(false, "Service %s: selector %v selects no Deployment's pods", s.Name, s.Spec.Selector)
		return
	}
	c.passed++
	for _, p := range s.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port)
		}
		found := false
		for i := range pod.Spec.Containers {
			found = found || containerPort(&pod.Spec.Containers[i], target) != nil
		}
		c.expect(found, "Service %s port %s: targetPort %s is no container port", s.Name, p.Name, target.String())
	}
}

func (c *checker) serviceMonitor(sm *monitoringv1.ServiceMonitor) {
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	var svc *corev1.Service
	for _, s := range c.objs.services {
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(s.Labels)) {
			svc = s
		}
	}
	if svc == nil {
		c.expect(false, "ServiceMonitor %s: selector selects no Service", sm.Name)
		return
	}
	c.passed++
	c.expect(len(sm.Spec.Endpoints) > 0, "ServiceMonitor %s: no endpoints", sm.Name)
	for _, ep := range sm.Spec.Endpoints {
		c.expect(slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }),
			"ServiceMonitor %s: port %q is not a port name of Service %s", sm.Name, ep.Port, svc.Name)
		c.expect(ep.Path == "" || ep.Path == "/metrics", "ServiceMonitor %s: path %q is not the metrics path", sm.Name, ep.Path)
		interval, err1 := time.ParseDuration(string(ep.Interval))
		timeout, err2 := time.ParseDuration(string(ep.ScrapeTimeout))
		c.expect(err1 == nil && err2 == nil && timeout > 0 && timeout <= interval,
			"ServiceMonitor %s: needs interval and scrapeTimeout with scrapeTimeout <= interval", sm.Name)
		setsJob := slices.ContainsFunc(ep.RelabelConfigs, func(r monitoringv1.RelabelConfig) bool {
			return r.TargetLabel == "job" && r.Replacement != nil && *r.Replacement == c.job &&
				(r.Action == "" || strings.EqualFold(r.Action, "replace"))
		})
		c.expect(setsJob, "ServiceMonitor %s: must set job=%q, which the alert rules select", sm.Name, c.job)
	}
}

func (c *checker) prometheusRule(pr *monitoringv1.PrometheusRule) {
	n := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert != "" {
				c.expect(r.For != nil && r.Labels["severity"] != "" && r.Annotations["summary"] != "" &&
					r.Annotations["description"] != "" && r.Annotations["runbook_url"] != "",
					"PrometheusRule %s alert %s: needs for, severity, summary, description and runbook_url", pr.Name, r.Alert)
			}
		}
	}
	c.expect(n > 0, "PrometheusRule %s has no rules", pr.Name)
}

func (c *checker) secret(name string) *corev1.Secret {
	for _, s := range c.objs.secrets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (c *checker) configMap(name string) *corev1.ConfigMap {
	for _, m := range c.objs.configMaps {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func containerPort(ct *corev1.Container, port intstr.IntOrString) *corev1.ContainerPort {
	for i, p := range ct.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return &ct.Ports[i]
		}
	}
	return nil
}

func volume(pod *corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// secretKeyForPath returns the Secret key that appears at rel inside a
// Secret volume: the key of that name, or the one mapped there by items.
func secretKeyForPath(v *corev1.SecretVolumeSource, rel string) string {
	if len(v.Items) == 0 {
		return rel
	}
	for _, it := range v.Items {
		if it.Path == rel {
			return it.Key
		}
	}
	return ""
}

func hasKey(s *corev1.Secret, key string) bool {
	_, inData := s.Data[key]
	_, inString := s.StringData[key]
	return inData || inString
}

func firstBool(vs ...*bool) *bool {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func firstInt(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}
