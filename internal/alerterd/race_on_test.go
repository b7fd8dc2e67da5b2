//go:build race

package alerterd

// raceOn: the tests run under the race detector, which makes a national
// zone set's parse 5-10 times slower.
const raceOn = true
