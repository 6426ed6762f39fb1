package collector

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deployment-service/deployment_service_exporter/client"
)

// classicQuantile is Prometheus' histogram_quantile over classic buckets
// (promql's bucketQuantile): the bucket holding the rank, then linear
// interpolation inside it.
func classicQuantile(q float64, buckets []*dto.Bucket, count uint64) float64 {
	rank := q * float64(count)
	b := sort.Search(len(buckets), func(i int) bool { return float64(buckets[i].GetCumulativeCount()) >= rank })
	if b == len(buckets) {
		return buckets[len(buckets)-1].GetUpperBound() // the +Inf bucket
	}
	start, below := 0.0, 0.0
	if b > 0 {
		start, below = buckets[b-1].GetUpperBound(), float64(buckets[b-1].GetCumulativeCount())
	}
	end, in := buckets[b].GetUpperBound(), float64(buckets[b].GetCumulativeCount())-below
	return start + (end-start)*(rank-below)/in
}

// written returns what m writes.
func written(t *testing.T, m prometheus.Metric) *dto.Metric {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// requestHistogram returns the histogram of endpoint root after n requests
// that each took d.
func requestHistogram(t *testing.T, d time.Duration, n int) *dto.Histogram {
	t.Helper()
	m := NewRequestMetrics(prometheus.NewRegistry())
	for range n {
		m.ObserveRequest(client.EndpointRoot, 200, d)
	}
	return written(t, m.duration.WithLabelValues("root").(prometheus.Metric)).GetHistogram()
}

// TestLatencyAsMeasured: an endpoint that always answers in the same time,
// from 0.1 s to 10 s, is reported within 20% by histogram_quantile over
// the classic buckets alone, at the quantiles of the recording rules. The
// worst case is a latency a little above a bound; issue 23 saw 4.875 s
// at p95 for an endpoint answering in 2.5 s.
func TestLatencyAsMeasured(t *testing.T) {
	latencies := []float64{2.5 + 0.02} // the 2.5 s endpoint with the exporter's overhead
	for _, b := range durationBuckets {
		if b >= 0.1 && b < 10 {
			latencies = append(latencies, b*1.001)
		}
	}
	for l := 0.1; l <= 10; l *= 1.05 {
		latencies = append(latencies, l)
	}
	for _, l := range latencies {
		h := requestHistogram(t, time.Duration(l*float64(time.Second)), 100)
		for _, q := range []float64{0.5, 0.95, 0.99} {
			if got := classicQuantile(q, h.GetBucket(), h.GetSampleCount()); math.Abs(got-l) > 0.2*l {
				t.Errorf("requests of %.4gs: histogram_quantile(%v) = %.4gs, more than 20%% off", l, q, got)
			}
		}
	}
}

// TestRequestHistogramIsNative: the histogram carries native buckets at
// schema 3 (bucket factor 1.1) beside the classic ones.
func TestRequestHistogramIsNative(t *testing.T) {
	h := requestHistogram(t, 42*time.Millisecond, 3)
	if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(durationBuckets) {
		t.Errorf("schema %d, %d native spans, %d classic buckets; want schema 3, native buckets and %d classic ones",
			h.GetSchema(), len(h.GetPositiveSpan()), len(h.GetBucket()), len(durationBuckets))
	}
}
