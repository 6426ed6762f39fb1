package main

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/deployment-service/deployment_service_exporter/tools/internal/flagcheck"
)

type checker struct {
	objs            *objects
	job, probeJob   string
	want            map[string]int
	externalSecrets stringList
	rules           *monitoringv1.PrometheusRuleSpec
	flags           flagcheck.Set

	// modules holds the modules of the --config.file in the manifests, nil
	// when there is none or it is in a Secret made by the user.
	modules    map[string]*module
	configFile bool
	// probedBy maps each /probe target and module that a ServiceMonitor or
	// ScrapeConfig scrapes to the object that does, to find doubles.
	probedBy map[string]string

	passed int
	errs   []string
}

// expect records one check: ok, or a failure described by format and args.
// It returns ok, so that checks depending on this one can be skipped.
func (c *checker) expect(ok bool, format string, args ...any) bool {
	if ok {
		c.passed++
		return true
	}
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
	return false
}

func (c *checker) run() {
	o := c.objs
	c.counts()
	c.metadata()
	for _, d := range o.deployments {
		c.deployment(d)
	}
	for _, s := range o.services {
		c.service(s)
	}
	for _, sa := range o.serviceAccounts {
		c.expect(sa.AutomountServiceAccountToken == nil || !*sa.AutomountServiceAccountToken,
			"ServiceAccount %s: automountServiceAccountToken must not be true (the exporter needs no Kubernetes API)", sa.Name)
	}
	c.serviceMonitors()
	for _, sc := range o.scrapeConfigs {
		c.scrapeConfig(sc)
	}
	for _, pr := range o.prometheusRules {
		c.prometheusRule(pr)
	}
	for _, np := range o.networkPolicies {
		c.networkPolicy(np)
	}
	for _, pdb := range o.podDisruptionBudgets {
		c.podDisruptionBudget(pdb)
	}
}

