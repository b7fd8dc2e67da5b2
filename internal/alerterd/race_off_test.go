//go:build !race

package alerterd

// raceOn: the tests run under the race detector.
const raceOn = false
