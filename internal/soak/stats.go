package soak

import (
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank q-quantile of sorted (0 for none), as
// benchcompare.Percentile is for durations.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// median of xs (not sorted; xs is left as it was).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentile(s, 0.5)
}

// lagSeconds is a lag of records in time: how long the offered rate takes
// to produce that many records, the time the alerter is behind.
func lagSeconds(records int64, perSecond float64) float64 {
	if perSecond <= 0 || records <= 0 {
		return 0
	}
	return float64(records) / perSecond
}

// per1k is CPU seconds per 1,000 positions; -1 when either is unknown.
func per1k(cpuSeconds float64, positions int64) float64 {
	if cpuSeconds < 0 || positions <= 0 {
		return -1
	}
	return cpuSeconds / (float64(positions) / 1000)
}

// Step is one rate of a ceiling search.
type Step struct {
	Drones int `json:"drones"`
	// Positions accepted per second over the step.
	PerSecond float64 `json:"per_second"`
	// LagMaxS is the largest lag (seconds) after the step's first sample,
	// which absorbs the change of rate; Refused the positions ingest did
	// not accept.
	LagMaxS float64       `json:"lag_max_s"`
	Refused int64         `json:"refused"`
	P99     time.Duration `json:"p99_ns"`
	Pass    bool          `json:"pass"`
}

// passes says whether a step carried its rate: the lag under target,
// every position accepted and at least 95 % of the offered rate sent (a
// generator or ingest that falls behind offers less than asked).
func passes(lagMaxS float64, refused int64, perSecond, offered float64, target time.Duration) bool {
	return lagMaxS < target.Seconds() && refused == 0 && perSecond >= 0.95*offered
}

// nextStep is the ceiling search: from start, double while steps pass (up
// to most); after a failure, bisect between the highest pass and the
// lowest failure, to multiples of 500 drones, until they are within 10 %
// (or 500 drones) of each other. ceiling is the highest pass so far (0:
// none); done says the search is over.
func nextStep(steps []Step, start, most int) (next, ceiling int, done bool) {
	if len(steps) == 0 {
		return start, 0, false
	}
	hi := 0 // the lowest failure
	for _, s := range steps {
		if !s.Pass && (hi == 0 || s.Drones < hi) {
			hi = s.Drones
		}
	}
	lo := 0 // the highest pass below it
	for _, s := range steps {
		if s.Pass && s.Drones > lo && (hi == 0 || s.Drones < hi) {
			lo = s.Drones
		}
	}
	if hi == 0 {
		if lo >= most {
			return 0, lo, true
		}
		return min(2*lo, most), lo, false
	}
	gap := max(lo/10, 500)
	if hi-lo <= gap {
		return 0, lo, true
	}
	mid := int(math.Round(float64(lo+hi)/2/500)) * 500
	if mid <= lo || mid >= hi {
		return 0, lo, true
	}
	return mid, lo, false
}
