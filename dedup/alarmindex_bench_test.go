package dedup_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/dedup"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// BenchmarkAlarmIndexMemory fills the alarm index of one partition with
// 10,000 alarms through the batch script (events shaped like the
// alerter's, 100 per batch, each of another drone), then clears them all,
// and reports the index's bytes per alarm (MEMORY USAGE of its keys, the
// secondary sets included, SAMPLES 0: every field counted) active and
// cleared. The outbox and event buckets are not
// counted: they are bounded by their own retention. One op = one fill.
func BenchmarkAlarmIndexMemory(b *testing.B) {
	const n, per = 10000, 100
	ctx := context.Background()
	rc := testenv.RedisClient(b)
	raised := `{"event_id":"%[1]s:raised","alarm_id":"%[1]s","type":"raised","drone_id":"UAV-%04[2]d","zone_id":"EGLL-CTR","zone_name":"Heathrow CTR","category":"restricted","seq":123456,"ts":"2026-12-02T10:%02[3]d:%02[4]d.25Z","lat":51.47001,"lon":-0.49,"alt_m":80,"alt_ref":"agl","height_assumed":false,"partition":3,"offset":1234567,"zone_version":12}`
	cleared := `{"event_id":"%[1]s:cleared","alarm_id":"%[1]s","type":"cleared","drone_id":"UAV-%04[2]d","zone_id":"EGLL-CTR","zone_name":"Heathrow CTR","category":"restricted","seq":123500,"ts":"2026-12-02T11:%02[3]d:%02[4]d.25Z","lat":51.48001,"lon":-0.5,"alt_m":80,"alt_ref":"agl","height_assumed":false,"reason":"exited","partition":3,"offset":1234600,"zone_version":12}`
	usage := func(k redislayout.Keys) int64 {
		var sum int64
		keys := []string{k.Alarms(), k.AlarmsActive(), k.AlarmsCleared(), k.AlarmsGC()}
		// The secondary sets (issue 29): one per drone, zone and category
		// and state.
		for _, pat := range []string{k.AlarmsActive() + ":*", k.AlarmsCleared() + ":*"} {
			ks, err := rc.Keys(ctx, strings.NewReplacer("{", "\\{", "}", "\\}").Replace(pat)).Result()
			if err != nil {
				b.Fatal(err)
			}
			keys = append(keys, ks...)
		}
		for _, key := range keys {
			v, err := rc.Do(ctx, "MEMORY", "USAGE", key, "SAMPLES", "0").Int64()
			if err != nil && !strings.Contains(err.Error(), "nil") {
				b.Fatal(err)
			}
			sum += v
		}
		return sum
	}
	var active, clr float64
	for i := 0; i < b.N; i++ {
		prefix := testenv.RedisPrefix(b, "alarmmem"+strconv.Itoa(i))
		s, err := dedup.NewRedis(rc, dedup.RedisOptions{Prefix: prefix, Topic: "t", AlarmRetention: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		k := s.Keys(0)
		version := dedup.NoVersion
		fill := func(tmpl, suffix string) {
			for a := 0; a < n; a += per {
				bt := dedup.Batch{Applied: version + per}
				for j := a; j < a+per; j++ {
					id := fmt.Sprintf("%032x", j)
					bt.Events = append(bt.Events, dedup.Event{ID: id + suffix, JSON: []byte(fmt.Sprintf(tmpl, id, j, j/60%60, j%60))})
				}
				if res, err := s.Commit(ctx, 0, version, bt); err != nil || res.Appended != per {
					b.Fatal(res, err)
				}
				version = bt.Applied
			}
		}
		fill(raised, dedup.SuffixRaised)
		active += float64(usage(k)) / n
		fill(cleared, dedup.SuffixCleared)
		clr += float64(usage(k)) / n
	}
	b.ReportMetric(active/float64(b.N), "active_B/alarm")
	b.ReportMetric(clr/float64(b.N), "cleared_B/alarm")
}
