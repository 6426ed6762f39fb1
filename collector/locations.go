package collector

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"
)

// locationBook remembers a target's last check of each subset location and
// recent detail durations, so that a large subset is checked in turns across polls.
type locationBook struct {
	infoFields []string // the fields its checks hold

	mu     sync.Mutex
	last   map[int64]locationState
	recent [64]time.Duration // a ring of the last detail durations, which usual looks at
	n      int               // durations observed
}

func newLocationBook(infoFields []string) *locationBook {
	return &locationBook{infoFields: infoFields, last: make(map[int64]locationState)}
}

func (b *locationBook) lastChecked(id int64) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last[id].Checked
}

// record keeps ls unless a later check is kept: a poll cut short may report late.
func (b *locationBook) record(ls locationState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.last[ls.ID]; !ok || !old.Checked.After(ls.Checked) {
		b.last[ls.ID] = ls
	}
}

// keepOnly forgets every location that left the subset.
func (b *locationBook) keepOnly(inSubset func(id int64) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.last, func(id int64, _ locationState) bool { return !inSubset(id) })
}

func (b *locationBook) ids() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.last))
}

// view returns the last checks of those of ids that have one, sorted by id.
func (b *locationBook) view(ids []int64) []locationState {
	b.mu.Lock()
	out := make([]locationState, 0, min(len(ids), len(b.last)))
	for _, id := range ids {
		if ls, ok := b.last[id]; ok {
			out = append(out, ls)
		}
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(a, b locationState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (b *locationBook) observe(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recent[b.n%len(b.recent)] = d
	b.n++
}

// usual is 1.5 times the 95th percentile of recent detail durations, so that
// ordinary jitter fits; 0 while none has run to its end.
func (b *locationBook) usual() time.Duration {
	b.mu.Lock()
	sorted := slices.Sorted(slices.Values(b.recent[:min(b.n, len(b.recent))]))
	b.mu.Unlock()
	if len(sorted) == 0 {
		return 0
	}
	p95 := sorted[(len(sorted)*95+99)/100-1]
	return p95 + p95/2
}
