package main

import (
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/version"

	"github.com/deployment-service/deployment_service_exporter/client"
	"github.com/deployment-service/deployment_service_exporter/collector"
)

// pageCSS keeps the pages readable on a phone without any external asset.
// Below 48rem the tables stack: each row becomes a block and each cell
// shows its column's name from data-label, so nothing is off-screen and a
// URL gets the whole width instead of one character per line.
const pageCSS = `body{font-family:system-ui,sans-serif;margin:0 auto;max-width:80rem;padding:1rem;line-height:1.4;overflow-wrap:break-word}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
.wrap{overflow-wrap:anywhere}.url{overflow-wrap:normal;word-break:normal}.num{text-align:right}
.demo{background:#ddf4ff;border:1px solid #54aeff;padding:.4rem .6rem}
.ok{color:#1a7f37}.partial{color:#9a6700}.failed,.bad{color:#cf222e}
td.ok,td.partial,td.failed{font-weight:600}
tr.partial{background:#fff8c5;color:inherit}tr.failed{background:#ffebe9;color:inherit}
pre.excerpt{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;margin:.2rem 0;padding:.2rem .4rem;font-size:.85rem}
code{background:#f4f4f4;padding:0 .2rem}
form label{display:inline-block;margin:.2rem 1rem .2rem 0;max-width:100%}
form input[type=url]{box-sizing:border-box;width:28rem;max-width:100%}
@media (max-width:48rem){
body{padding:.5rem}
table.stack thead{display:none}
table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:auto}
table.stack tr{border-bottom:2px solid #aaa;padding:.3rem 0}
table.stack td{border:0;padding:.1rem .3rem;text-align:left}
table.stack td:empty{display:none}
table.stack td[data-label]::before{content:attr(data-label) ": ";font-weight:400;color:#555}
form label{display:block}
.url{overflow-wrap:anywhere}
}`

// securityHeaders go with every answer of the exporter's own: its pages
// run no script and show in no frame, and no browser reads an answer as
// another type than it says.
var securityHeaders = [...][2]string{
	{"Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
}

// withSecurityHeaders sends securityHeaders with h's answers, except those
// that --web.config.file's http_server_config.headers has set already.
func withSecurityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, kv := range securityHeaders {
			if w.Header().Get(kv[0]) == "" {
				w.Header().Set(kv[0], kv[1])
			}
		}
		h.ServeHTTP(w, r)
	})
}

var pageFuncs = template.FuncMap{
	"duration":   roundDuration,
	"breakable":  breakableURL,
	"phases":     phasesText,
	"utc":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"moduleName": collector.ModuleName,
}

