package soak

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/benchcompare"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestSoakSmoke runs a small soak against the real services (Kafka, Redis,
// chromium; it fails when one is missing): every figure of a sample is
// there.
func TestSoakSmoke(t *testing.T) {
	brokers, redisAddr := testenv.Kafka(t), testenv.Redis(t)
	t.Chdir(testenv.RepoRoot())
	c := Defaults()
	c.Brokers, c.Redis = brokers[0], redisAddr
	c.KafkaPIDFile = benchcompare.DefaultKafkaPIDFile()
	c.Drones, c.Clients, c.Partitions, c.Zones = 300, 3, 3, 2000
	c.TogglerShare, c.ToggleEvery = 0.1, 2
	c.Duration, c.Sample, c.Dashboards = 12*time.Second, 4*time.Second, 1
	c.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) < 2 {
		t.Fatalf("%d samples, want at least 2", len(r.Samples))
	}
	tot := totals(r.Samples)
	if tot.Positions < 2000 || tot.Refused != 0 {
		t.Errorf("positions %d accepted, %d refused; want ≥ 2,000 and none refused", tot.Positions, tot.Refused)
	}
	if r.Latency.N == 0 || r.Unmatched != 0 {
		t.Errorf("latency of %d events, %d unmatched: the togglers' alarms should all reach the SSE client", r.Latency.N, r.Unmatched)
	}
	if r.ZoneSet.Zones != 2000 || r.ZoneSet.Version < 2 || r.ZoneSet.PutS <= 0 || r.ZoneSet.SwitchS < r.ZoneSet.PutS {
		t.Errorf("zone load %+v", r.ZoneSet)
	}
	last := r.Samples[len(r.Samples)-1]
	if last.AlerterMB <= 0 || last.IngestMB <= 0 || last.RedisMB <= 0 || last.OwnKeys == 0 || last.OwnMB <= 0 {
		t.Errorf("memory figures missing: %+v", last)
	}
	for _, n := range []string{"ingest", "alerter", "redis", "chromium", "soak"} {
		if tot.CPU[n] < 0 {
			t.Errorf("no CPU figure for %s", n)
		}
	}
	if len(last.Pages) != 1 || last.Pages[0].Frames == 0 || last.Pages[0].HeapMB <= 0 {
		t.Errorf("page sample %+v", last.Pages)
	}
}
