package alerterd

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/geofence"
)

// loadZones reads the zone file with the default options and builds its
// index (tests and benchmarks; serve and replay use Config.zoneSource).
func loadZones(path string) (*geofence.Index, error) {
	ix, _, err := zoneSource{path: path}.load()
	return ix, err
}

// newRedisClient returns the store's client: no automatic retries, because
// the outcome of a failed script is unknown and only a reload tells it.
func newRedisClient(addr, name string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ClientName: name, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
}