var pageTemplates = template.Must(template.New("landing").Funcs(pageFuncs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Deployment Service Exporter</title><style>{{.CSS}}</style></head>
<body>
<h1>Deployment Service Exporter</h1>
{{if .Demo}}<p class="demo" id="demo">Demo mode: these pages show the embedded sample service (<span class="url">{{breakable .Demo}}</span>), with generated data and a generated key, not a service of yours.</p>{{end}}
<p>Prometheus exporter for a deployment service's HTTP JSON API. Version {{.Version}}.</p>
<ul>
<li><a href="{{.MetricsPath}}">Metrics</a> ({{if .SingleTarget}}polls <span class="url">{{breakable .SingleTarget}}</span>{{else}}exporter metrics only: no --api.url{{end}})</li>
<li><a href="-/healthy">Health</a> and <a href="-/ready">readiness</a></li>
{{if .Modules}}<li><a href="sd">Service discovery</a> (the modules' listed targets, for Prometheus' http_sd_configs)</li>{{end}}
</ul>
<h2>Targets</h2>
{{if .Targets}}<table class="stack" id="targets">
<thead><tr><th>Target</th><th>Module</th><th>State</th><th class="num">Projects</th><th class="num">Locations</th><th>Last poll</th><th>Failing since</th><th>Held off until</th></tr></thead>
<tbody>{{range .Targets}}<tr class="{{.State}}"><td data-label="Target" class="url">{{breakable .Target}}</td><td data-label="Module">{{moduleName .Module}}</td>
<td data-label="State" class="{{.State}}">{{.StateText}}</td>
<td data-label="Projects" class="num">{{.ProjectsText}}</td><td data-label="Locations" class="num">{{.LocationsText}}</td>
<td data-label="Last poll">{{if .LastKept}}<a href="polls/{{.LastID}}">{{.Age}} ago</a>{{else}}{{.Age}} ago{{end}}</td>
<td data-label="Failing since" class="wrap">{{if .FailingID}}{{utc .FailingSince}} UTC ({{.FailingFor}} ago){{if .FailingKept}}, <a href="polls/{{.FailingID}}">poll {{.FailingID}}</a>{{end}}: {{.FailingSummary}}{{else}}—{{end}}</td>
<td data-label="Held off until">{{.HeldOffText}}</td></tr>
{{end}}</tbody></table>{{else}}<p>No target polled yet.</p>{{end}}
{{if .Modules}}<h2>Probe a service</h2>
<form action="probe" method="get">
<label>Target <input name="target" type="url" placeholder="https://deploy.example.com" required="required"/></label>
<label>Module <select name="module">{{range .Modules}}<option{{if eq . $.DefaultModule}} selected="selected"{{end}}>{{.}}</option>{{end}}</select></label>
<label><input type="checkbox" name="debug" value="true"/> debug view</label>
<input type="submit" value="Probe"/>
</form>{{end}}
<h2>Recent polls</h2>
{{if .Polls}}<table class="stack" id="polls">
<thead><tr><th>Time (UTC)</th><th>Target</th><th>Module</th><th>Result</th><th>Duration</th><th></th></tr></thead>
<tbody>{{range .Polls}}<tr><td data-label="Time (UTC)">{{utc .Start}}</td><td data-label="Target" class="url">{{breakable .Target}}</td><td data-label="Module">{{moduleName .Module}}</td>
<td data-label="Result" class="{{.State}} wrap">{{.Summary}}</td><td data-label="Duration">{{duration .Duration}}</td><td data-label="Poll"><a href="polls/{{.ID}}">details</a></td></tr>
{{end}}</tbody></table>{{else}}<p>No polls yet: scrape <a href="{{.MetricsPath}}">{{.MetricsPath}}</a> or probe a target.</p>{{end}}
</body></html>
`))

var pollTemplate = template.Must(template.New("poll").Funcs(pageFuncs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Poll {{.Poll.ID}}</title><style>{{.CSS}}</style></head>
<body>
<p><a href="../">Back</a></p>
<h1>Poll {{.Poll.ID}}</h1>
{{if .Demo}}<p class="demo" id="demo">Demo mode: this poll read the embedded sample service, with generated data and a generated key.</p>{{end}}
<p><span class="url">{{breakable .Poll.Target}}</span>, module {{moduleName .Poll.Module}}; started {{.Poll.Start.UTC.Format "2006-01-02 15:04:05.000"}} UTC, took {{duration .Poll.Duration}}.
Result: <span class="{{.Poll.State}}" id="result">{{.Poll.Summary}}</span></p>
{{if .Poll.SentNothing}}<p id="holdoff">This poll sent nothing: the service had asked to hold off (status {{.Poll.HoldOffStatus}}) until {{if .Poll.HeldOffUntil.IsZero}}an unknown time{{else}}{{utc .Poll.HeldOffUntil}} UTC{{end}}.
{{- if .Poll.HoldOffPollID}} <a href="{{.Poll.HoldOffPollID}}">Poll {{.Poll.HoldOffPollID}}</a> met that answer.{{end}}</p>
{{else if not .Poll.HeldOffUntil.IsZero}}<p id="holdoff">The service asked to hold off: no requests until {{utc .Poll.HeldOffUntil}} UTC.</p>{{end}}
{{if .Poll.Requests}}<table class="stack" id="requests">
<thead><tr><th>Endpoint</th><th>Page</th><th>Method</th><th>URL</th><th>Status</th><th class="num">Bytes</th><th>Duration</th><th>Answer</th></tr></thead>
<tbody>{{range .Poll.Requests}}{{if .Note}}<tr{{if .NoteFailed}} class="failed"{{end}}><td data-label="Endpoint">{{.Endpoint}}</td><td data-label="Page">{{.Page}}</td><td colspan="6" data-label="Pagination" class="wrap">{{if .NoteFailed}}<span class="bad">pagination</span>: {{.Note}}{{else}}<em>{{.Note}}</em>{{end}}</td></tr>
{{else}}<tr{{if .Error}} class="failed"{{end}}><td data-label="Endpoint">{{.Endpoint}}</td><td data-label="Page">{{if .Page}}{{.Page}}{{end}}</td><td data-label="Method">{{.Method}}</td><td data-label="URL" class="url">{{breakable .URL}}</td><td data-label="Status">{{.Status}}</td><td data-label="Bytes" class="num">{{.Bytes}}</td><td data-label="Duration">{{duration .Duration}}{{with phases .Phases}}<div class="phases">{{.}}</div>{{end}}</td>
<td data-label="Answer" class="wrap">{{if .Error}}<span class="bad">{{.Reason}}</span>: {{.Error}}{{end}}
{{- if .ContentType}}<div>Content-Type: {{.ContentType}}</div>{{end}}
{{- if .Location}}<div>Location: <span class="url">{{breakable .Location}}</span></div>{{end}}
{{- if .WWWAuthenticate}}<div>WWW-Authenticate: {{.WWWAuthenticate}}</div>{{end}}
{{- if or .RetryAfter (not .HoldOffUntil.IsZero)}}<div>Retry-After: {{or .RetryAfter "(none)"}}{{if not .HoldOffUntil.IsZero}}; held off until {{utc .HoldOffUntil}} UTC{{end}}</div>{{end}}
{{- if .BodyExcerpt}}<pre class="excerpt">{{.BodyExcerpt}}</pre>{{end}}</td></tr>
{{end}}{{end}}</tbody></table>{{end}}
{{if .Poll.Dropped}}<p>{{.Poll.Dropped}} more requests were not kept.</p>{{end}}
</body></html>
`))

