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

// The native buckets of client_golang's histogram with a bucket factor of
// 1.1, at most 100 buckets and a minimum reset duration of one hour.
const (
	nativeSchema        int32 = 3 // client_golang's pick for a bucket factor of 1.1
	nativeMinSchema     int32 = -4
	nativeMaxBuckets          = 100
	nativeMinResetAfter       = time.Hour
	nativeZeroThreshold       = 2.938735877055719e-39 // client_golang's DefNativeHistogramZeroThreshold
)

// nativeBounds[s] are client_golang's bounds of the buckets of schema s > 0
// within one power of two, as fractions of math.Frexp, to the last bit.
var nativeBounds = [nativeSchema + 1][]float64{
	1: {0.5, 0.7071067811865475},
	2: {0.5, 0.5946035575013605, 0.7071067811865475, 0.8408964152537144},
	3: {
		0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
		0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
	},
}

// durationHistogram holds for one endpoint what client_golang's histogram
// with these options holds for latencies (never negative), in a tenth of
// its memory (BENCHMARKS.md, item 8). Its owner serialises the calls.
type durationHistogram struct {
	count   uint64
	sum     float64
	classic [len(durationBuckets)]uint64
	zero    uint64
	schema  int32
	native  map[int]int64
	// created is the start of the counts; resetAt, when set, is when they
	// restart, set when the bucket limit first lowered the resolution.
	created, resetAt time.Time
}

func newDurationHistogram() *durationHistogram {
	return &durationHistogram{schema: nativeSchema, native: map[int]int64{}, created: time.Now()}
}

// observe adds one latency in seconds.
func (h *durationHistogram) observe(v float64) {
	now := time.Now()
	h.resetIfDue(now)
	h.add(v)
	if len(h.native) <= nativeMaxBuckets {
		return
	}
	// Past the bucket limit: start afresh with this latency if the counts
	// are an hour old; else halve the resolution until they are.
	if h.resetAt.IsZero() && now.Sub(h.created) >= nativeMinResetAfter {
		h.reset(now)
		h.add(v)
		return
	}
	if h.resetAt.IsZero() {
		h.resetAt = h.created.Add(nativeMinResetAfter)
	}
	h.halveResolution()
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
	// Bucket i holds the values in (2^((i-1)/2^schema), 2^(i/2^schema)].
	frac, exp := math.Frexp(v)
	if h.schema > 0 {
		bounds := nativeBounds[h.schema]
		h.native[sort.SearchFloat64s(bounds, frac)+(exp-1)*len(bounds)]++
		return
	}
	if frac == 0.5 {
		exp--
	}
	h.native[(exp+1<<-h.schema-1)>>-h.schema]++
}

// halveResolution merges pairs of native buckets, one schema down.
func (h *durationHistogram) halveResolution() {
	if h.schema == nativeMinSchema {
		return
	}
	h.schema--
	merged := make(map[int]int64, len(h.native))
	for i, n := range h.native {
		// Bucket i of the finer schema lies in bucket ceil(i/2).
		if i > 0 {
			i++
		}
		merged[i/2] += n
	}
	h.native = merged
}

func (h *durationHistogram) resetIfDue(now time.Time) {
	if !h.resetAt.IsZero() && !now.Before(h.resetAt) {
		h.reset(h.resetAt)
	}
}

func (h *durationHistogram) reset(at time.Time) {
	h.count, h.sum, h.classic, h.zero = 0, 0, [len(durationBuckets)]uint64{}, 0
	h.schema, h.native, h.created, h.resetAt = nativeSchema, map[int]int64{}, at, time.Time{}
}

// metric returns the histogram as a sample of desc for the endpoint.
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
