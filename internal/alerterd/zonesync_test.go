package alerterd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/api"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/geofence/zonestore"
	"github.com/nofly-dev/nofly/internal/redislayout"
	"github.com/nofly-dev/nofly/internal/scenario"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// zoneMember is an in-process alerter that takes its zones from the zone
// store (startZoneSync, as serve does) and records the partitions it
// commits.
type zoneMember struct {
	*member
	zones *geofence.Current
	mu    sync.Mutex
	owned map[int]bool
}

func (zm *zoneMember) partitions() []int {
	zm.mu.Lock()
	defer zm.mu.Unlock()
	var ps []int
	for p := range zm.owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (p *pipeline) startZoneMember(name string) *zoneMember { return p.startZoneMemberWith(name, nil) }

// startZoneMemberWith is startZoneMember with a hook called before each
// batch's commit, after the member has recorded it.
func (p *pipeline) startZoneMemberWith(name string, hook func(consume.CommitPoint)) *zoneMember {
	t := p.t
	cfg := p.config()
	log := testLog(t).With("member", name)
	rc := newRedisClient(cfg.RedisAddr, "zonesync-"+name)
	m := newMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	zm := &zoneMember{zones: &geofence.Current{}, owned: map[int]bool{}}
	if _, err := startZoneSync(ctx, cfg, rc, zm.zones, m, log); err != nil {
		t.Fatal(err)
	}
	o := cfg.groupOptions(rc, zm.zones, log)
	o.Dialer = &kafka.Dialer{ClientID: "nofly-zonesync-" + name, Timeout: 10 * time.Second, DualStack: true}
	o.Registerer = m.reg
	o.BeforeCommit = func(cp consume.CommitPoint) {
		zm.mu.Lock()
		zm.owned[cp.Partition] = true
		zm.mu.Unlock()
		if hook != nil {
			hook(cp)
		}
	}
	g, err := consume.New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("member %s: %v", name, err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("member %s did not stop within 60s", name)
		}
		_ = rc.Close()
	}
	t.Cleanup(stop)
	zm.member = &member{g: g, stop: stop}
	return zm
}

