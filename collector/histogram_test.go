package collector

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// referenceHistogram is client_golang's histogram with the options that
// durationHistogram stands for.
func referenceHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:                            "deployment_service_request_duration_seconds",
		Help:                            "Latency of each HTTP request to the deployment service API.",
		ConstLabels:                     prometheus.Labels{"endpoint": "root"},
		Buckets:                         durationBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	})
}

func written(t *testing.T, m prometheus.Metric) *dto.Metric {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func logUniform(r *rand.Rand, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	return v
}

// TestDurationHistogramMatchesClientGolang feeds the same observations to
// durationHistogram and to client_golang's histogram with the options it
// stands for: both must expose the same classic and native buckets.
func TestDurationHistogramMatchesClientGolang(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	edges := []float64{0, -0.5, 1e-40, math.Inf(1), -math.MaxFloat64}
	edges = append(edges, durationBuckets...)
	for k := -20; k <= 20; k++ {
		edges = append(edges, math.Exp2(float64(k)/8), math.Nextafter(math.Exp2(float64(k)/8), 0))
	}
	tests := []struct {
		name   string
		values []float64
	}{
		{"no observation", nil},
		{"one", []float64{0.042}},
		{"latencies", logUniform(r, 500, 1e-3, 10)},
		// Far more than 100 buckets at schema 3: the resolution halves,
		// more than once.
		{"a wide range", logUniform(r, 3000, 1e-9, 1e9)},
		{"bounds and edges", edges},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, got := referenceHistogram(), newDurationHistogram(requestDurationDesc, "root")
			for _, v := range tt.values {
				ref.Observe(v)
				got.Observe(v)
			}
			want, have := written(t, ref), written(t, got)
			if want.Histogram.CreatedTimestamp == nil || have.Histogram.CreatedTimestamp == nil {
				t.Fatal("no created timestamp")
			}
			want.Histogram.CreatedTimestamp, have.Histogram.CreatedTimestamp = nil, nil
			if !proto.Equal(want, have) {
				t.Errorf("client_golang writes\n%s\ndurationHistogram writes\n%s", prototext.Format(want), prototext.Format(have))
			}
		})
	}
}

// TestDurationHistogramResets: past the bucket limit within an hour of
// its start, the resolution halves and the counts restart an hour after
// their start; past it later, they restart at once with the observation
// that crossed it, as client_golang does.
func TestDurationHistogramResets(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	h := newDurationHistogram(requestDurationDesc, "root")
	h.now = func() time.Time { return now }
	h.created = start
	wide := logUniform(rand.New(rand.NewPCG(1, 2)), 300, 1e-9, 1e9)
	for _, v := range wide {
		h.Observe(v)
	}
	m := written(t, h).Histogram
	if m.GetSchema() >= nativeSchema || m.GetSampleCount() != 300 {
		t.Fatalf("past the limit: schema %d, count %d; want a lower schema and every observation", m.GetSchema(), m.GetSampleCount())
	}
	now = start.Add(time.Hour)
	m = written(t, h).Histogram
	if m.GetSampleCount() != 0 || m.GetSchema() != nativeSchema || !m.GetCreatedTimestamp().AsTime().Equal(now) {
		t.Errorf("an hour later: count %d, schema %d, created %v; want restarted counts at schema 3, created %v",
			m.GetSampleCount(), m.GetSchema(), m.GetCreatedTimestamp().AsTime(), now)
	}
	// Over the limit again more than an hour after the restart: restart
	// at once, keeping the observation that crossed it; the observations
	// after it are counted from there (and lower the resolution again).
	now = now.Add(2 * time.Hour)
	for _, v := range wide {
		h.Observe(v)
	}
	m = written(t, h).Histogram
	if !m.GetCreatedTimestamp().AsTime().Equal(now) || m.GetSampleCount() >= 300 || m.GetSampleCount() == 0 {
		t.Errorf("over the limit after an hour: count %d, created %v; want a restart at %v with the observations from the one that crossed the limit",
			m.GetSampleCount(), m.GetCreatedTimestamp().AsTime(), now)
	}
}

// TestNativeBoundsAreExact: the bounds are those of client_golang to the
// last bit, where it matters: a value on a bound, or just off it, falls in
// the same bucket.
func TestNativeBoundsAreExact(t *testing.T) {
	ref := referenceHistogram()
	got := newDurationHistogram(requestDurationDesc, "root")
	for s := int32(1); s <= nativeSchema; s++ {
		for _, b := range nativeBounds[s] {
			for _, v := range []float64{2 * b, math.Nextafter(2*b, 0), math.Nextafter(2*b, 2)} {
				ref.Observe(v)
				got.Observe(v)
			}
		}
	}
	want, have := written(t, ref), written(t, got)
	want.Histogram.CreatedTimestamp, have.Histogram.CreatedTimestamp = nil, nil
	if !proto.Equal(want, have) {
		t.Errorf("client_golang writes\n%s\ndurationHistogram writes\n%s", prototext.Format(want), prototext.Format(have))
	}
}
