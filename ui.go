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

	"github.com/deployment-service/deployment_service_exporter/collector"
)

// pageCSS keeps the pages readable on a phone: below 48rem each table cell stacks, named by its data-label.
const pageCSS = `body{font-family:system-ui,sans-serif;margin:0 auto;max-width:80rem;padding:1rem;line-height:1.4;overflow-wrap:break-word}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
.wrap{overflow-wrap:anywhere}.url{overflow-wrap:normal;word-break:normal}.num{text-align:right}
.demo{background:#ddf4ff;border:1px solid #54aeff;padding:.4rem .6rem}
.ok{color:#1a7f37}.partial,.slow{color:#9a6700}.failed,.bad{color:#cf222e}
td.ok,td.slow,td.partial,td.failed,span.slow{font-weight:600}
tr.slow,tr.partial{background:#fff8c5;color:inherit}tr.failed{background:#ffebe9;color:inherit}tr.notsent{color:#555}
pre.excerpt{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;margin:.2rem 0;padding:.2rem .4rem;font-size:.85rem}
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

// securityHeaders go with every answer of the exporter's own: its pages run no script and show in no frame.
var securityHeaders = [...][2]string{
	{"Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
}

// withSecurityHeaders sends securityHeaders with h's answers, but those --web.config.file has set.
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
	"duration":  func(d time.Duration) string { return d.Round(time.Microsecond).String() },
	"breakable": breakableURL,
	"phases":    collector.PhasesText,
	"utc":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"page":      func(r *collector.PollRecord) string { return "target?" + collector.TargetQuery(r.Target, r.Module) },
	"count": func(c collector.Count) string {
		if !c.Known {
			return "—"
		}
		return strconv.FormatInt(c.Value, 10)
	},
	"moduleName": collector.ModuleName,
	"status":     collector.StatusText,
	"notSent":    collector.NotSent,
	"slow":       collector.Slow,
	"view":       func(polls string, r *collector.PollRecord) pollView { return pollView{r, polls} },
}

// pollView is a poll as a page shows it; Polls is the way from that page to the poll pages.
type pollView struct {
	*collector.PollRecord
	Polls string
}

var pageTemplates = template.Must(template.New("").Funcs(pageFuncs).Parse(`{{define "head"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.}}</title><style>` + pageCSS + `</style></head>
<body>
{{end}}

{{define "landing"}}{{template "head" "Deployment Service Exporter"}}<h1>Deployment Service Exporter</h1>
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
<tbody>{{range $t := .Targets}}<tr class="{{.Latest.State}}"><td data-label="Target" class="url"><a href="{{page .Latest}}">{{breakable .Latest.Target}}</a></td><td data-label="Module">{{moduleName .Latest.Module}}</td>
<td data-label="State" class="{{.Latest.State}}">{{.StateText}}</td>
<td data-label="Projects" class="num">{{count .Latest.Projects}}</td><td data-label="Locations" class="num">{{count .Latest.Locations}}</td>
<td data-label="Last poll"><a href="polls/{{.Latest.ID}}">{{.Ago .Latest.Start}} ago</a></td>
<td data-label="Failing since" class="wrap">{{with .Failing}}{{utc .Start}} UTC ({{$t.Ago .Start}} ago), <a href="polls/{{.ID}}">poll {{.ID}}</a>: {{.Summary}}{{else}}—{{end}}</td>
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
{{end}}

{{define "target"}}{{template "head" "Target"}}<p><a href="./">Back</a></p>
{{with .Target}}<h1>Target <span class="url">{{breakable .Latest.Target}}</span>, module {{moduleName .Latest.Module}}</h1>
{{if $.Demo}}<p class="demo" id="demo">Demo mode: this is the embedded sample service, with generated data and a generated key.</p>{{end}}
<p>State: <span class="{{.Latest.State}}" id="state">{{.StateText}}</span>. Projects {{count .Latest.Projects}}, locations {{count .Latest.Locations}}; last poll {{.Ago .Latest.Start}} ago.</p>
{{with .Failing}}<p id="failing">Failing since {{utc .Start}} UTC ({{$.Target.Ago .Start}} ago): {{.Summary}}</p>{{end}}
{{if ne .HeldOffText "—"}}<p id="heldoff">Held off until {{.HeldOffText}}.</p>{{end}}
{{range .Sections}}<h2>{{.Title}}: <a href="polls/{{.Poll.ID}}">poll {{.Poll.ID}}</a></h2>
{{template "poll" view "polls/" .Poll}}{{end}}{{end}}
</body></html>
{{end}}

