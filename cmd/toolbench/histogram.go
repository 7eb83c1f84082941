package main

import (
	"math/bits"
	"time"
)

// histogram counts latencies in log-linear buckets: each power of two of
// nanoseconds is split into 64 sub-buckets, so a percentile read from it is
// within 1/64 (1.6 %) of the true value. Its size is fixed whatever the
// number of samples, so a long run does not grow the heap it measures.
type histogram struct {
	counts [64 * subBuckets]uint64
	n      uint64
	max    time.Duration
}

const subBits = 6
const subBuckets = 1 << subBits

func bucketOf(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < subBuckets {
		return int(v)
	}
	exp := bits.Len64(v) - subBits // >= 1
	return exp*subBuckets + int(v>>(exp-1)) - subBuckets
}

// lowest returns the smallest duration in bucket i.
func lowest(i int) time.Duration {
	if i < subBuckets {
		return time.Duration(i)
	}
	exp, sub := i/subBuckets, i%subBuckets
	return time.Duration(uint64(sub+subBuckets) << (exp - 1))
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the lower bound of the bucket holding the q-quantile.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := min(h.n-1, uint64(q*float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			return lowest(i)
		}
	}
	return h.max
}
