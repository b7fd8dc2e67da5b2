//go:build cluster

package alerterd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestClusterRedisReferenceProof: the reference proof with the alerter's
// Redis a Redis Cluster of three primaries (NOFLY_REDIS_ADDR with several
// addresses): the batch script, the dispatcher and the store's reads run
// through go-redis's cluster client. The prefix is chosen so that the six
// partitions' hash tags fall on all three primaries, and afterwards every
// key the run wrote is checked to carry a partition's or the zone store's
// tag, on the primary that serves it. The outbox and alerts.events equal
// the reference: 0 missing, 0 duplicate.
func TestClusterRedisReferenceProof(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	ctx := context.Background()
	rc := testenv.StartRedisCluster(t, false)
	cc := rc.Client(t)
	brokers := testenv.Kafka(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	want := referenceAt(loadRefZones(t, zonesPath()), sc, 6)
	p := newPipeline(t, brokers, strings.Join(rc.Addrs(), ","), 6).withEvents()
	p.cluster = cc

	spreadPrefix(t, rc, p)

	cfg := p.config()
	stop := p.startInProcess(cfg)
	began := time.Now()
	p.produceAt(sc.Records, sc.Received)
	testenv.CheckFor(t, 180*time.Second, p.caughtUp)
	t.Logf("%d records applied through the cluster in %v", len(sc.Records), time.Since(began).Round(time.Millisecond))
	p.checkEventsTopic()
	stop()
	compareEvents(t, "outbox on Redis Cluster", want, eventsFromNDJSON(t, p.outbox()))

	// Every key of the run is in a partition's slot (or the zone store's),
	// on the primary serving it: no script wrote outside its tag.
	tags := map[string]bool{"{" + p.prefix + ":zones}": true}
	for part := range p.partitions {
		tags[redislayout.Of(p.prefix, p.topic, part).Tag()] = true
	}
	var mu sync.Mutex // ForEachMaster runs fn on the primaries concurrently
	perNode := map[string]int{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "{"+p.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			tag := key[:strings.IndexByte(key, '}')+1]
			if !tags[tag] {
				return fmt.Errorf("key %q on %s carries no partition's tag", key, node.Options().Addr)
			}
			mu.Lock()
			perNode[node.Options().Addr]++
			mu.Unlock()
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perNode) != 3 {
		t.Fatalf("keys on %d primaries (%v), want 3", len(perNode), perNode)
	}
	t.Logf("keys per primary: %v", perNode)
}
