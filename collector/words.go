package collector

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// heldWords says until when and why requests are held off, quoting the Retry-After obeyed.
func heldWords(status int, until time.Time, retryAfter string) string {
	s := "held off until an unknown time"
	if !until.IsZero() {
		s = "held off until " + until.UTC().Format(timeFormat) + " UTC"
	}
	if status != 0 {
		s += fmt.Sprintf(" after a %d", status)
	}
	if retryAfter != "" {
		s += fmt.Sprintf(" with Retry-After %q", retryAfter)
	}
	return s
}

// failureKind names how a request failed: its reason, status and the cause of a network failure.
func failureKind(err error, status int) string {
	kind := string(client.ReasonOf(err))
	switch {
	case errors.Is(err, errTooLate):
		kind = "too late"
	case errors.Is(err, client.ErrKeyUnavailable):
		kind = "key unavailable"
	}
	if status != 0 {
		kind += " " + strconv.Itoa(status)
	}
	if c, ok := map[string]string{client.CauseConnectionRefused: "connection refused", client.CauseNameNotFound: "name not found",
		client.CauseTLS: "TLS", client.CauseConnectionReset: "connection reset"}[client.CauseOf(err)]; ok {
		kind += " (" + c + ")"
	}
	return kind
}

// failures names what failed in s and how, the highest status first, failing detail views by location id.
func failures(s *Snapshot) string {
	var kinds []string
	names, statuses := map[string][]string{}, map[string]int{}
	add := func(name, kind string, status int) {
		if names[kind] == nil {
			kinds = append(kinds, kind)
		}
		names[kind], statuses[kind] = append(names[kind], name), status
	}
	detailIDs := map[string][]int64{}
	checked := slices.DeleteFunc(slices.Clone(s.Details), func(d locationState) bool { return d.Checked.Before(s.Start) }) // in this poll
	for _, d := range checked {
		if d.Err != nil && !errors.Is(d.Err, client.ErrHeldOff) {
			k := failureKind(d.Err, d.Status)
			detailIDs[k], statuses[k] = append(detailIDs[k], d.ID), d.Status
		}
	}
	for _, ep := range client.Endpoints {
		st := s.Endpoints[ep]
		if st.Err != nil && !errors.Is(st.Err, client.ErrHeldOff) && !errors.Is(st.Err, errNoDetail) &&
			(ep != client.EndpointLocationDetail || len(detailIDs) == 0) {
			add(string(ep), failureKind(st.Err, st.Status), st.Status)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(detailIDs)) {
		add(string(client.EndpointLocationDetail)+" "+idList(detailIDs[k], len(checked)), k, statuses[k])
	}
	slices.SortStableFunc(kinds, func(a, b string) int { return cmp.Compare(statuses[b], statuses[a]) })
	for i, k := range kinds {
		kinds[i] = strings.Join(names[k], ", ") + " " + k
	}
	return strings.Join(kinds, ", ")
}

// summarize tells how a poll went in one line: what failed, what was not checked or not sent and why, what was slow.
func (rec *PollRecord) summarize(s *Snapshot, reqs []client.TraceRequest) (string, string) {
	var notSent, notChecked []string
	for _, ep := range client.Endpoints {
		switch st := s.Endpoints[ep]; {
		case errors.Is(st.Err, client.ErrHeldOff):
			notSent, rec.heldStatus = append(notSent, string(ep)), cmp.Or(rec.heldStatus, st.Status)
		case errors.Is(st.Err, errNoDetail):
			notChecked = append(notChecked, string(ep))
		}
	}
	for _, r := range reqs {
		if r.Reason == "" && r.Error != "" && !slices.Contains(notSent, string(r.Endpoint)) {
			notSent = append(notSent, string(r.Endpoint))
		}
	}
	if len(notSent) == len(s.Endpoints) && len(reqs) == 0 {
		return "failed", "sent nothing: " + heldWords(rec.heldStatus, rec.HeldOffUntil, "")
	}
	var words []string
	if f := failures(s); f != "" {
		words = append(words, f)
	}
	if notChecked != nil {
		words = append(words, "not checked: "+strings.Join(notChecked, ", "))
	}
	if notSent != nil {
		words = append(words, "not sent: "+strings.Join(notSent, ", "))
	}
	if notSent != nil || !rec.metUntil.IsZero() {
		words = append(words, heldWords(rec.heldStatus, rec.HeldOffUntil, rec.retryAfter))
	}
	bad, worst, slow := len(words), map[client.Endpoint]time.Duration{}, []string(nil)
	for _, r := range reqs {
		worst[r.Endpoint] = max(worst[r.Endpoint], r.Phases.FirstByte)
	}
	for _, ep := range client.Endpoints {
		if worst[ep] > 2*time.Second { // the first byte's wait that DeploymentServiceAPISlow calls slow
			slow = append(slow, fmt.Sprintf("%s %s", ep, worst[ep].Round(time.Millisecond)))
		}
	}
	if slow != nil {
		words = append(words, "slow: "+strings.Join(slow, ", "))
	}
	switch {
	case !s.up():
		return "failed", "failed: " + strings.Join(words, "; ")
	case bad > 0:
		return "partial", "partial: " + strings.Join(words, "; ")
	case len(words) > 0:
		return "slow", words[0]
	}
	return "ok", "ok"
}

// idList names the first few ids, and how many of all they are.
func idList(ids []int64, all int) string {
	s := strings.Trim(fmt.Sprint(ids[:min(len(ids), 5)]), "[]")
	s = strings.ReplaceAll(s, " ", ", ")
	if len(ids) > 5 {
		s += fmt.Sprintf(" and %d more", len(ids)-5)
	}
	if len(ids) < all {
		s += fmt.Sprintf(" (%d of %d)", len(ids), all)
	}
	return s
}

// failureLog logs one short line per poll: warn when a failure starts or changes kind, debug while it lasts, info when it ends.
type failureLog struct {
	mu          sync.Mutex
	kind, since string // how the run of failures goes, and when it began, in RFC 3339
	polls       int
}

// log writes the line a complete poll calls for; a poll that sent nothing tells nothing new.
func (f *failureLog) log(logger *slog.Logger, s *Snapshot) {
	var kinds []string
	errText := ""
	for _, ep := range client.Endpoints {
		if st := s.Endpoints[ep]; st.Err != nil && !errors.Is(st.Err, client.ErrHeldOff) && !errors.Is(st.Err, errNoDetail) {
			kinds = append(kinds, string(ep)+" "+failureKind(st.Err, st.Status))
			if ue := (*url.Error)(nil); errText == "" && errors.As(st.Err, &ue) { // the target label names the URL
				errText = strings.Replace(st.Err.Error(), " "+strconv.Quote(ue.URL), "", 1)
			}
			errText = cmp.Or(errText, st.Err.Error())
		}
	}
	kind := strings.Join(kinds, ", ")
	_, summary := (&PollRecord{HeldOffUntil: s.HoldOffUntil}).summarize(s, nil)
	summary = bounded(summary, 400)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case kind == "" && !s.up():
		logger.Debug("Poll sent nothing", "summary", summary)
	case kind == "" && f.kind == "":
	case kind == "":
		logger.Info("Poll recovered", "failing_since", f.since, "failed_polls", f.polls)
		f.kind, f.polls = "", 0
	case kind == f.kind:
		f.polls++
		logger.Debug("Poll still failing", "summary", summary, "failing_since", f.since, "failed_polls", f.polls)
	default:
		if f.kind == "" {
			f.since = s.Start.UTC().Format(time.RFC3339)
		}
		f.kind, f.polls = kind, f.polls+1
		logger.Warn("Poll failed", "summary", summary, "failing_since", f.since, "err", bounded(errText, 300))
	}
}

// bounded cuts s to n bytes: a long one keeps its start and a hash of the whole, to stay distinct.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%s…(%08x)", strings.ToValidUTF8(s[:n-16], ""), h.Sum32())
}
