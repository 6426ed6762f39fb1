package main

// The reference in docs/ and the README stay true to the binary and to
// each other: every flag of --help is on the flags page, every metric
// family that /metrics and /probe serve is on the metrics page, every
// relative link of the Markdown files leads somewhere, and the README
// stays short enough to read and keeps the quick starts CI runs.

import (
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/deployment-service/deployment_service_exporter/sampleservice"
)

const (
	flagsPage   = "docs/flags.md"
	metricsPage = "docs/metrics.md"
	// readmeMaxLines is what "fits on a page" means (issue 17).
	readmeMaxLines = 200
)

// readDoc returns the Markdown file at the repository-relative path p.
func readDoc(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// helpFlag is a flag line of kingpin's --help: two spaces, an optional
// short flag, then the long one; wrapped descriptions are indented further.
var (
	helpFlag = regexp.MustCompile(`^  (?:-([a-zA-Z]), |    )--(?:\[no-\])?([a-zA-Z0-9][a-zA-Z0-9._-]*)`)
	helpEnv  = regexp.MustCompile(`DEPLOYMENT_SERVICE_[A-Z0-9_]*[A-Z0-9]`)
	// docFlag is a flag named in the first cell of a row of the flags table.
	docFlag = regexp.MustCompile("`(--?[a-zA-Z0-9][a-zA-Z0-9._-]*)`")
)

// helpFlags parses --help: the long flags (with their short forms) and the
// environment variables it names.
func helpFlags(help string) (flags, env []string) {
	for line := range strings.SplitSeq(help, "\n") {
		if m := helpFlag.FindStringSubmatch(line); m != nil {
			flags = append(flags, "--"+m[2])
			if m[1] != "" {
				flags = append(flags, "-"+m[1])
			}
		}
	}
	env = helpEnv.FindAllString(help, -1)
	slices.Sort(env)
	return flags, slices.Compact(env)
}

func TestDocsFlagsPageHasEveryFlag(t *testing.T) {
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	flags, env := helpFlags(string(out))
	if len(flags) < 20 || !slices.Contains(flags, "--api.url") || !slices.Contains(flags, "--web.listen-address") {
		t.Fatalf("read only %d flags from --help (%v): has its layout changed?\n%s", len(flags), flags, out)
	}
	page := readDoc(t, flagsPage)
	for _, f := range flags {
		if !strings.Contains(page, "`"+f+"`") {
			t.Errorf("%s does not describe %s, which --help lists", flagsPage, f)
		}
	}
	for _, e := range append(env, "DEPLOYMENT_SERVICE_API_KEY") {
		if !strings.Contains(page, "`"+e+"`") {
			t.Errorf("%s does not describe the environment variable %s", flagsPage, e)
		}
	}
	// The other way round: the table describes no flag the binary lacks.
	for _, row := range tableRows(page) {
		for _, m := range docFlag.FindAllStringSubmatch(row[0], -1) {
			if !slices.Contains(flags, m[1]) {
				t.Errorf("%s describes %s, which --help does not list", flagsPage, m[1])
			}
		}
	}
}

// tableRows returns the cells of the body rows of every Markdown table of
// page (the header and delimiter rows left out).
func tableRows(page string) [][]string {
	var rows [][]string
	inTable := false
	for line := range strings.SplitSeq(page, "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable { // the header row
			inTable = true
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if strings.Trim(cells[0], " -:") == "" { // the delimiter row
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// families returns the metric families of a text-format exposition.
func families(body string) []string {
	var names []string
	for line := range strings.SplitSeq(body, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "#" && f[1] == "TYPE" {
			names = append(names, f[2])
		}
	}
	return names
}

func TestDocsMetricsPageHasEveryFamily(t *testing.T) {
	svc, err := sampleservice.Start(sampleservice.Options{Key: "docs-key", Locations: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	dir := t.TempDir()
	writeTestFile(t, dir, "key", "docs-key\n")
	cfg := writeTestFile(t, dir, "modules.yml", "modules:\n  default:\n    targets: [\"http://127.0.0.1:*\"]\n"+
		"    http_client_config: {authorization: {type: Token, credentials_file: key}}\n"+
		"    locations: {detail_ids: [1, 2], info_fields: [name]}\n")
	e := startExporter(t, nil, "--demo", "--config.file="+cfg)

	page := readDoc(t, metricsPage)
	seen := map[string]bool{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() // a failing target, for endpoint_failure_info
	_ = ln.Close()
	for _, endpoint := range []string{"/metrics", "/probe?target=" + url.QueryEscape(svc.URL()), "/probe?target=" + url.QueryEscape(closed)} {
		code, body := e.get(t, endpoint)
		if code != http.StatusOK {
			t.Fatalf("%s answered %d: %s", endpoint, code, body)
		}
		names := families(body)
		if len(names) < 14 {
			t.Fatalf("%s has only %d families: %v", endpoint, len(names), names)
		}
		for _, name := range names {
			seen[name] = true
			if !strings.Contains(page, "`"+name+"`") {
				t.Errorf("%s does not describe %s, which %s serves", metricsPage, name, endpoint)
			}
		}
	}
	for _, want := range []string{"deployment_service_location_info", "deployment_service_target_info", "go_goroutines", "process_open_fds"} {
		if !seen[want] {
			t.Errorf("the scrapes lack %s: the demo no longer shows every family", want)
		}
	}
	// The other way round: every metric of the tables is served.
	for _, row := range tableRows(page) {
		if name := strings.Trim(row[0], "`"); strings.HasPrefix(name, "deployment_service_") && !seen[name] {
			t.Errorf("%s describes %s, which neither /metrics of --demo nor /probe serves", metricsPage, name)
		}
	}
}

func TestDocsReadme(t *testing.T) {
	readme := readDoc(t, "README.md")
	if n := strings.Count(strings.TrimRight(readme, "\n"), "\n") + 1; n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, readmeMaxLines)
	}
	// The two quick-start commands come first.
	quick := "```sh\ngo run . --demo\ngo test ./...\n```"
	if i := strings.Index(readme, quick); i < 0 || strings.Contains(readme[:i], "```") {
		t.Errorf("README.md does not begin with the quick start:\n%s", quick)
	}
	// The Go it asks for is go.mod's.
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readDoc(t, "go.mod"))
	if want := "Needs Go " + goLine[1] + " or later."; !strings.Contains(readme, want) {
		t.Errorf("README.md does not say %q, as go.mod asks", want)
	}
	// deploy/test/lib_k8s.sh runs the block that follows each marker.
	for _, marker := range []string{
		"<!-- quick start: kustomize (run by deploy/test/kubernetes.sh) -->",
		"<!-- quick start: helm (run by deploy/test/helm.sh) -->",
	} {
		if !strings.Contains(readme, "\n"+marker+"\n```sh\n") {
			t.Errorf("README.md lacks the line %q right before a ```sh block: the deployment checks run that block", marker)
		}
	}
}

// markdownFiles lists the Markdown files of the repository at root, as
// repository-relative slash paths; dependencies and build output left out.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (name == "node_modules" || name == "dist" || strings.HasPrefix(name, ".") && name != ".github") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

var (
	fence       = regexp.MustCompile("^\\s*(```+|~~~+)")
	codeSpan    = regexp.MustCompile("(`+)[^`]*?(`+)")
	inlineDest  = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDef      = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	htmlRef     = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
	htmlID      = regexp.MustCompile(`(?i)<a\b[^>]*\b(?:id|name)\s*=\s*"([^"]*)"`)
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	setextLine  = regexp.MustCompile(`^ {0,3}(=+|-+)\s*$`)
	mdLinkText  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag     = regexp.MustCompile(`<[^>]*>`)
	schemeStart = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// inFence follows fenced code blocks line by line: given the fence that
// is open before line ("" for none), it returns the one open after it, and
// whether line is a fence. A block closes with a fence of its own
// character, at least as long, and without an info string.
func inFence(open, line string) (string, bool) {
	m := fence.FindStringSubmatch(line)
	switch {
	case m == nil:
		return open, false
	case open == "":
		return m[1], true
	case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line) == m[1]:
		return "", true
	}
	return open, false
}

// prose returns the lines of a Markdown document outside fenced code
// blocks, with code spans blanked, each with its line number.
func prose(doc string) (lines []string, numbers []int) {
	var open string
	for i, line := range strings.Split(doc, "\n") {
		var isFence bool
		if open, isFence = inFence(open, line); isFence || open != "" {
			continue
		}
		lines = append(lines, codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			return strings.Repeat(" ", len(s))
		}))
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// slug is GitHub's anchor for a heading: the rendered text in lower case,
// punctuation dropped except '-' and '_', each space a '-'.
func slug(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "&lt;", "", "&gt;", "", "&amp;", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments that lead somewhere in a Markdown
// document: its headings' slugs (a repeated one numbered "-1", "-2", as
// GitHub does) and the ids of its HTML anchors.
func anchors(doc string) map[string]bool {
	// Headings are read from the raw lines (code spans count as text),
	// outside fenced code.
	set := map[string]bool{}
	count := map[string]int{}
	add := func(heading string) {
		s := slug(heading)
		if n := count[s]; n > 0 {
			count[s]++
			s = fmt.Sprintf("%s-%d", s, n)
		} else {
			count[s] = 1
		}
		set[s] = true
	}
	var open, prev string
	for line := range strings.SplitSeq(doc, "\n") {
		var isFence bool
		if open, isFence = inFence(open, line); isFence || open != "" {
			prev = ""
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			set[m[1]] = true
		}
		switch {
		case atxHeading.MatchString(line):
			add(atxHeading.FindStringSubmatch(line)[2])
			line = ""
		case setextLine.MatchString(line) && strings.TrimSpace(prev) != "" && !strings.ContainsAny(prev[:1], "|>-*#"):
			add(prev)
			line = ""
		}
		prev = line
	}
	return set
}

// checkLinks returns a line for each relative link of the Markdown files
// under root that leads to no file, or to no heading of a Markdown file.
func checkLinks(root string, files []string) []string {
	var problems []string
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := anchorCache[p]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		anchorCache[p] = anchors(string(b))
		return anchorCache[p], nil
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		lines, numbers := prose(string(b))
		for i, line := range lines {
			var dests []string
			for _, m := range inlineDest.FindAllStringSubmatch(line, -1) {
				dests = append(dests, m[1])
			}
			if m := refDef.FindStringSubmatch(line); m != nil {
				dests = append(dests, m[1])
			}
			for _, m := range htmlRef.FindAllStringSubmatch(line, -1) {
				dests = append(dests, m[1])
			}
			for _, dest := range dests {
				if problem := checkLink(root, file, dest, anchorsOf); problem != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", file, numbers[i], dest, problem))
				}
			}
		}
	}
	return problems
}

// checkLink says what is wrong with the link dest of the Markdown file
// file (repository-relative), or "" when it leads somewhere or leaves the
// repository (a URL with a scheme, or protocol-relative).
func checkLink(root, file, dest string, anchorsOf func(string) (map[string]bool, error)) string {
	dest = strings.TrimSuffix(strings.TrimPrefix(dest, "<"), ">")
	if dest == "" {
		return "empty link"
	}
	if schemeStart.MatchString(dest) || strings.HasPrefix(dest, "//") {
		return ""
	}
	target, fragment, _ := strings.Cut(dest, "#")
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if t, err := url.PathUnescape(target); err == nil {
		target = t
	}
	var p string
	switch {
	case target == "":
		p = file
	case strings.HasPrefix(target, "/"): // GitHub: the repository's root
		p = path.Clean(strings.TrimPrefix(target, "/"))
	default:
		p = path.Join(path.Dir(file), target)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "leads out of the repository"
	}
	info, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		return "no such file " + p
	}
	if fragment == "" || info.IsDir() || !strings.HasSuffix(p, ".md") {
		return ""
	}
	set, err := anchorsOf(p)
	if err != nil {
		return err.Error()
	}
	if f, err := url.PathUnescape(fragment); err == nil {
		fragment = f
	}
	if !set[fragment] && !set[strings.ToLower(fragment)] {
		return fmt.Sprintf("%s has no heading or anchor #%s", p, fragment)
	}
	return ""
}

func TestDocsLinksResolve(t *testing.T) {
	files, err := markdownFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", flagsPage, metricsPage, "BENCHMARKS.md", "CHANGELOG.md", "deploy/README.md", "deploy/RUNBOOK.md"} {
		if !slices.Contains(files, want) {
			t.Errorf("the Markdown files found (%v) do not include %s", files, want)
		}
	}
	for _, p := range checkLinks(".", files) {
		t.Error(p)
	}
}

// TestDocsLinkCheckCatchesMistakes runs the link check on a small tree
// with every kind of mistake it must find, and links it must accept.
func TestDocsLinkCheckCatchesMistakes(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# Page A\n\n## Where a module's key may go: `targets`\n\n## Repeated\n\n## Repeated\n\n"+
		"Setext heading\n--------------\n\n<a id=\"explicit\"></a>Text.\n\n## Heading <a id=\"in-heading\"></a>\n\n"+
		"````md\n## Not a heading\n```sh\n[broken in code](nowhere.md)\n```\n````\n")
	write("README.md", "# Readme\n\n"+
		"[ok](docs/a.md) [ok](docs/a.md#where-a-modules-key-may-go-targets) [ok](docs/a.md#repeated-1)\n"+
		"[ok](docs/a.md#setext-heading) [ok](docs/a.md#explicit) [ok](docs/a.md#in-heading) [ok](#readme) [ok](docs/) [ok](https://example.com/x.md)\n"+
		"`[not a link](gone.md)` [ok](<docs/a.md>)\n\n"+
		"[missing file](docs/b.md)\n"+
		"[missing anchor](docs/a.md#repeated-2)\n"+
		"[code heading](docs/a.md#not-a-heading)\n"+
		"[own anchor](#nowhere)\n"+
		"![missing image](img/x.png)\n\n"+
		"[ref]: ../outside.md\n\n"+
		"<a href=\"docs/c.md\">html</a>\n")
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	got := checkLinks(root, files)
	want := []string{
		"README.md:7: docs/b.md: no such file docs/b.md",
		"README.md:8: docs/a.md#repeated-2: docs/a.md has no heading or anchor #repeated-2",
		"README.md:9: docs/a.md#not-a-heading: docs/a.md has no heading or anchor #not-a-heading",
		"README.md:10: #nowhere: README.md has no heading or anchor #nowhere",
		"README.md:11: img/x.png: no such file img/x.png",
		"README.md:13: ../outside.md: leads out of the repository",
		"README.md:15: docs/c.md: no such file docs/c.md",
	}
	if !slices.Equal(got, want) {
		t.Errorf("link check found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDocsSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Install and run":                              "install-and-run",
		"Many services: modules and /probe":            "many-services-modules-and-probe",
		"TLS, proxies and headers for /metrics":        "tls-proxies-and-headers-for-metrics",
		"Where a module's key may go: `targets`":       "where-a-modules-key-may-go-targets",
		"DeploymentServiceLocationCheckStale":          "deploymentservicelocationcheckstale",
		"For `.ci/run`":                                "for-cirun",
		"Detail subsets of any size, checked in turns": "detail-subsets-of-any-size-checked-in-turns",
		"[Linked](x.md) text_with_underscores":         "linked-text_with_underscores",
		"Two  spaces":                                  "two--spaces",
		"Ünïcode — dash":                               "ünïcode--dash",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestDocsHelpParsing keeps helpFlags honest about kingpin's layout: a
// description line that starts with a flag name is not a flag.
func TestDocsHelpParsing(t *testing.T) {
	help := "Flags:\n  -h, --[no-]help                Show help.\n      --api.url=API.URL          Base URL. ($DEPLOYMENT_SERVICE_URL)\n" +
		"      --[no-]api.gzip            Ask for gzip;\n                                 --api.max-response-bytes bounds it.\n" +
		"      --locations.detail-id=LOCATIONS.DETAIL-ID ...  \n                                 Repeatable.\n"
	flags, env := helpFlags(help)
	if want := []string{"--help", "-h", "--api.url", "--api.gzip", "--locations.detail-id"}; !slices.Equal(flags, want) {
		t.Errorf("flags %v, want %v", flags, want)
	}
	if want := []string{"DEPLOYMENT_SERVICE_URL"}; !slices.Equal(env, want) {
		t.Errorf("environment %v, want %v", env, want)
	}
}

// TestDocsConfigCheckSample runs the --config.check session of the probe
// page on the file it shows (with a key file for each relative
// credentials_file) and compares what the binary prints, line for line.
func TestDocsConfigCheckSample(t *testing.T) {
	_, section, _ := strings.Cut(readDoc(t, "docs/probe.md"), "\n## Checking a configuration\n")
	file, session := fencedBlock(section, "yaml"), fencedBlock(section, "")
	name, ok := strings.CutPrefix(strings.SplitN(file, "\n", 2)[0], "# ")
	if !ok {
		t.Fatalf("the yaml block of the section does not begin with its file name:\n%s", file)
	}
	if _, err := os.Stat("/etc/ssl/staging-ca.pem"); err == nil {
		t.Skip("the sample's missing CA file exists on this machine")
	}
	dir := t.TempDir()
	writeTestFile(t, dir, name, file)
	for _, m := range regexp.MustCompile(`credentials_file: ([^\s}/][^\s}]*)`).FindAllStringSubmatch(file, -1) {
		writeTestFile(t, dir, m[1], "key\n")
	}
	lines := strings.Split(strings.TrimSpace(session), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "$ deployment_service_exporter --config.check ") || lines[len(lines)-2] != "$ echo $?" {
		t.Fatalf("the session is not a run of --config.check followed by echo $?:\n%s", session)
	}
	cmd := exec.Command(binary, strings.Fields(lines[0])[2:]...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	out, err := cmd.CombinedOutput()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(lines[1:len(lines)-2], "\n"); strings.TrimSpace(string(out)) != want {
		t.Errorf("docs/probe.md shows:\n%s\nthe binary prints:\n%s", want, out)
	}
	if want := lines[len(lines)-1]; strconv.Itoa(code) != want {
		t.Errorf("docs/probe.md shows the exit status %s, the binary exits %d", want, code)
	}
}

// fencedBlock returns the content of the first fenced code block of doc
// whose info string is lang, "" when there is none.
func fencedBlock(doc, lang string) string {
	var open string
	var block []string
	wanted := false
	for line := range strings.SplitSeq(doc, "\n") {
		wasOpen := open != ""
		var isFence bool
		open, isFence = inFence(open, line)
		switch {
		case isFence && !wasOpen:
			wanted = strings.TrimSpace(strings.TrimLeft(line, " `~")) == lang
		case isFence && wanted:
			return strings.Join(block, "\n") + "\n"
		case wanted && wasOpen:
			block = append(block, line)
		}
	}
	return ""
}
