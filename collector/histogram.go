package collector

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The request latency histogram: classic buckets from 5 ms to 30 s, so
// that p50/p95/p99 work on Prometheus servers without native histograms,
// and native buckets as client_golang makes them for
// NativeHistogramBucketFactor 1.1 (schema 3), NativeHistogramMaxBucketNumber
// 100 and NativeHistogramMinResetDuration one hour, with its default zero
// threshold.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

const (
	nativeSchema        int32 = 3 // client_golang's pick for a bucket factor of 1.1
	nativeMinSchema     int32 = -4
	nativeMaxBuckets          = 100
	nativeMinResetAfter       = time.Hour
	// nativeZeroThreshold is client_golang's DefNativeHistogramZeroThreshold,
	// 2^-128: observations at most this far from zero go to the zero bucket.
	nativeZeroThreshold = 2.938735877055719e-39
)

// nativeBounds[s] are the bounds of the buckets of schema s > 0 within
// one power of two, as fractions of math.Frexp: 2^(i/2^s) / 2, written as
// client_golang and Prometheus write them (not all are the float nearest
// to the exact value, so they are not computed), so that a value falls in
// the same bucket on /metrics, on /probe and in Prometheus' own tables.
var nativeBounds = [nativeSchema + 1][]float64{
	1: {0.5, 0.7071067811865475},
	2: {0.5, 0.5946035575013605, 0.7071067811865475, 0.8408964152537144},
	3: {
		0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
		0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
	},
}

// durationHistogram is the latency histogram of one endpoint of one
// service. It holds what client_golang's histogram with the options above
// holds and exposes it the same way, in a fraction of the memory: about
// 300 bytes and 16 per native bucket, against 1.5 to 2.5 KB (a descriptor
// of its own, two copies of every count so that Observe needs no lock, and
// a sync.Map per sign). /probe keeps four per target, for up to 1,000
// targets. Observe takes a lock, which costs nothing at a few requests per
// scrape.
type durationHistogram struct {
	desc       *prometheus.Desc
	labelValue string
	now        func() time.Time // time.Now, but for tests

	mu      sync.Mutex
	count   uint64
	sum     float64
	classic [13]uint64 // by durationBuckets, then +Inf
	schema  int32
	zero    uint64
	// positive and negative are the native buckets, sorted by index.
	positive, negative []nativeBucket
	// created is the start of the counts; resetAt, when not zero, is the
	// time at which they restart, scheduled when the bucket limit first
	// lowered the resolution.
	created, resetAt time.Time
}

type nativeBucket struct {
	index int32
	count uint64
}

var _ prometheus.Metric = (*durationHistogram)(nil)

func newDurationHistogram(desc *prometheus.Desc, labelValue string) *durationHistogram {
	h := &durationHistogram{desc: desc, labelValue: labelValue, now: time.Now, schema: nativeSchema}
	h.created = h.now()
	return h
}

