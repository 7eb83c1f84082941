package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHistogramQuantiles compares the histogram's quantiles with the exact
// ones of the same samples: each within the 1/64 bucket width.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h histogram
	samples := make([]time.Duration, 200000)
	for i := range samples {
		// Log-uniform from 1 ns to ~1 s, like latencies with a long tail.
		samples[i] = time.Duration(math.Exp2(rng.Float64() * 30))
		h.add(samples[i])
	}
	slices.Sort(samples)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
		exact := samples[int(q*float64(len(samples)))]
		got := h.quantile(q)
		if got > exact || float64(exact-got) > float64(exact)/64+1 {
			t.Errorf("q%.3f: histogram %v, exact %v", q, got, exact)
		}
	}
	if h.max != samples[len(samples)-1] {
		t.Errorf("max %v, want %v", h.max, samples[len(samples)-1])
	}
}

// TestHistogramBuckets: every duration lands in the bucket whose range holds
// it, and buckets are ordered.
func TestHistogramBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 63, 64, 65, 127, 128, 129, 1000, 123456789, time.Hour, 1<<62 + 12345} {
		i := bucketOf(d)
		if lowest(i) > d || (i+1 < len(histogram{}.counts) && lowest(i+1) <= d) {
			t.Errorf("%d: bucket %d holds [%d, %d)", d, i, lowest(i), lowest(i+1))
		}
	}
	var h histogram
	h.add(-5)
	if h.quantile(0.5) != 0 {
		t.Errorf("a negative duration counts as 0")
	}
	var a, b histogram
	a.add(time.Millisecond)
	b.add(time.Second)
	a.merge(&b)
	if a.n != 2 || a.max != time.Second || a.quantile(0.99) < time.Second-time.Second/64 {
		t.Errorf("merge: n %d max %v p99 %v", a.n, a.max, a.quantile(0.99))
	}
}
