package alerterd

import (
	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redisconn"
)

// newRedisClient is the store's client of addr (one server or a cluster)
// without TLS or ACL, for tests and benchmarks.
func newRedisClient(addr, name string) redis.UniversalClient {
	rc, err := redisconn.Open(addr, redisconn.Access{}, storeTuning(name))
	if err != nil {
		panic(err)
	}
	return rc
}