// TestZoneChangeReachesEveryInstance: two alerters follow the zone store
// seeded from --zones (version 1). A zone deleted through the API of the
// first (version 2) is in use on the second within 5 s: every partition the
// second commits records its batches under version 2 within 5 s of the
// API's answer. Then each partition, dumped from Kafka, replayed with the
// zone history (GET /v1/zones/history saved to a file, or its URL) equals its outbox
// byte for byte and in order, zone_version, partition and offset included;
// replayed with the seed file alone it does not.
func TestZoneChangeReachesEveryInstance(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	sc := scenario.Generate(scenario.DefaultConfig())
	p := newPipeline(t, brokers, raddr, 4)
	cfg := p.config()

	a := p.startZoneMember("a")
	srv, err := api.New(api.Options{Redis: p.rc, Prefix: p.prefix, Topic: p.topic, Partitions: p.partitions, ZoneValidator: cfg.zoneValidator()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	if v := a.zones.Load().ZoneVersion(); v != 1 {
		t.Fatalf("the first alerter runs zone version %d, want 1 (seeded from --zones)", v)
	}
	p.produceAt(sc.Records[:len(sc.Records)/5], sc.Received[:len(sc.Records)/5])
	b := p.startZoneMember("b")
	testenv.CheckFor(t, 60*time.Second, func() error {
		if na, nb := a.g.Partitions(), b.g.Partitions(); na == 0 || nb == 0 || na+nb != p.partitions {
			return fmt.Errorf("partitions a=%d b=%d", na, nb)
		}
		return nil
	})
	produced := p.produceInBackground(sc.Records[len(sc.Records)/5:], sc.Received[len(sc.Records)/5:], 4000)
	testenv.CheckFor(t, 30*time.Second, func() error {
		if len(b.partitions()) == 0 {
			return errors.New("b has committed nothing yet")
		}
		return nil
	})

	req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/v1/zones/CIRC", nil)
	req.Header.Set("If-Match", "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	changed := time.Now()
	if res.StatusCode != http.StatusOK || res.Header.Get("ETag") != `"2"` {
		t.Fatalf("DELETE /v1/zones/CIRC: %d %s %s", res.StatusCode, res.Header.Get("ETag"), body)
	}
	// B's partitions: their last committed batch carries version 2.
	testenv.CheckFor(t, 5*time.Second, func() error {
		if v := b.zones.Load().ZoneVersion(); v != 2 {
			return fmt.Errorf("b runs zone version %d", v)
		}
		for _, part := range b.partitions() {
			v, err := p.rc.Get(context.Background(), redislayout.Of(p.prefix, p.topic, part).ZoneVersion()).Result()
			if err != nil || v != "2" {
				return fmt.Errorf("partition %d (b's) committed zone version %q (%v)", part, v, err)
			}
		}
		return nil
	})
	t.Logf("zone version 2 in use on b (partitions %v) %v after the API answered", b.partitions(), time.Since(changed).Round(time.Millisecond))
	<-produced
	testenv.CheckFor(t, 120*time.Second, p.caughtUp)
	a.stop()
	b.stop()

	// The history as the API answers it, saved to a file.
	res, err = http.Get(hs.URL + "/v1/zones/history")
	if err != nil {
		t.Fatal(err)
	}
	hist, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("history: %d %s", res.StatusCode, hist)
	}
	dir := t.TempDir()
	hpath := filepath.Join(dir, "history.json")
	if err := os.WriteFile(hpath, hist, 0o644); err != nil {
		t.Fatal(err)
	}
	var h zonestore.History
	_ = json.Unmarshal(hist, &h)
	t.Logf("zone switches: %s", mustJSON(h.Switches))

	s := p.store()
	v2, total := 0, 0
	for part := 0; part < p.partitions; part++ {
		in := filepath.Join(dir, fmt.Sprintf("p%d.ndjson", part))
		p.dumpPartition(part, in)
		es, err := s.Outbox(context.Background(), part)
		if err != nil {
			t.Fatal(err)
		}
		var live bytes.Buffer
		for _, e := range es {
			live.Write(e.Event)
			live.WriteByte('\n')
			if bytes.Contains(e.Event, []byte(`"zone_version":2`)) {
				v2++
			}
		}
		total += len(es)
		src := hpath
		if part == 0 {
			src = hs.URL + "/v1/zones/history" // the URL form
		}
		replayed := replayPartition(t, in, "--zone-history", src, "--partition", strconv.Itoa(part), "--batch", "77")
		if !bytes.Equal(replayed, live.Bytes()) {
			t.Errorf("partition %d: replay with the zone history differs from the outbox (%d live events):\n%s", part, len(es), firstDiff(live.Bytes(), replayed))
		}
		if plain := replayPartition(t, in, "--zones", zonesPath(), "--partition", strconv.Itoa(part)); bytes.Equal(plain, live.Bytes()) && part == 0 {
			t.Errorf("partition %d: replay with the seed file alone equals the outbox too: the test does not see the zone change", part)
		}
	}
	if v2 == 0 {
		t.Errorf("no event carries zone version 2 (of %d)", total)
	}
	t.Logf("%d events, %d with zone version 2; every partition's replay with the history equals its outbox", total, v2)
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// dumpPartition writes a partition's records, one per line from offset 0
// (a gap as blank lines), each after its Kafka timestamp and a tab (the
// log's clock), as `kcat -C -p P -o beginning -e -f '%T\t%s\n'` would.
func (p *pipeline) dumpPartition(part int, path string) {
	ends, err := p.endOffsets()
	if err != nil {
		p.t.Fatal(err)
	}
	p.dumpPartitionTo(part, ends[part], path)
}

// dumpPartitionTo is dumpPartition up to offset end (excluded).
func (p *pipeline) dumpPartitionTo(part int, end int64, path string) {
	t := p.t
	ends := map[int]int64{part: end}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	if ends[part] > 0 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: p.brokers, Topic: p.topic, Partition: part, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		next := int64(0)
		for next < ends[part] {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for ; next < m.Offset; next++ {
				w.WriteByte('\n')
			}
			fmt.Fprintf(w, "%d\t", m.Time.UnixMilli())
			w.Write(m.Value)
			w.WriteByte('\n')
			next = m.Offset + 1
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func replayPartition(t *testing.T, in string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"replay", "--input", in}, args...), func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("replay %v exited %d: %s", args, code, stderr.String())
	}
	return stdout.Bytes()
}

func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n live:   %s\n replay: %s", i+1, w, g)
		}
	}
	return "equal"
}

