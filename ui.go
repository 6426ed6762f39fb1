package main

import (
	"bytes"
	_ "embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// pollView is a poll as a page shows it: Polls is the way from that page to the poll pages, Title what it is to a target.
type pollView struct {
	*collector.PollRecord
	Polls, Title string
}

//go:embed pages.html
var pagesHTML string

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"duration": func(d time.Duration) time.Duration { return d.Round(time.Microsecond) },
	"page":     func(r *collector.PollRecord) string { return collector.TargetPage(&url.URL{}, r.Target, r.Module) },
	"ago":      func(a, t time.Time) string { return max(a.Sub(t), 0).Round(time.Second).String() },
	"sections": sections,
}).Parse(pagesHTML))

// pages serves the landing page, a page per target and one per poll kept.
type pages struct {
	metricsPath, singleTarget string
	demo                      bool // with --demo, singleTarget is the sample service
	modules                   func() []string
	recent                    *collector.PollLog
	logger                    *slog.Logger
}

// sections lists the polls a target's page shows, each once.
func sections(st collector.TargetState) []pollView {
	var out []pollView
	for i, r := range []*collector.PollRecord{st.Latest, st.Failing, st.HoldOff} {
		title := [...]string{"latest poll", "first failing poll", "the poll that started the hold-off"}[i]
		if j := slices.IndexFunc(out, func(v pollView) bool { return r != nil && v.ID == r.ID }); j >= 0 {
			out[j].Title += ", " + title
		} else if r != nil {
			out = append(out, pollView{r, "polls/", strings.ToUpper(title[:1]) + title[1:]})
		}
	}
	return out
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

func (p *pages) poll(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64) // 0 when no number: ids start at 1
	rec, ok := p.recent.Get(id)
	switch {
	case !ok:
		http.Error(w, "no such poll: each target keeps its latest poll and, while it fails, its first failing poll and the one that started a hold-off", http.StatusNotFound)
	case r.URL.Query().Get("format") == "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = rec.WriteText(w)
	default:
		p.render(w, "pollpage", map[string]any{"Poll": pollView{PollRecord: rec}, "Demo": p.demo && rec.Target == p.singleTarget})
	}
}
