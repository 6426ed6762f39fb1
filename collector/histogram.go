package collector

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// durationBuckets are the classic buckets, 5 ms to 30 s; from 0.1 s to 10 s
// each is at most 1.2 times the one before, for quantiles within 20%.
var durationBuckets = [...]float64{
	0.005, 0.01, 0.025, 0.05, 0.08,
	0.1, 0.12, 0.14, 0.16, 0.19, 0.22, 0.25, 0.3, 0.36, 0.43, 0.5, 0.6, 0.72, 0.85,
	1, 1.2, 1.4, 1.6, 1.9, 2.2, 2.5, 3, 3.6, 4.3, 5, 6, 7.2, 8.5, 10,
	15, 30,
}

// The native buckets of client_golang's histogram with a bucket factor of 1.1,
// at most 100 buckets and a minimum reset duration of one hour.
const (
	nativeSchema        int32 = 3
	nativeMinSchema     int32 = -4
	nativeMaxBuckets          = 100
	nativeMinResetAfter       = time.Hour
	nativeZeroThreshold       = 2.938735877055719e-39 // client_golang's DefNativeHistogramZeroThreshold
)

// nativeBounds are client_golang's bounds of schema 3 within one power of two,
// as fractions of math.Frexp; those of schemas 2 and 1 are among them.
var nativeBounds = [...]float64{
	0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
	0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
}

// durationHistogram holds what client_golang's histogram with these options
// holds for latencies, in a tenth of its memory (BENCHMARKS.md, item 8).
// Its owner serialises the calls.
type durationHistogram struct {
	count, zero uint64 // observations, and those in the zero bucket
	sum         float64
	classic     [len(durationBuckets)]uint64
	schema      int32
	native      map[int]int64
	// created is when the counts began; resetAt, once the bucket limit has
	// lowered the resolution, is when they begin again.
	created, resetAt time.Time
}

func newDurationHistogram() *durationHistogram {
	h := &durationHistogram{}
	h.reset(time.Now())
	return h
}

// observe adds one latency in seconds.
func (h *durationHistogram) observe(v float64) {
	now := time.Now()
	h.resetIfDue(now)
	h.add(v)
	if len(h.native) <= nativeMaxBuckets {
		return
	}
	// Past the bucket limit: start afresh if the counts are an hour old, else
	// halve the resolution until they are.
	switch {
	case h.resetAt.IsZero() && now.Sub(h.created) >= nativeMinResetAfter:
		h.reset(now)
		h.add(v)
	case h.schema > nativeMinSchema:
		if h.resetAt.IsZero() {
			h.resetAt = h.created.Add(nativeMinResetAfter)
		}
		h.schema--
		merged := make(map[int]int64, len(h.native))
		for i, n := range h.native {
			merged[ceilDiv(i, 2)] += n
		}
		h.native = merged
	}
}

func (h *durationHistogram) add(v float64) {
	h.count++
	h.sum += v
	if i, _ := slices.BinarySearch(durationBuckets[:], v); i < len(durationBuckets) {
		h.classic[i]++
	}
	if v <= nativeZeroThreshold {
		h.zero++
		return
	}
	// Bucket i of schema s holds (2^((i-1)/2^s), 2^(i/2^s)]; bucket i of
	// schema 3 lies in bucket ceil(i/2^(3-s)) of schema s.
	frac, exp := math.Frexp(v)
	i := sort.SearchFloat64s(nativeBounds[:], frac) + (exp-1)*len(nativeBounds)
	h.native[ceilDiv(i, 1<<(nativeSchema-h.schema))]++
}

// ceilDiv is i/d rounded up, for d > 0.
func ceilDiv(i, d int) int {
	if i > 0 {
		i += d - 1
	}
	return i / d
}

func (h *durationHistogram) resetIfDue(now time.Time) {
	if !h.resetAt.IsZero() && !now.Before(h.resetAt) {
		h.reset(h.resetAt)
	}
}

func (h *durationHistogram) reset(at time.Time) {
	*h = durationHistogram{schema: nativeSchema, native: map[int]int64{}, created: at}
}

func (h *durationHistogram) metric(desc *prometheus.Desc, endpoint string) prometheus.Metric {
	h.resetIfDue(time.Now())
	m, err := prometheus.NewConstNativeHistogram(desc, h.count, h.sum, h.native, nil, h.zero, h.schema, nativeZeroThreshold, h.created, endpoint)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	buckets := make([]*dto.Bucket, len(durationBuckets))
	var cumulative uint64
	for i, le := range durationBuckets {
		cumulative += h.classic[i]
		buckets[i] = &dto.Bucket{CumulativeCount: new(cumulative), UpperBound: new(le)}
	}
	return withClassicBuckets{m, buckets}
}

// withClassicBuckets adds classic buckets to a native histogram.
type withClassicBuckets struct {
	prometheus.Metric
	buckets []*dto.Bucket
}

func (w withClassicBuckets) Write(out *dto.Metric) error {
	if err := w.Metric.Write(out); err != nil {
		return err
	}
	out.Histogram.Bucket = w.buckets
	return nil
}
