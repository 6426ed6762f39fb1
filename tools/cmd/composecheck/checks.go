package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/deployment-service/deployment_service_exporter/tools/internal/flagcheck"
)

// The services the stack must have, and where each reads its configuration.
const (
	exporterService     = "exporter"
	prometheusService   = "prometheus"
	alertmanagerService = "alertmanager"
	grafanaService      = "grafana"
	grafanaProvisioning = "/etc/grafana/provisioning"
)

type checker struct {
	project *types.Project
	flags   flagcheck.Set
	passed  int
	errs    []string
}

func (c *checker) expect(ok bool, format string, args ...any) {
	if ok {
		c.passed++
		return
	}
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *checker) run() {
	for _, name := range []string{exporterService, prometheusService, alertmanagerService, grafanaService} {
		_, ok := c.project.Services[name]
		c.expect(ok, "service %s is missing", name)
	}
	for name, s := range c.project.Services {
		c.mounts(name, s)
		c.ports(name, s)
		c.image(name, s)
	}
	if s, ok := c.project.Services[exporterService]; ok {
		c.exporter(s)
	}
	if s, ok := c.project.Services[prometheusService]; ok {
		c.prometheus(s)
	}
	if s, ok := c.project.Services[alertmanagerService]; ok {
		configFile := flagValue(s.Command, "--config.file", "/etc/alertmanager/alertmanager.yml")
		c.expect(c.hostPath(s, configFile) != "", "service %s: its config %s is not mounted from an existing file", s.Name, configFile)
	}
	if s, ok := c.project.Services[grafanaService]; ok {
		c.grafana(s)
	}
}

// mounts requires every bind mount's source to exist.
func (c *checker) mounts(name string, s types.ServiceConfig) {
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		_, err := os.Stat(v.Source)
		c.expect(err == nil, "service %s: bind mount source %s does not exist", name, v.Source)
	}
}

// ports requires published ports to listen on loopback only: the demo stack
// has anonymous Grafana access and no authentication anywhere.
func (c *checker) ports(name string, s types.ServiceConfig) {
	for _, p := range s.Ports {
		ip := net.ParseIP(p.HostIP)
		c.expect(ip != nil && ip.IsLoopback(), "service %s: port %d is published on %q, not on loopback", name, p.Target, p.HostIP)
	}
}

// image requires a pinned tag (or digest) for every image not built here.
func (c *checker) image(name string, s types.ServiceConfig) {
	if s.Build != nil {
		return
	}
	ref := s.Image
	lastSlash := strings.LastIndex(ref, "/")
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > lastSlash {
		tag = ref[i+1:]
	}
	c.expect(strings.Contains(ref, "@sha256:") || (tag != "" && tag != "latest"), "service %s: image %q is not pinned to a version", name, ref)
}

func (c *checker) exporter(s types.ServiceConfig) {
	if s.Build == nil {
		c.expect(false, "service %s: must be built from the repository's Dockerfile", s.Name)
	} else {
		dockerfile := s.Build.Dockerfile
		if !filepath.IsAbs(dockerfile) {
			dockerfile = filepath.Join(s.Build.Context, dockerfile)
		}
		_, errCtx := os.Stat(filepath.Join(s.Build.Context, "go.mod"))
		_, errDf := os.Stat(dockerfile)
		c.expect(errCtx == nil && errDf == nil, "service %s: build context %s must be the repository root with its Dockerfile (%s)", s.Name, s.Build.Context, dockerfile)
	}
	c.expect(len(s.Entrypoint) == 0, "service %s: entrypoint overrides the image's binary", s.Name)
	c.expect(slices.Contains(s.Command, "--demo"), "service %s: must run --demo (the stack has no real service)", s.Name)
	if c.flags != nil {
		errs := c.flags.Check(s.Command)
		c.expect(len(errs) == 0, "service %s: arguments the binary refuses: %v", s.Name, errs)
	}
}