// TestZoneSyncSeedReloadFollow: the first instance seeds an empty store
// from its file (version 1), a second one started with another file uses
// the store's set; SIGHUP stores the file as the next version (not when it
// equals the current set; a bad file keeps everything), and a store reset
// is followed.
func TestZoneSyncSeedReloadFollow(t *testing.T) {
	defer func(d time.Duration) { zonePoll = d }(zonePoll)
	zonePoll = 50 * time.Millisecond
	raddr := testenv.Redis(t)
	orig, err := os.ReadFile(zonesPath())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a.geojson"), filepath.Join(dir, "b.geojson")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(fileA, string(orig))
	write(fileB, strings.Replace(string(orig), `"id":"POLY"`, `"id":"POLY2"`, 1))
	cfg := DefaultConfig()
	cfg.RedisAddr, cfg.RedisPrefix = raddr, testenv.RedisPrefix(t, "zonesync")
	rc := newRedisClient(raddr, "zonesync-test")
	defer rc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(file string) (*zoneSync, *geofence.Current) {
		c := cfg
		c.Zones = file
		var cur geofence.Current
		zs, err := startZoneSync(ctx, c, rc, &cur, newMetrics(), testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		return zs, &cur
	}
	has := func(cur *geofence.Current, id string) bool { _, ok := cur.Load().Zone(id); return ok }
	a, curA := start(fileA)
	_, curB := start(fileB)
	if curA.Load().ZoneVersion() != 1 || curB.Load().ZoneVersion() != 1 || !has(curB, "POLY") || has(curB, "POLY2") {
		t.Fatalf("after the seed: a at %d, b at %d with POLY2 %v; want both at 1 with the first file's zones",
			curA.Load().ZoneVersion(), curB.Load().ZoneVersion(), has(curB, "POLY2"))
	}
	mf, err := a.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gauge := -1.0
	for _, f := range mf {
		if f.GetName() == "nofly_alerter_zone_version" {
			gauge = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if gauge != 1 {
		t.Errorf("nofly_alerter_zone_version %v, want 1", gauge)
	}
	store := cfg.zoneStore(rc)
	version := func() int64 { v, _ := store.Version(ctx); return v }

	a.reload(ctx) // the file equals the set: no version
	if v := version(); v != 1 {
		t.Errorf("SIGHUP on an unchanged file made version %d", v)
	}
	write(fileA, `{"type":"FeatureCollection","features":[{"type":"Feature"}]}`)
	a.reload(ctx)
	if v := version(); v != 1 || !has(curA, "POLY") {
		t.Errorf("SIGHUP on a bad file: version %d, POLY in use %v; want 1 and the zones kept", v, has(curA, "POLY"))
	}
	write(fileA, strings.Replace(string(orig), `"id":"CIRC"`, `"id":"CIRC2"`, 1))
	a.reload(ctx)
	if v := version(); v != 2 || curA.Load().ZoneVersion() != 2 || !has(curA, "CIRC2") {
		t.Fatalf("SIGHUP: store at %d, a at %d; want 2 with CIRC2 in use at once", v, curA.Load().ZoneVersion())
	}
	testenv.CheckFor(t, 5*time.Second, func() error {
		if curB.Load().ZoneVersion() != 2 || !has(curB, "CIRC2") {
			return fmt.Errorf("b at version %d", curB.Load().ZoneVersion())
		}
		return nil
	})
	// A reset: the store emptied and seeded again at version 1.
	testenv.DeleteRedisKeys(ctx, raddr, "{"+cfg.RedisPrefix+":*")
	e := mustEntry(t, cfg, string(orig))
	if _, err := store.Put(ctx, 0, e.Format, e.Zones, "test"); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 5*time.Second, func() error {
		if curB.Load().ZoneVersion() != 1 || !has(curB, "CIRC") {
			return fmt.Errorf("b at version %d after the reset", curB.Load().ZoneVersion())
		}
		return nil
	})
}

func mustEntry(t *testing.T, cfg Config, doc string) zonestore.Entry {
	t.Helper()
	f, norm, _, err := cfg.zoneValidator().Normalize([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return zonestore.Entry{Format: string(f), Zones: norm}
}

// TestZoneSyncStartWaitsForRedis: an alerter started while its Redis is
// down (or dropping connections) waits for it instead of exiting, and
// starts once it is back; a zone file that does not load fails at once.
func TestZoneSyncStartWaitsForRedis(t *testing.T) {
	r := testenv.StartRedis(t)
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.RedisAddr, cfg.RedisPrefix, cfg.Zones = r.Addr(), testenv.RedisPrefix(t, "zonewait"), zonesPath()
	rc := newRedisClient(r.Addr(), "zonewait-test")
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type result struct {
		zs  *zoneSync
		err error
	}
	done := make(chan result, 1)
	var cur geofence.Current
	go func() {
		zs, err := startZoneSync(ctx, cfg, rc, &cur, newMetrics(), testLog(t))
		done <- result{zs, err}
	}()
	select {
	case res := <-done:
		t.Fatalf("startZoneSync returned with Redis down: %v", res.err)
	case <-time.After(700 * time.Millisecond):
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || cur.Load().ZoneVersion() != 1 {
		t.Fatalf("after Redis came back: err %v, zone version %d; want nil and 1", res.err, cur.Load().ZoneVersion())
	}

	bad := filepath.Join(t.TempDir(), "bad.geojson")
	if err := os.WriteFile(bad, []byte(`{"type":"FeatureCollection","features":[{"type":"Feature"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Zones, cfg.RedisPrefix = bad, testenv.RedisPrefix(t, "zonebad")
	start := time.Now()
	var cur2 geofence.Current
	if _, err := startZoneSync(ctx, cfg, rc, &cur2, newMetrics(), testLog(t)); err == nil || !strings.Contains(err.Error(), "bad.geojson") {
		t.Fatalf("a bad zone file: err %v, want an error naming the file", err)
	} else if time.Since(start) > 5*time.Second {
		t.Fatalf("a bad zone file took %v to fail: it was retried", time.Since(start))
	}
}
