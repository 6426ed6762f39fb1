package collector

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployment-service/deployment_service_exporter/client"
)

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
			errText = cmp.Or(errText, shortErr(st.Err))
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
		logger.Warn("Poll failed", "summary", summary, "failing_since", f.since, "err", errText)
	}
}

// shortErr is err in a few words, without the URL that the target label already names.
func shortErr(err error) string {
	text := err.Error()
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		text = strings.Replace(text, " "+strconv.Quote(ue.URL), "", 1)
	}
	return bounded(text, 300)
}

// logName bounds a target's name for the log: a long one keeps its start and a hash of the whole, to stay distinct.
func logName(s string) string { return bounded(s, 160) }

func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%s…(%08x)", strings.ToValidUTF8(s[:n-16], ""), h.Sum32())
}
