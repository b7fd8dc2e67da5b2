package scenario_test

import (
	"bytes"
	"testing"

	"github.com/nofly-dev/nofly/internal/scenario"
)

func TestGenerateIsDeterministicAndHasTheMix(t *testing.T) {
	cfg := scenario.DefaultConfig()
	a, b := scenario.Generate(cfg), scenario.Generate(cfg)
	if !bytes.Equal(a.NDJSON(), b.NDJSON()) {
		t.Fatal("two runs with one seed differ")
	}
	cfg.Seed = 2
	if bytes.Equal(a.NDJSON(), scenario.Generate(cfg).NDJSON()) {
		t.Error("different seeds give the same records")
	}
	if a.Unique+a.Unsent != 100*500 || len(a.Records) != a.Unique+a.Duplicates+a.Stale || len(a.Received) != len(a.Records) || a.Silences < 20 {
		t.Errorf("unique %d dup %d stale %d total %d", a.Unique, a.Duplicates, a.Stale, len(a.Records))
	}
	if float64(a.Duplicates) < 0.03*float64(len(a.Records)) || a.Stale < 100 || a.Wild < 20 || a.Restarts < 20 {
		t.Errorf("want >= 3%% duplicates and some stale records, wild seqs and restarts: %d dup, %d stale, %d wild, %d restarts of %d",
			a.Duplicates, a.Stale, a.Wild, a.Restarts, len(a.Records))
	}
	for i := 1; i < len(a.Received); i++ {
		if a.Received[i].Before(a.Received[i-1]) {
			t.Fatalf("record %d received before record %d", i, i-1)
		}
	}
	t.Logf("%d records: %d unique, %d duplicates, %d stale, %d wild seqs, %d restarts, %d silences (%d fixes unsent)",
		len(a.Records), a.Unique, a.Duplicates, a.Stale, a.Wild, a.Restarts, a.Silences, a.Unsent)
}
