package sampleservice

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The generator derives every field from (seed, kind, index, field) through a
// hash instead of storing entries, so a service of a million locations costs
// nothing until a page of it is asked for, and any entry can be rebuilt on
// any request.

// Kinds keep projects and locations of the same index independent.
const (
	kindProject uint64 = iota + 1
	kindLocation
)

// epoch anchors generated timestamps so bodies are identical across runs.
var epoch = time.Date(2021, time.January, 1, 0, 0, 0, 0, time.UTC)

// generator produces entries for one seed.
type generator struct{ seed uint64 }

// splitmix64 is a tiny, well-mixing hash: good enough to look random, and
// stateless so that it is safe for concurrent requests.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// field returns the pseudo-random value of one field of one entry.
func (g generator) field(kind uint64, idx int64, f uint64) uint64 {
	return splitmix64(g.seed ^ splitmix64(kind<<56^uint64(idx)<<8^f))
}

func pick(list []string, h uint64) string { return list[h%uint64(len(list))] }

func timestamp(t time.Time) string { return t.Format(time.RFC3339) }

// Owner is embedded in entries the way a nested serializer renders it.
type owner struct {
	ID       int    `json:"id"`
	Username string `json:"username"`
	Email    string `json:"email"`
}

func (g generator) owner(kind uint64, idx int64) owner {
	h := g.field(kind, idx, 1)
	u := h % uint64(len(users))
	return owner{ID: int(u) + 100, Username: users[u], Email: users[u] + "@example.com"}
}

