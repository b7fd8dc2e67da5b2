package alerterd

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// TestFencedPartitionResumesWhenRedisWentBack: Redis's state of a
// partition goes back (a restore, a crash with appendfsync everysec, a
// failover) under the one alerter that owns it, and no other member
// exists. Its next commit is fenced; the partition's loop returns, which
// ends the member's generation (kafka-go ends a generation when any of its
// goroutines returns), so the member rejoins at once, is assigned the
// partition again and reloads it from Redis: it goes on deciding — here,
// raises the alarm of a drone that enters a zone after the fence — rather
// than leaving the partition without alarms.
func TestFencedPartitionResumesWhenRedisWentBack(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, testenv.Kafka(t), testenv.Redis(t), 1).withEvents()
	ix, err := loadZones(zonesPath())
	if err != nil {
		t.Fatal(err)
	}
	var zones geofence.Current
	zones.Store(ix)
	m := p.startMember("a", &zones)
	now := time.Now().UTC().Truncate(time.Second)
	alt := 50.0
	at := func(seq int64, lat, lon float64) telemetry.Position {
		return telemetry.Position{DroneID: "FENCE-1", Seq: seq, TS: now.Add(time.Duration(seq) * time.Second), Lat: lat, Lon: lon, AltM: &alt}
	}
	p.produce([]telemetry.Position{at(1, 51.60, -0.70), at(2, 51.60, -0.69)})
	testenv.CheckFor(t, 60*time.Second, p.caughtUp)

	// Redis forgets the last commit: the applied offset goes back to 0.
	if err := p.rc.Set(context.Background(), redislayout.Of(p.prefix, p.topic, 0).Applied(), 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	p.produce([]telemetry.Position{at(3, 51.47, -0.47)}) // into a restricted zone
	fencedAt := time.Now()
	testenv.CheckFor(t, 60*time.Second, func() error {
		for _, e := range p.outbox() {
			if bytes.Contains(e, []byte(`"drone_id":"FENCE-1"`)) && bytes.Contains(e, []byte(`"type":"raised"`)) {
				return nil
			}
		}
		return errors.New("no raise for FENCE-1 in the outbox yet")
	})
	t.Logf("raised %v after the record that met the fence", time.Since(fencedAt).Round(10*time.Millisecond))
	if f := m.counter(t, "nofly_alerter_commits_fenced_total"); f < 1 {
		t.Errorf("commits fenced = %v, want ≥ 1: the test did not fence the alerter", f)
	}
	if m.g.Partitions() != 1 {
		t.Errorf("the alerter runs %d partitions after the fence, want 1", m.g.Partitions())
	}
}