// counts checks the number of objects of each kind against -want.
func (c *checker) counts() {
	kinds := map[string]bool{}
	for k := range c.want {
		kinds[k] = true
	}
	for k := range c.objs.counts {
		kinds[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		c.expect(c.objs.counts[k] == c.want[k], "want %d %s, have %d", c.want[k], k, c.objs.counts[k])
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
	for _, m := range c.objs.serviceAccounts {
		metas = append(metas, &m.ObjectMeta)
	}
	for _, m := range c.objs.networkPolicies {
		metas = append(metas, &m.ObjectMeta)
	}
	for _, m := range c.objs.podDisruptionBudgets {
		metas = append(metas, &m.ObjectMeta)
	}
	for _, m := range c.objs.scrapeConfigs {
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
	if len(c.objs.serviceAccounts) > 0 {
		c.expect(slices.ContainsFunc(c.objs.serviceAccounts, func(sa *corev1.ServiceAccount) bool { return sa.Name == pod.ServiceAccountName }),
			"Deployment %s: serviceAccountName %q is not the ServiceAccount of the manifests", d.Name, pod.ServiceAccountName)
	}
	c.expect(len(pod.Containers) == 1, "Deployment %s: want 1 container, have %d", d.Name, len(pod.Containers))
	for i := range pod.Containers {
		ct := &pod.Containers[i]
		c.image(d.Name, ct)
		c.securityContext(d.Name, psc, ct)
		c.resources(d.Name, ct)
		c.probes(d.Name, ct)
		c.args(d.Name, ct)
		c.mode(d.Name, &pod, ct)
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			c.expect(c.secret(v.Secret.SecretName) != nil || c.externalSecrets.has(v.Secret.SecretName),
				"Deployment %s: volume %s uses Secret %s, which is neither in the manifests nor named by -external-secret", d.Name, v.Name, v.Secret.SecretName)
		}
	}
}

// image requires a pinned image: a digest, or a tag other than latest.
func (c *checker) image(name string, ct *corev1.Container) {
	ref := ct.Image
	if _, digest, ok := strings.Cut(ref, "@"); ok {
		c.expect(strings.HasPrefix(digest, "sha256:") && len(digest) == len("sha256:")+64,
			"Deployment %s container %s: image %q has a malformed digest", name, ct.Name, ref)
		return
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	c.expect(ok && tag != "" && tag != "latest",
		"Deployment %s container %s: image %q needs a tag other than latest, or a digest", name, ct.Name, ref)
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

// mode checks what the container watches: the service of --api.url (or
// DEPLOYMENT_SERVICE_URL) with its key, the modules of --config.file, or the
// demo; at least one of them, the key and the configuration in files the
// pod can read.
func (c *checker) mode(name string, pod *corev1.PodSpec, ct *corev1.Container) {
	where := fmt.Sprintf("Deployment %s container %s", name, ct.Name)
	demo := slices.Contains(ct.Args, "--demo")
	rawURL := c.apiURL(name, ct)
	configFile := lastFlag(ct.Args, "--config.file")
	c.expect(demo || rawURL != "" || configFile != "",
		"%s: watches nothing; needs --api.url (or DEPLOYMENT_SERVICE_URL), --config.file or --demo", where)
	c.expect(!(demo && rawURL != ""), "%s: --demo conflicts with the service URL", where)
	for _, e := range ct.Env {
		c.expect(!(e.Name == "DEPLOYMENT_SERVICE_API_KEY" && e.Value != ""), "%s: the API key must not be a literal env value", where)
	}
	if rawURL != "" {
		u, err := url.Parse(rawURL)
		c.expect(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil,
			"%s: the service URL %q is no http(s) base URL without credentials", where, rawURL)
		keyFile := lastFlag(ct.Args, "--api.key-file")
		if c.expect(path.IsAbs(keyFile), "%s: the service URL needs --api.key-file with an absolute path", where) {
			c.secretFile(where, pod, ct, keyFile)
		}
	}
	if configFile != "" {
		c.configFile = true
		if c.expect(path.IsAbs(configFile), "%s: --config.file needs an absolute path", where) {
			c.config(where, pod, ct, configFile)
		}
	}
}

// apiURL returns the base URL the container is given: --api.url, or
// DEPLOYMENT_SERVICE_URL from env or a ConfigMap.
func (c *checker) apiURL(name string, ct *corev1.Container) string {
	raw := lastFlag(ct.Args, "--api.url")
	for _, e := range ct.Env {
		if e.Name == "DEPLOYMENT_SERVICE_URL" && e.Value != "" && raw == "" {
			raw = e.Value
		}
	}
	for _, ef := range ct.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		cm := c.configMap(ef.ConfigMapRef.Name)
		c.expect(cm != nil, "Deployment %s: envFrom ConfigMap %s is not in the manifests", name, ef.ConfigMapRef.Name)
		if cm != nil && cm.Data["DEPLOYMENT_SERVICE_URL"] != "" && raw == "" {
			raw = cm.Data["DEPLOYMENT_SERVICE_URL"]
		}
	}
	return raw
}

// moduleConfig is the part of the exporter's --config.file this check reads.
type moduleConfig struct {
	Modules map[string]struct {
		Targets          []string `json:"targets"`
		AllowAnyTarget   bool     `json:"allow_any_target"`
		HTTPClientConfig struct {
			Authorization *struct {
				Type            string `json:"type"`
				Credentials     string `json:"credentials"`
				CredentialsFile string `json:"credentials_file"`
				CredentialsRef  string `json:"credentials_ref"`
			} `json:"authorization"`
			HTTPHeaders map[string]struct {
				Secrets []string `json:"secrets"`
				Files   []string `json:"files"`
			} `json:"http_headers"`
		} `json:"http_client_config"`
	} `json:"modules"`
}

// module is what the checks of /probe scrapes need to know of a module.
type module struct {
	targets []targetPattern
	// anyTarget: /probe may use it with any target (allow_any_target, or
	// no targets and no credentials).
	anyTarget bool
}

// allows reports whether /probe may use the module with target.
func (m *module) allows(target targetPattern) bool {
	return m.anyTarget || slices.ContainsFunc(m.targets, func(p targetPattern) bool { return p.matches(target) })
}

// concrete returns the targets that /sd hands Prometheus for the module.
func (m *module) concrete() []targetPattern {
	var out []targetPattern
	for _, p := range m.targets {
		if p.concrete() {
			out = append(out, p)
		}
	}
	return out
}

// config checks the --config.file: on a Secret volume and, when the Secret
// is in the manifests, a YAML file of modules whose keys are of type Token,
// in key files on Secret volumes too, and go only to the targets they list.
func (c *checker) config(where string, pod *corev1.PodSpec, ct *corev1.Container, file string) {
	content, ok := c.secretFile(where, pod, ct, file)
	if !ok || content == nil {
		return // refused already, or a Secret made by the user
	}
	var cfg moduleConfig
	if err := yaml.Unmarshal(content, &cfg); err != nil {
		c.expect(false, "%s: %s: %v", where, file, err)
		return
	}
	c.expect(len(cfg.Modules) > 0, "%s: %s has no modules", where, file)
	c.modules = map[string]*module{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Modules)) {
		mc := cfg.Modules[name]
		m := &module{anyTarget: mc.AllowAnyTarget}
		c.modules[name] = m
		for _, raw := range mc.Targets {
			p, err := parseTarget(raw)
			if c.expect(err == nil, "%s: module %s: targets entry %q: %v", where, name, raw, err) {
				m.targets = append(m.targets, p)
			}
		}
		auth := mc.HTTPClientConfig.Authorization
		credentials := auth != nil && (auth.Credentials != "" || auth.CredentialsFile != "" || auth.CredentialsRef != "")
		for _, h := range mc.HTTPClientConfig.HTTPHeaders {
			credentials = credentials || len(h.Secrets) > 0 || len(h.Files) > 0
		}
		c.expect(!credentials || len(mc.Targets) > 0 || mc.AllowAnyTarget,
			"%s: module %s carries credentials but lists no targets (the exporter refuses it): its key would go wherever /probe is told", where, name)
		m.anyTarget = m.anyTarget || len(mc.Targets) == 0 && !credentials
		if auth == nil {
			continue // a module without a key; the service may not need one
		}
		if !c.expect(auth.Type == "Token" && (auth.Credentials != "" || auth.CredentialsFile != ""),
			"%s: module %s needs http_client_config.authorization of type Token with credentials_file (the exporter refuses it otherwise)", where, name) {
			continue
		}
		if auth.CredentialsFile != "" {
			keyFile := auth.CredentialsFile
			if !path.IsAbs(keyFile) {
				keyFile = path.Join(path.Dir(file), keyFile)
			}
			c.secretFile(fmt.Sprintf("%s module %s", where, name), pod, ct, keyFile)
		}
	}
}

// secretFile checks that file lies on a Secret volume mounted without
// subPath (or the kubelet never updates it) and, when the Secret is in the
// manifests, that it holds the key behind the file. It returns the file's
// content when the manifests hold it, and whether the checks passed.
func (c *checker) secretFile(where string, pod *corev1.PodSpec, ct *corev1.Container, file string) ([]byte, bool) {
	for _, m := range ct.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if !c.expect(m.SubPath == "" && m.SubPathExpr == "", "%s: the mount of %s must not use subPath, or the kubelet never updates it", where, file) {
			return nil, false
		}
		vol := volume(pod, m.Name)
		if !c.expect(vol != nil && vol.Secret != nil, "%s: %s is not on a Secret volume", where, file) {
			return nil, false
		}
		key := secretKeyForPath(vol.Secret, rel)
		s := c.secret(vol.Secret.SecretName)
		if s == nil && c.externalSecrets.has(vol.Secret.SecretName) {
			c.passed++ // the user's Secret: its keys cannot be seen here
			return nil, true
		}
		if !c.expect(s != nil && key != "" && hasKey(s, key), "%s: %s needs key %q in Secret %s", where, file, key, vol.Secret.SecretName) {
			return nil, false
		}
		if v, ok := s.StringData[key]; ok {
			return []byte(v), true
		}
		return s.Data[key], true
	}
	c.expect(false, "%s: no volume is mounted where %s lies", where, file)
	return nil, false
}

// lastFlag returns the value of the last --name=value argument, as kingpin
// takes the last one.
func lastFlag(args []string, name string) string {
	var v string
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		}
	}
	return v
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