type promConfig struct {
	RuleFiles     []string `json:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string         `json:"job_name"`
		StaticConfigs []staticConfig `json:"static_configs"`
	} `json:"scrape_configs"`
	Alerting struct {
		Alertmanagers []struct {
			StaticConfigs []staticConfig `json:"static_configs"`
		} `json:"alertmanagers"`
	} `json:"alerting"`
}

type staticConfig struct {
	Targets []string `json:"targets"`
}

// prometheus follows the config file and its rule_files into the container's
// file system, and checks that the targets are services of the stack.
func (c *checker) prometheus(s types.ServiceConfig) {
	configFile := flagValue(s.Command, "--config.file", "/etc/prometheus/prometheus.yml")
	host := c.hostPath(s, configFile)
	if host == "" {
		c.expect(false, "service %s: its config %s is not mounted from an existing file", s.Name, configFile)
		return
	}
	var cfg promConfig
	if err := readYAML(host, &cfg); err != nil {
		c.expect(false, "service %s: %v", s.Name, err)
		return
	}
	c.expect(len(cfg.RuleFiles) > 0, "service %s: %s loads no rule files", s.Name, host)
	for _, pattern := range cfg.RuleFiles {
		inContainer := pattern
		if !path.IsAbs(pattern) {
			inContainer = path.Join(path.Dir(configFile), pattern)
		}
		hostPattern := c.hostPath(s, path.Dir(inContainer))
		var matches []string
		if hostPattern != "" {
			matches, _ = filepath.Glob(filepath.Join(hostPattern, path.Base(inContainer)))
		}
		c.expect(len(matches) > 0, "service %s: rule_files %q (%s in the container) matches no mounted file", s.Name, pattern, inContainer)
	}
	var targets []string
	jobs := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		jobs[sc.JobName] = true
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for _, am := range cfg.Alerting.Alertmanagers {
		for _, st := range am.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	c.expect(jobs["deployment_service"], "service %s: no scrape job named deployment_service (the alert rules select it)", s.Name)
	for _, t := range targets {
		h, _, err := net.SplitHostPort(t)
		_, isService := c.project.Services[h]
		c.expect(err == nil && (isService || h == "localhost"), "service %s: target %q is not host:port of a service of the stack", s.Name, t)
	}
}

type grafanaDatasources struct {
	Datasources []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"datasources"`
}

type grafanaProviders struct {
	Providers []struct {
		Name    string `json:"name"`
		Options struct {
			Path string `json:"path"`
		} `json:"options"`
	} `json:"providers"`
}

// grafana checks the provisioning files it will find in the container, the
// dashboards they point to, and the home dashboard.
func (c *checker) grafana(s types.ServiceConfig) {
	prov := c.hostPath(s, grafanaProvisioning)
	if prov == "" {
		c.expect(false, "service %s: %s is not mounted", s.Name, grafanaProvisioning)
		return
	}
	dsFiles, _ := filepath.Glob(filepath.Join(prov, "datasources", "*.y*ml"))
	c.expect(len(dsFiles) > 0, "service %s: no datasource provisioning file in %s/datasources", s.Name, prov)
	for _, f := range dsFiles {
		var ds grafanaDatasources
		if err := readYAML(f, &ds); err != nil {
			c.expect(false, "service %s: %v", s.Name, err)
			continue
		}
		for _, d := range ds.Datasources {
			u, err := url.Parse(d.URL)
			_, isService := c.project.Services[u.Hostname()]
			c.expect(err == nil && isService, "service %s: datasource %s URL %q does not point at a service of the stack", s.Name, d.Name, d.URL)
		}
	}
	pFiles, _ := filepath.Glob(filepath.Join(prov, "dashboards", "*.y*ml"))
	c.expect(len(pFiles) > 0, "service %s: no dashboard provisioning file in %s/dashboards", s.Name, prov)
	for _, f := range pFiles {
		var ps grafanaProviders
		if err := readYAML(f, &ps); err != nil {
			c.expect(false, "service %s: %v", s.Name, err)
			continue
		}
		for _, p := range ps.Providers {
			dir := c.hostPath(s, p.Options.Path)
			var dashboards []string
			if dir != "" {
				dashboards, _ = filepath.Glob(filepath.Join(dir, "*.json"))
			}
			c.expect(len(dashboards) > 0, "service %s: dashboard provider %s path %s holds no mounted dashboard", s.Name, p.Name, p.Options.Path)
		}
	}
	if home := s.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != nil {
		c.expect(c.hostPath(s, *home) != "", "service %s: home dashboard %s is not mounted", s.Name, *home)
	}
}

// hostPath maps a path inside the service's container to the file of the
// bind mount that provides it, or "" when no bind mount does or the file
// does not exist.
func (c *checker) hostPath(s types.ServiceConfig, inContainer string) string {
	best := -1
	var host string
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		target := strings.TrimSuffix(v.Target, "/")
		rest, ok := strings.CutPrefix(path.Clean(inContainer), target)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) || len(target) <= best {
			continue
		}
		best, host = len(target), filepath.Join(v.Source, filepath.FromSlash(rest))
	}
	if host == "" {
		return ""
	}
	if _, err := os.Stat(host); err != nil {
		return ""
	}
	return host
}

// flagValue returns the value of --name=value in args, or def.
func flagValue(args []string, name, def string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return def
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
