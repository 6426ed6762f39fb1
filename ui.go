package main

import (
	"bytes"
	_ "embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/common/version"

	"github.com/deployment-service/deployment_service_exporter/collector"
)

// withSecurityHeaders adds the headers that keep pages from running scripts or showing in frames, unless --web.config.file set them.
func withSecurityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, kv := range [...][2]string{
			{"Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
			{"X-Content-Type-Options", "nosniff"},
			{"X-Frame-Options", "DENY"},
		} {
			if w.Header().Get(kv[0]) == "" {
				w.Header().Set(kv[0], kv[1])
			}
		}
		h.ServeHTTP(w, r)
	})
}

//go:embed pages.html
var pagesHTML string

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"utc":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"page": func(r *collector.PollRecord) string { return collector.TargetPage(&url.URL{}, r.Target, r.Module) },
	"ago":  func(a, t time.Time) string { return max(a.Sub(t), 0).Round(time.Second).String() },
}).Parse(pagesHTML))

// pages serves the landing page, a page per target and the text of each poll kept.
type pages struct {
	metricsPath, singleTarget string
	demo                      bool // with --demo, singleTarget is the sample service
	modules                   func() []string
	recent                    *collector.PollLog
	logger                    *slog.Logger
}

// render writes a page whole or not at all; a client that hangs up meanwhile is no error of ours.
func (p *pages) render(w http.ResponseWriter, name string, data map[string]any) {
	var b bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&b, name, data); err != nil {
		p.logger.Error("Cannot render a page", "page", name, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if _, err := w.Write(b.Bytes()); err != nil {
		p.logger.Debug("The client left before the page was sent", "page", name, "err", err)
	}
}

func (p *pages) landing(w http.ResponseWriter, _ *http.Request) {
	p.render(w, "landing", map[string]any{
		"Version": version.Version, "MetricsPath": p.metricsPath, "SingleTarget": p.singleTarget, "Demo": p.demo, "Now": time.Now(),
		"Modules": p.modules(), "Targets": p.recent.Targets(),
	})
}

// target serves /target?target=<URL>&module=<m>, no module for /metrics; it polls nothing.
func (p *pages) target(w http.ResponseWriter, r *http.Request) {
	st, ok := p.recent.Target(r.FormValue("target"), r.FormValue("module"))
	if !ok {
		http.Error(w, "no poll of this target and module is kept: it has not been polled since the exporter started, or not lately", http.StatusNotFound)
		return
	}
	p.render(w, "target", map[string]any{
		"Target": st, "Now": time.Now(), "Demo": p.demo && st.Latest.Target == p.singleTarget && st.Latest.Module == "",
	})
}

// poll serves /polls/<id> as text, as blackbox_exporter serves a probe's log; a target's page shows it in full.
func (p *pages) poll(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64) // 0 when no number: ids start at 1
	rec, ok := p.recent.Get(id)
	if !ok {
		http.Error(w, "no such poll: each target keeps its latest poll and, while it fails, its first failing poll and the one that started a hold-off", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_ = rec.WriteText(w)
}