// Observe adds one observation.
func (h *durationHistogram) Observe(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.resetIfDue(now)
	h.add(v)
	if len(h.positive)+len(h.negative) <= nativeMaxBuckets {
		return
	}
	// Past the bucket limit: start afresh if the counts are old enough,
	// keeping this observation; else halve the resolution, and restart
	// the counts once they are, to get it back.
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

// add counts v in every bucket it belongs to.
func (h *durationHistogram) add(v float64) {
	h.count++
	h.sum += v
	i, _ := slices.BinarySearch(durationBuckets, v)
	if math.IsNaN(v) {
		i = len(durationBuckets)
	}
	h.classic[i]++
	if math.IsNaN(v) {
		return
	}
	switch key := nativeKey(v, h.schema); {
	case v > nativeZeroThreshold:
		h.positive = addNative(h.positive, key, 1)
	case v < -nativeZeroThreshold:
		h.negative = addNative(h.negative, key, 1)
	default:
		h.zero++
	}
}

// nativeKey is the index of the native bucket of v at schema: bucket i
// holds the values in (2^((i-1)/2^schema), 2^(i/2^schema)], and -v goes
// where v does.
func nativeKey(v float64, schema int32) int32 {
	inf := math.IsInf(v, 0)
	if inf {
		v = math.MaxFloat64
	}
	frac, exp := math.Frexp(math.Abs(v))
	var key int
	if schema > 0 {
		bounds := nativeBounds[schema]
		key = sort.SearchFloat64s(bounds, frac) + (exp-1)*len(bounds)
	} else {
		key = exp
		if frac == 0.5 {
			key--
		}
		key = (key + 1<<-schema - 1) >> -schema
	}
	if inf {
		key++
	}
	return int32(key)
}

// addNative adds n to the bucket at index, made when missing.
func addNative(buckets []nativeBucket, index int32, n uint64) []nativeBucket {
	i, found := slices.BinarySearchFunc(buckets, index, func(b nativeBucket, index int32) int { return int(b.index - index) })
	if found {
		buckets[i].count += n
		return buckets
	}
	return slices.Insert(buckets, i, nativeBucket{index: index, count: n})
}

// halveResolution merges pairs of native buckets, one schema down.
func (h *durationHistogram) halveResolution() {
	if h.schema == nativeMinSchema {
		return
	}
	h.schema--
	merge := func(buckets []nativeBucket) []nativeBucket {
		var out []nativeBucket
		for _, b := range buckets {
			// Bucket i of the finer schema lies in bucket ceil(i/2).
			i := b.index
			if i > 0 {
				i++
			}
			out = addNative(out, i/2, b.count)
		}
		return out
	}
	h.positive, h.negative = merge(h.positive), merge(h.negative)
}

// resetIfDue restarts the counts when a restart scheduled by the bucket
// limit is due.
func (h *durationHistogram) resetIfDue(now time.Time) {
	if !h.resetAt.IsZero() && !now.Before(h.resetAt) {
		h.reset(h.resetAt)
	}
}

func (h *durationHistogram) reset(at time.Time) {
	h.count, h.sum, h.classic, h.zero = 0, 0, [13]uint64{}, 0
	h.schema, h.positive, h.negative = nativeSchema, nil, nil
	h.created, h.resetAt = at, time.Time{}
}

// Desc implements prometheus.Metric.
func (h *durationHistogram) Desc() *prometheus.Desc { return h.desc }

// Write implements prometheus.Metric.
func (h *durationHistogram) Write(out *dto.Metric) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resetIfDue(h.now())
	his := &dto.Histogram{
		SampleCount:      new(h.count),
		SampleSum:        new(h.sum),
		Bucket:           make([]*dto.Bucket, len(durationBuckets)),
		CreatedTimestamp: timestamppb.New(h.created),
		Schema:           new(h.schema),
		ZeroThreshold:    new(float64(nativeZeroThreshold)),
		ZeroCount:        new(h.zero),
	}
	var cum uint64
	for i, le := range durationBuckets {
		cum += h.classic[i]
		his.Bucket[i] = &dto.Bucket{CumulativeCount: new(cum), UpperBound: new(le)}
	}
	his.PositiveSpan, his.PositiveDelta = nativeSpans(h.positive)
	his.NegativeSpan, his.NegativeDelta = nativeSpans(h.negative)
	out.Histogram = his
	out.Label = []*dto.LabelPair{{Name: new("endpoint"), Value: new(h.labelValue)}}
	return nil
}

// nativeSpans encodes buckets as spans of consecutive buckets, each count
// a delta to the one before, a gap of one or two buckets written as empty
// buckets rather than a new span (as client_golang does).
func nativeSpans(buckets []nativeBucket) ([]*dto.BucketSpan, []int64) {
	var (
		spans  []*dto.BucketSpan
		deltas []int64
		prev   int64
		next   int32
	)
	appendCount := func(n int64) {
		*spans[len(spans)-1].Length++
		deltas = append(deltas, n-prev)
		prev = n
	}
	for k, b := range buckets {
		gap := b.index - next
		if k == 0 || gap > 2 {
			spans = append(spans, &dto.BucketSpan{Offset: new(gap), Length: new(uint32(0))})
		} else {
			for range gap {
				appendCount(0)
			}
		}
		appendCount(int64(b.count))
		next = b.index + 1
	}
	return spans, deltas
}