func (g generator) tags(kind uint64, idx int64) []string {
	h := g.field(kind, idx, 2)
	n := int(h % 4) // empty tag lists occur in real data too
	tags := make([]string, 0, n)
	for i := range n {
		t := pick(tagPool, h>>(8*(i+1)))
		if !contains(tags, t) {
			tags = append(tags, t)
		}
	}
	return tags
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// created and updated return an entry's timestamps; updated never precedes
// created.
func (g generator) times(kind uint64, idx int64) (created, updated time.Time) {
	created = epoch.Add(time.Duration(g.field(kind, idx, 3)%(3*365*86400)) * time.Second)
	updated = created.Add(time.Duration(g.field(kind, idx, 4)%(300*86400)) * time.Second)
	return created, updated
}

// project is one entry of the projects list.
type project struct {
	ID            int      `json:"id"`
	Name          string   `json:"name"`
	Slug          string   `json:"slug"`
	Description   string   `json:"description"`
	Visibility    string   `json:"visibility"`
	DefaultRegion string   `json:"default_region"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	Owner         owner    `json:"owner"`
	Tags          []string `json:"tags"`
}

func (g generator) project(idx int64) project {
	id := int(idx + 1)
	h := g.field(kindProject, idx, 0)
	svc := pick(services, h)
	team := pick(teams, h>>16)
	created, updated := g.times(kindProject, idx)
	return project{
		ID:            id,
		Name:          fmt.Sprintf("%s %d", title(svc), id),
		Slug:          fmt.Sprintf("%s-%d", svc, id),
		Description:   fmt.Sprintf("The %s service, owned by the %s team.", svc, team),
		Visibility:    pick(visibilities, h>>24),
		DefaultRegion: pick(regions, h>>32),
		CreatedAt:     timestamp(created),
		UpdatedAt:     timestamp(updated),
		Owner:         g.owner(kindProject, idx),
		Tags:          g.tags(kindProject, idx),
	}
}

// location is one entry of the locations list; the detail view extends it.
type location struct {
	ID          int      `json:"id"`
	URL         string   `json:"url"`
	Name        string   `json:"name"`
	Slug        string   `json:"slug"`
	Project     *int     `json:"project"`
	Region      string   `json:"region"`
	Status      string   `json:"status"`
	Environment string   `json:"environment"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	Tags        []string `json:"tags"`
	Owner       owner    `json:"owner"`
	Description string   `json:"description"`
}

// location builds the list entry at idx. projects is the current number of
// projects, which entries refer to; with none, project is null. base is the
// absolute API base that the entry's url points below.
func (g generator) location(base string, idx, projects int64) location {
	id := int(idx + 1)
	h := g.field(kindLocation, idx, 0)
	adj, noun := pick(adjectives, h), pick(nouns, h>>8)
	region, env := pick(regions, h>>16), pick(environments, h>>24)
	svc, team := pick(services, h>>32), pick(teams, h>>40)
	var proj *int
	if projects > 0 {
		p := int(g.field(kindLocation, idx, 5)%uint64(projects)) + 1
		proj = &p
	}
	created, updated := g.times(kindLocation, idx)
	return location{
		ID:          id,
		URL:         base + locationsPath + strconv.Itoa(id) + "/",
		Name:        fmt.Sprintf("%s %s %d", title(adj), title(noun), id),
		Slug:        fmt.Sprintf("%s-%s-%d", adj, noun, id),
		Project:     proj,
		Region:      region,
		Status:      pick(statuses, h>>48),
		Environment: env,
		CreatedAt:   timestamp(created),
		UpdatedAt:   timestamp(updated),
		Tags:        g.tags(kindLocation, idx),
		Owner:       g.owner(kindLocation, idx),
		Description: fmt.Sprintf("Serves the %s service for %s in %s, run by the %s team. "+
			"Rolling updates ship %s; traffic is balanced across its hosts by the regional gateway.",
			svc, env, region, team, pick(schedules, h>>56)),
	}
}

// locationDetail is the detail view: the list entry plus fields that are
// costly enough that real services leave them out of lists.
type locationDetail struct {
	location
	IsActive       bool        `json:"is_active"`
	Replicas       int         `json:"replicas"`
	Hosts          []host      `json:"hosts"`
	Config         config      `json:"config"`
	LastDeployment *deployment `json:"last_deployment"`
}

type host struct {
	Hostname string `json:"hostname"`
	IP       string `json:"ip"`
	Port     int    `json:"port"`
	Healthy  bool   `json:"healthy"`
}

type config struct {
	Image       string      `json:"image"`
	CPU         string      `json:"cpu"`
	Memory      string      `json:"memory"`
	Autoscaling autoscaling `json:"autoscaling"`
	Env         []envVar    `json:"env"`
}

type autoscaling struct {
	Enabled     bool `json:"enabled"`
	MinReplicas int  `json:"min_replicas"`
	MaxReplicas int  `json:"max_replicas"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type deployment struct {
	ID          int     `json:"id"`
	Version     string  `json:"version"`
	Commit      string  `json:"commit"`
	Status      string  `json:"status"`
	StartedAt   string  `json:"started_at"`
	FinishedAt  *string `json:"finished_at"`
	TriggeredBy string  `json:"triggered_by"`
}

func (g generator) locationDetail(base string, idx, projects int64) locationDetail {
	loc := g.location(base, idx, projects)
	h := g.field(kindLocation, idx, 6)
	active := loc.Status != "decommissioned"
	replicas := 0
	if active {
		replicas = int(h%4) + 1
	}
	hosts := make([]host, replicas)
	for i := range hosts {
		hh := splitmix64(h + uint64(i))
		hosts[i] = host{
			Hostname: fmt.Sprintf("%s-%d.%s.internal", loc.Slug, i, loc.Region),
			IP:       fmt.Sprintf("10.%d.%d.%d", hh&0xff, hh>>8&0xff, hh>>16&0xfe+1),
			Port:     8080 + i,
			Healthy:  loc.Status != "degraded" || i > 0,
		}
	}
	svc := pick(services, g.field(kindLocation, idx, 0)>>32)
	version := fmt.Sprintf("%d.%d.%d", h>>8%3+1, h>>12%20, h>>20%10)
	detail := locationDetail{
		location: loc,
		IsActive: active,
		Replicas: replicas,
		Hosts:    hosts,
		Config: config{
			Image:  "registry.example.com/" + svc + ":" + version,
			CPU:    strconv.Itoa(int(h>>28%8+1)*250) + "m",
			Memory: strconv.Itoa(1<<(h>>32%4)*256) + "Mi",
			Autoscaling: autoscaling{
				Enabled:     h>>36%2 == 0,
				MinReplicas: max(replicas, 1),
				MaxReplicas: max(replicas, 1) * 4,
			},
			Env: []envVar{
				{Name: "LOG_LEVEL", Value: pick([]string{"info", "debug", "warn"}, h>>40)},
				{Name: "REGION", Value: loc.Region},
			},
		},
	}
	if loc.Status != "provisioning" { // a location being set up has no deployment yet
		started := epoch.Add(time.Duration(g.field(kindLocation, idx, 7)%(4*365*86400)) * time.Second)
		dep := &deployment{
			ID:          int(idx)*10 + int(h>>44%10) + 1,
			Version:     "v" + version,
			Commit:      fmt.Sprintf("%012x", h>>16),
			Status:      pick(deployStates, h>>48),
			StartedAt:   timestamp(started),
			TriggeredBy: pick(users, h>>52),
		}
		if dep.Status != "running" {
			f := timestamp(started.Add(time.Duration(h>>56%600+30) * time.Second))
			dep.FinishedAt = &f
		}
		detail.LastDeployment = dep
	}
	return detail
}

// title upper-cases the first letter; the words are ASCII.
func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
