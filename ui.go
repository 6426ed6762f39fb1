package main

import (
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/version"

	"github.com/deployment-service/deployment_service_exporter/collector"
)

// pageCSS keeps the pages readable on a phone without any external asset.
const pageCSS = `body{font-family:system-ui,sans-serif;margin:0 auto;max-width:70rem;padding:1rem;line-height:1.4}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
td.url{word-break:break-all}.ok{color:#1a7f37}.bad{color:#cf222e}
code{background:#f4f4f4;padding:0 .2rem}form input{margin:.2rem 0;max-width:100%}`

var pageTemplates = template.Must(template.New("landing").Funcs(template.FuncMap{"duration": roundDuration}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Deployment Service Exporter</title><style>{{.CSS}}</style></head>
<body>
<h1>Deployment Service Exporter</h1>
<p>Prometheus exporter for a deployment service's HTTP JSON API. Version {{.Version}}.</p>
<ul>
<li><a href="{{.MetricsPath}}">Metrics</a> ({{if .SingleTarget}}polls {{.SingleTarget}}{{else}}exporter metrics only: no --api.url{{end}})</li>
<li><a href="-/healthy">Health</a> and <a href="-/ready">readiness</a></li>
</ul>
{{if .Modules}}<h2>Probe a service</h2>
<form action="probe" method="get">
<label>Target <input name="target" type="url" placeholder="https://deploy.example.com" size="40" required="required"/></label>
<label>Module <select name="module">{{range .Modules}}<option>{{.}}</option>{{end}}</select></label>
<label><input type="checkbox" name="debug" value="true"/> debug view</label>
<input type="submit" value="Probe"/>
</form>{{end}}
<h2>Recent polls</h2>
{{if .Polls}}<div class="scroll"><table>
<tr><th>Time (UTC)</th><th>Target</th><th>Module</th><th>Result</th><th>Duration</th><th></th></tr>
{{range .Polls}}<tr><td>{{.Start.UTC.Format "2006-01-02 15:04:05"}}</td><td class="url">{{.Target}}</td><td>{{if .Module}}{{.Module}}{{else}}(flags){{end}}</td>
<td class="{{if .Up}}ok{{else}}bad{{end}}">{{.Summary}}</td><td>{{duration .Duration}}</td><td><a href="polls/{{.ID}}">details</a></td></tr>
{{end}}</table></div>{{else}}<p>No polls yet: scrape <a href="{{.MetricsPath}}">{{.MetricsPath}}</a> or probe a target.</p>{{end}}
</body></html>
`))

var pollTemplate = template.Must(template.New("poll").Funcs(template.FuncMap{"duration": roundDuration}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Poll {{.Poll.ID}}</title><style>{{.CSS}}</style></head>
<body>
<p><a href="../">Back</a></p>
<h1>Poll {{.Poll.ID}}</h1>
<p>{{.Poll.Target}}, module {{if .Poll.Module}}{{.Poll.Module}}{{else}}(flags){{end}}; started {{.Poll.Start.UTC.Format "2006-01-02 15:04:05.000"}} UTC, took {{duration .Poll.Duration}}.
Result: <span class="{{if .Poll.Up}}ok{{else}}bad{{end}}">{{.Poll.Summary}}</span></p>
<div class="scroll"><table>
<tr><th>Endpoint</th><th>Page</th><th>Method</th><th>URL</th><th>Status</th><th>Bytes</th><th>Duration</th><th>Error</th></tr>
{{range .Poll.Requests}}{{if .Note}}<tr><td>{{.Endpoint}}</td><td>{{.Page}}</td><td colspan="6"><em>{{.Note}}</em></td></tr>
{{else}}<tr><td>{{.Endpoint}}</td><td>{{if .Page}}{{.Page}}{{end}}</td><td>{{.Method}}</td><td class="url">{{.URL}}</td><td>{{.Status}}</td><td>{{.Bytes}}</td><td>{{duration .Duration}}</td>
<td>{{if .Error}}<span class="bad">{{.Reason}}</span>: {{.Error}}{{end}}</td></tr>
{{end}}{{end}}</table></div>
{{if .Poll.Dropped}}<p>{{.Poll.Dropped}} more requests were not kept.</p>{{end}}
</body></html>
`))

func roundDuration(d time.Duration) string { return d.Round(time.Microsecond).String() }

// pages serves the landing page with the recent polls, and one page per
// poll.
type pages struct {
	metricsPath  string
	singleTarget string
	modules      func() []string
	recent       *collector.PollLog
	logger       *slog.Logger
}

func (p *pages) landing(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	err := pageTemplates.Execute(w, map[string]any{
		"CSS":          template.CSS(pageCSS),
		"Version":      version.Version,
		"MetricsPath":  p.metricsPath,
		"SingleTarget": p.singleTarget,
		"Modules":      p.modules(),
		"Polls":        p.recent.Recent(),
	})
	if err != nil {
		p.logger.Error("Cannot render the landing page", "err", err)
	}
}

func (p *pages) poll(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "poll id must be a number", http.StatusBadRequest)
		return
	}
	rec, ok := p.recent.Get(id)
	if !ok {
		http.Error(w, "no such poll: only the most recent polls are kept", http.StatusNotFound)
		return
	}
	if r.URL.Query().Get("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = rec.WriteText(w)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pollTemplate.Execute(w, map[string]any{"CSS": template.CSS(pageCSS), "Poll": rec}); err != nil {
		p.logger.Error("Cannot render a poll page", "err", err)
	}
}