{{define "pollpage"}}{{template "head" (printf "Poll %d" .Poll.ID)}}<p><a href="../">Back</a> · <a href="../{{page .Poll}}">Target</a></p>
<h1>Poll {{.Poll.ID}}</h1>
{{if .Demo}}<p class="demo" id="demo">Demo mode: this poll read the embedded sample service, with generated data and a generated key.</p>{{end}}
{{template "poll" view "" .Poll}}
</body></html>
{{end}}

{{define "poll"}}<section id="poll-{{.ID}}"><p><span class="url">{{breakable .Target}}</span>, module {{moduleName .Module}}; started {{.Start.UTC.Format "2006-01-02 15:04:05.000"}} UTC, took {{duration .Duration}}.
Result: <span class="{{.State}} result">{{.Summary}}</span></p>
{{with .KeyRefused}}<p class="bad">{{.}}</p>{{end}}
{{if .SentNothing}}<p class="holdoff">This poll sent nothing: the service had asked to hold off (status {{.HoldOffStatus}}) until {{if .HeldOffUntil.IsZero}}an unknown time{{else}}{{utc .HeldOffUntil}} UTC{{end}}.
{{- if .HoldOffPollID}} <a href="{{.Polls}}{{.HoldOffPollID}}">Poll {{.HoldOffPollID}}</a> met that answer.{{end}}</p>
{{else if not .HeldOffUntil.IsZero}}<p class="holdoff">The service asked to hold off: no requests until {{utc .HeldOffUntil}} UTC.</p>{{end}}
{{if .Requests}}<table class="stack requests">
<thead><tr><th>Endpoint</th><th>Page</th><th>Method</th><th>URL</th><th>Status</th><th class="num">Bytes</th><th>Duration</th><th>Answer</th></tr></thead>
<tbody>{{range .Requests}}{{if .Note}}<tr{{if .NoteFailed}} class="failed"{{end}}><td data-label="Endpoint">{{.Endpoint}}</td><td data-label="Page">{{.Page}}</td><td colspan="6" data-label="Pagination" class="wrap">{{if .NoteFailed}}<span class="bad">pagination</span>: {{.Note}}{{else}}<em>{{.Note}}</em>{{end}}</td></tr>
{{else if notSent .}}<tr class="notsent"><td data-label="Endpoint">{{.Endpoint}}</td><td data-label="Page">{{if .Page}}{{.Page}}{{end}}</td><td data-label="Method">{{.Method}}</td><td data-label="URL" class="url">{{breakable .URL}}</td><td data-label="Status">not sent</td><td colspan="3" data-label="Answer" class="wrap">{{$.NotSentText .}}</td></tr>
{{else}}<tr{{if .Error}} class="failed"{{else if slow .}} class="slow"{{end}}><td data-label="Endpoint">{{.Endpoint}}</td><td data-label="Page">{{if .Page}}{{.Page}}{{end}}</td><td data-label="Method">{{.Method}}</td><td data-label="URL" class="url">{{breakable .URL}}</td><td data-label="Status">{{status .}}</td><td data-label="Bytes" class="num">{{.Bytes}}</td><td data-label="Duration">{{duration .Duration}}{{if slow .}} <span class="slow">slow</span>{{end}}{{with phases .Phases}}<div class="phases">{{.}}</div>{{end}}</td>
<td data-label="Answer" class="wrap">{{if .Error}}<span class="bad">{{.Reason}}</span>: {{.Error}}{{end}}
{{- if .ContentType}}<div>Content-Type: {{.ContentType}}</div>{{end}}
{{- if .Location}}<div>Location: <span class="url">{{breakable .Location}}</span></div>{{end}}
{{- if .WWWAuthenticate}}<div>WWW-Authenticate: {{.WWWAuthenticate}}</div>{{end}}
{{- if or .RetryAfter (not .HoldOffUntil.IsZero)}}<div>Retry-After: {{or .RetryAfter "(none)"}}{{if not .HoldOffUntil.IsZero}}; held off until {{utc .HoldOffUntil}} UTC{{end}}</div>{{end}}
{{- if .BodyExcerpt}}<pre class="excerpt">{{.BodyExcerpt}}</pre>{{end}}</td></tr>
{{end}}{{end}}</tbody></table>{{end}}
{{if .Dropped}}<p>{{.Dropped}} more requests were not kept.</p>{{end}}</section>
{{end}}`))

// urlBreaks lets an escaped URL break only after "/", "?" and "&" and before "#", never inside a host or a word;
// the quotes' escapes come first so that their "#" stays whole. breakableURL shows invalid bytes as U+FFFD.
var urlBreaks = strings.NewReplacer("&#34;", "&#34;", "&#39;", "&#39;",
	"&amp;", "&amp;<wbr/>", "/", "/<wbr/>", "?", "?<wbr/>", "#", "<wbr/>#")

func breakableURL(u string) template.HTML {
	return template.HTML(urlBreaks.Replace(template.HTMLEscapeString(string([]rune(u))))) //nolint:gosec // escaped, only <wbr/> added
}

// ago renders how long ago something happened, to the second.
func ago(d time.Duration) string { return max(d, 0).Round(time.Second).String() }

// pages serves the landing page, a page per target and one per poll kept.
type pages struct {
	metricsPath, singleTarget string
	demo                      string // the sample service's URL with --demo
	modules                   func() []string
	recent                    *collector.PollLog
	logger                    *slog.Logger
}

// targetRow is a target at a glance, times relative to when the page is served.
type targetRow struct {
	collector.TargetState
	now                    time.Time
	StateText, HeldOffText string
}

func newTargetRow(st collector.TargetState, now time.Time) targetRow {
	last := st.Latest
	r := targetRow{
		TargetState: st, now: now, HeldOffText: "—",
		StateText: map[collector.PollState]string{
			collector.PollOK: "up", collector.PollSlow: "up, " + last.Summary, collector.PollPartial: "up, some details failing", collector.PollFailed: "down",
		}[last.State],
	}
	switch {
	case last.HeldOffUntil.After(now):
		r.HeldOffText = fmt.Sprintf("%s UTC (%s from now)", last.HeldOffUntil.UTC().Format("2006-01-02 15:04:05"), ago(last.HeldOffUntil.Sub(now)))
	case last.HeldOff && last.HeldOffUntil.IsZero():
		r.HeldOffText = "held off (end not known)"
	}
	return r
}

// Ago renders how long before the page t was.
func (r targetRow) Ago(t time.Time) string { return ago(r.now.Sub(t)) }

// section is a poll on a target's page, with what it is to the target.
type section struct {
	Title string
	Poll  *collector.PollRecord
}

// Sections lists the polls a target's page shows, each once.
func (r targetRow) Sections() []section {
	var out []section
	for _, s := range []section{{"Latest poll", r.Latest}, {"first failing poll", r.Failing}, {"the poll that started the hold-off", r.HoldOff}} {
		switch i := slices.IndexFunc(out, func(o section) bool { return s.Poll != nil && o.Poll.ID == s.Poll.ID }); {
		case s.Poll == nil:
		case i >= 0:
			out[i].Title += ", " + s.Title
		default:
			out = append(out, section{strings.ToUpper(s.Title[:1]) + s.Title[1:], s.Poll})
		}
	}
	return out
}

func (p *pages) render(w http.ResponseWriter, name string, data map[string]any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplates.ExecuteTemplate(w, name, data); err != nil {
		p.logger.Error("Cannot render a page", "page", name, "err", err)
	}
}

func (p *pages) landing(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	var targets []targetRow
	for _, st := range p.recent.Targets() {
		targets = append(targets, newTargetRow(st, now))
	}
	modules, def := p.modules(), "default" // the module /probe uses when none is named, else the first
	if len(modules) > 0 && !slices.Contains(modules, def) {
		def = modules[0]
	}
	p.render(w, "landing", map[string]any{
		"Version": version.Version, "MetricsPath": p.metricsPath, "SingleTarget": p.singleTarget, "Demo": p.demo,
		"Modules": modules, "DefaultModule": def, "Targets": targets, "Polls": p.recent.Recent(),
	})
}

// target serves /target?target=<URL>&module=<m>, no module for /metrics; it polls nothing.
func (p *pages) target(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st, ok := p.recent.Target(q.Get("target"), q.Get("module"))
	if !ok {
		http.Error(w, "no poll of this target and module is kept: it has not been polled since the exporter started, or not lately", http.StatusNotFound)
		return
	}
	p.render(w, "target", map[string]any{
		"Target": newTargetRow(st, time.Now()), "Demo": p.demo != "" && st.Latest.Target == p.singleTarget && st.Latest.Module == "",
	})
}

func (p *pages) poll(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "poll id must be a number", http.StatusBadRequest)
		return
	}
	rec, ok := p.recent.Get(id)
	if !ok {
		http.Error(w, "no such poll: each target keeps its latest poll and, while it fails, its first failing poll and the one that started a hold-off", http.StatusNotFound)
		return
	}
	if r.URL.Query().Get("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = rec.WriteText(w)
		return
	}
	p.render(w, "pollpage", map[string]any{
		"Poll": rec, "Demo": p.demo != "" && rec.Target == p.singleTarget,
	})
}