func roundDuration(d time.Duration) string { return d.Round(time.Microsecond).String() }

// breakableURL lets a URL break only after "/", "?" and "&" (and before
// "#"), never inside a host, a port or a word: the page's CSS keeps it
// whole otherwise on a wide screen.
func breakableURL(u string) template.HTML {
	var b strings.Builder
	for _, r := range u {
		if r == '#' {
			b.WriteString("<wbr/>")
		}
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '/' || r == '?' || r == '&' {
			b.WriteString("<wbr/>")
		}
	}
	return template.HTML(b.String()) //nolint:gosec // every rune is escaped; only <wbr/> is added
}

// phasesText renders the phases of an exchange, "" when there are none.
func phasesText(p client.Phases) string { return collector.PhasesText(p) }

// ago renders how long ago something happened, to the precision a person
// reading a status page needs.
func ago(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// pages serves the landing page with the watched targets and the recent
// polls, and one page per poll.
type pages struct {
	metricsPath  string
	singleTarget string
	// demo is the sample service's URL with --demo, empty otherwise.
	demo    string
	modules func() []string
	recent  *collector.PollLog
	logger  *slog.Logger
	// now is the clock for ages; nil means time.Now.
	now func() time.Time
}

// targetRow is one line of the targets table, with the times rendered
// relative to the moment the page is served.
type targetRow struct {
	collector.TargetState
	StateText, ProjectsText, LocationsText string
	Age, FailingFor, HeldOffText           string
}

func newTargetRow(st collector.TargetState, now time.Time) targetRow {
	r := targetRow{
		TargetState: st, Age: ago(now.Sub(st.LastStart)),
		ProjectsText: countText(st.Projects), LocationsText: countText(st.Locations),
		HeldOffText: "—",
	}
	switch st.State {
	case collector.PollOK:
		r.StateText = "up"
	case collector.PollPartial:
		r.StateText = "up, some details failing"
	default:
		r.StateText = "down"
	}
	if st.FailingID != 0 {
		r.FailingFor = ago(now.Sub(st.FailingSince))
	}
	switch {
	case st.HeldOffUntil.After(now):
		r.HeldOffText = fmt.Sprintf("%s UTC (%s from now)", st.HeldOffUntil.UTC().Format("2006-01-02 15:04:05"), ago(st.HeldOffUntil.Sub(now)))
	case st.HeldOff && st.HeldOffUntil.IsZero():
		r.HeldOffText = "held off (end not known)"
	}
	return r
}

func countText(c collector.Count) string {
	if !c.Known {
		return "—"
	}
	return strconv.FormatInt(c.Value, 10)
}

// defaultModule is the module the probe form preselects: the one /probe
// uses when none is named, else the first.
func defaultModule(modules []string) string {
	if slices.Contains(modules, "default") || len(modules) == 0 {
		return "default"
	}
	return modules[0]
}

func (p *pages) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *pages) landing(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	now := p.clock()
	var targets []targetRow
	for _, st := range p.recent.Targets() {
		targets = append(targets, newTargetRow(st, now))
	}
	modules := p.modules()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	err := pageTemplates.Execute(w, map[string]any{
		"CSS":           template.CSS(pageCSS),
		"Version":       version.Version,
		"MetricsPath":   p.metricsPath,
		"SingleTarget":  p.singleTarget,
		"Demo":          p.demo,
		"Modules":       modules,
		"DefaultModule": defaultModule(modules),
		"Targets":       targets,
		"Polls":         p.recent.Recent(),
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
	if err := pollTemplate.Execute(w, map[string]any{"CSS": template.CSS(pageCSS), "Poll": rec, "Demo": p.demo != "" && rec.Target == p.singleTarget}); err != nil {
		p.logger.Error("Cannot render a poll page", "err", err)
	}
}
