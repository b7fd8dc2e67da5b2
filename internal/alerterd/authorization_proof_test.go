package alerterd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// authEvent is what the proof reads of an outbox event.
type authEvent struct {
	EventID       string `json:"event_id"`
	Type          string `json:"type"`
	DroneID       string `json:"drone_id"`
	ZoneID        string `json:"zone_id"`
	Reason        string `json:"reason"`
	Partition     int    `json:"partition"`
	Offset        int64  `json:"offset"`
	Authorization *struct {
		ID string `json:"id"`
	} `json:"authorization"`
}

func (p *pipeline) authEvents(drone string) []authEvent {
	var out []authEvent
	for _, l := range p.outbox() {
		var e authEvent
		if json.Unmarshal(l, &e) == nil && e.DroneID == drone {
			out = append(out, e)
		}
	}
	return out
}

// authorize POSTs an authorisation to an alerter's API and returns its id.
func authorize(t *testing.T, httpAddr, body string) string {
	t.Helper()
	res, err := http.Post("http://"+httpAddr+"/v1/authorizations", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil || res.StatusCode != http.StatusCreated || a.ID == "" {
		t.Fatalf("POST /v1/authorizations: %d %+v %v", res.StatusCode, a, err)
	}
	return a.ID
}

// TestAuthorizationProof: authorised flights end to end on the real Kafka
// and Redis, through a SIGKILL and a rebalance. AUTH-1, inside POLY, is
// covered by an authorisation that ends 8 s later: its alarm is raised with
// the authorisation, and the alerter stops itself with the unauthorized
// decided but not committed and is SIGKILLed; its successor emits it once,
// at the first tick after the end. AUTH-2, inside unauthorised, gets an
// authorisation through the second alerter's API (one authorized); a third
// alerter joins (a rebalance) and revokes it through its own API: the
// second alerter is on the new version within 5 s, and one unauthorized
// (revoked) follows. Every event once in the outbox and in alerts.events,
// and a replay of each partition with the zone and authorisation histories
// equals the live events.
func TestAuthorizationProof(t *testing.T) {
	t.Parallel()
	brokers, raddr := testenv.Kafka(t), testenv.Redis(t)
	p := newPipeline(t, brokers, raddr, 4).withEvents()
	cfg := p.config()
	alerterBinary(t)

	in := p.startIngest("ingest", 200*time.Millisecond)
	a1 := p.startProc("alerter-1", cfg, faultStopBeforeEventEnv+"=unauthorized")
	a1.up(90 * time.Second)
	rec := func(drone string, seq int64, lat, lon float64) string {
		return fmt.Sprintf(`{"drone_id":%q,"seq":%d,"ts":%q,"lat":%v,"lon":%v,"alt_m":80}`, drone, seq, time.Now().UTC().Format(time.RFC3339Nano), lat, lon)
	}
	// AUTH-1's authorisation ends 8 s from now; a1 must hold it before
	// AUTH-1 is heard, so that its raise is covered.
	until := time.Now().UTC().Add(8 * time.Second).Truncate(time.Millisecond)
	id1 := authorize(t, a1.http, fmt.Sprintf(`{"drone":"AUTH-1","zones":"all","from":%q,"until":%q,"reason":"runway inspection","reference":"P-1"}`,
		time.Now().UTC().Add(-time.Minute).Format(time.RFC3339), until.Format(time.RFC3339Nano)))
	testenv.CheckFor(t, 30*time.Second, func() error {
		if v, err := a1.metric("nofly_alerter_authorization_version"); err != nil || v < 1 {
			return fmt.Errorf("alerter-1's authorisation version %v (%v)", v, err)
		}
		return nil
	})

	ctx, stopTraffic := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := int64(1); ctx.Err() == nil; seq++ {
			ls := []string{rec("AUTH-1", seq, 51.47, -0.47), rec("AUTH-2", seq, 51.47, -0.471)}
			for i := range 4 {
				ls = append(ls, rec(fmt.Sprintf("T-%d", i), seq, 51.60+float64(i)*0.001, -0.70))
			}
			res, err := http.Post(in.url+"/v1/telemetry", "application/x-ndjson", strings.NewReader(strings.Join(ls, "\n")))
			if err == nil {
				res.Body.Close()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	defer func() { stopTraffic(); wg.Wait() }()

	// The unauthorized is decided at the tick after until; a1 stops itself
	// before committing it and is SIGKILLed.
	a1.waitStopped(60 * time.Second)
	stop := a1.faultStop()
	a1.kill()
	if got := p.authEvents("AUTH-1"); len(got) == 0 || got[0].Type != "raised" || got[0].Authorization == nil || got[0].Authorization.ID != id1 {
		t.Fatalf("AUTH-1's first event %+v, want raised with authorisation %s", got, id1)
	}
	t.Logf("alerter-1 SIGKILLed with an unauthorized decided and not committed (partition %d, expected %d)", stop.Partition, stop.Expected)
	a2 := p.startProc("alerter-2", cfg)
	a2.up(90 * time.Second)
	once := func(drone, typ, reason string) func() error {
		return func() error {
			n := 0
			for _, e := range p.authEvents(drone) {
				if e.Type == typ {
					n++
					if e.Reason != reason {
						return fmt.Errorf("%s's %s has reason %q, want %q", drone, typ, e.Reason, reason)
					}
				}
			}
			if n != 1 {
				return fmt.Errorf("%d %s events of %s in the outbox, want 1", n, typ, drone)
			}
			return nil
		}
	}
	testenv.CheckFor(t, 60*time.Second, once("AUTH-1", "unauthorized", "expired"))

	// AUTH-2 is authorised while inside, through alerter-2's API.
	id2 := authorize(t, a2.http, fmt.Sprintf(`{"drone":"AUTH-2*","zones":{"ids":["POLY"]},"from":%q,"until":%q,"reason":"police","reference":"P-2"}`,
		time.Now().UTC().Add(-time.Minute).Format(time.RFC3339), time.Now().UTC().Add(time.Hour).Format(time.RFC3339)))
	testenv.CheckFor(t, 60*time.Second, once("AUTH-2", "authorized", ""))

	// A rebalance: alerter-3 joins; both must own partitions.
	a3 := p.startProc("alerter-3", cfg)
	testenv.CheckFor(t, 60*time.Second, func() error {
		n2, err2 := a2.metric("nofly_alerter_assigned_partitions")
		n3, err3 := a3.metric("nofly_alerter_assigned_partitions")
		if err2 != nil || err3 != nil || n2 == 0 || n3 == 0 || n2+n3 != float64(p.partitions) {
			return fmt.Errorf("partitions: alerter-2 %v (%v), alerter-3 %v (%v)", n2, err2, n3, err3)
		}
		return nil
	})
	// Revoked through alerter-3's API: alerter-2 is on that version within
	// 5 s.
	before, err := a2.metric("nofly_alerter_authorization_version")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodDelete, "http://"+a3.http+"/v1/authorizations/"+id2, nil)
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /v1/authorizations/%s: %d", id2, res.StatusCode)
	}
	var reached time.Duration
	testenv.CheckFor(t, 5*time.Second, func() error {
		v, err := a2.metric("nofly_alerter_authorization_version")
		if err != nil || v <= before {
			return fmt.Errorf("alerter-2's authorisation version %v (%v), was %v before the revocation", v, err, before)
		}
		reached = time.Since(revoked)
		return nil
	})
	t.Logf("the revocation through alerter-3 reached alerter-2 in %s", reached.Round(time.Millisecond))
	testenv.CheckFor(t, 60*time.Second, once("AUTH-2", "unauthorized", "revoked"))
	time.Sleep(3 * time.Second) // ticks go on: nothing decided twice
	stopTraffic()
	wg.Wait()

	ends, err := p.endOffsets()
	if err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, 60*time.Second, func() error {
		s := p.store()
		for q := range p.partitions {
			snap, err := s.Load(context.Background(), q)
			if err != nil {
				return err
			}
			if snap.Applied < ends[q]-1 {
				return fmt.Errorf("partition %d applied %d of %d", q, snap.Applied, ends[q]-1)
			}
		}
		return nil
	})
	for _, check := range []func() error{once("AUTH-1", "unauthorized", "expired"), once("AUTH-2", "authorized", ""), once("AUTH-2", "unauthorized", "revoked")} {
		if err := check(); err != nil {
			t.Error(err)
		}
	}
	live := p.outbox()
	var kept [][]byte
	seen := map[string]bool{}
	for _, l := range live {
		var e authEvent
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		if seen[e.EventID] {
			t.Errorf("event %s twice in the outbox", e.EventID)
		}
		seen[e.EventID] = true
		if e.Offset < ends[e.Partition] {
			kept = append(kept, l)
		}
	}
	p.checkEventsTopic()

	// Replay each partition with both histories; and AUTH-1's unauthorized
	// was decided at the first record of its partition at or after until
	// that took the clock into a new second.
	var replayed []byte
	u1 := p.authEvents("AUTH-1")
	for q := range p.partitions {
		dump := filepath.Join(t.TempDir(), fmt.Sprintf("p%d.ndjson", q))
		p.dumpPartitionTo(q, ends[q], dump)
		for _, e := range u1 {
			if e.Type == "unauthorized" && e.Reason == "expired" && e.Partition == q {
				checkFirstTickAfter(t, dump, e.Offset, until)
			}
		}
		var stdout, stderr bytes.Buffer
		args := []string{"replay", "--zone-history", "http://" + a2.http + "/v1/zones/history",
			"--authorization-history", "http://" + a2.http + "/v1/authorizations/history",
			"--partition", strconv.Itoa(q), "--input", dump}
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("replay of partition %d exited %d: %s", q, code, stderr.String())
		}
		replayed = append(replayed, stdout.Bytes()...)
	}
	compareWithReplay(t, kept, replayed)
	t.Logf("%d events live up to the ends %v, equal to the replay with both histories", len(kept), ends)
}

// checkFirstTickAfter checks that the record at offset off of a partition
// dump ("<unix ms>\t<record>" lines, line n = offset n) is the first whose
// receive time is at or after end and in a later second than the record
// before it: the first second of log time after the authorisation ended.
func checkFirstTickAfter(t *testing.T, dump string, off int64, end time.Time) {
	t.Helper()
	f, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	clock, first := int64(0), int64(-1)
	for n := int64(0); sc.Scan(); n++ {
		ms, _, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		at, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		prev := clock
		clock = max(clock, at)
		if first < 0 && clock >= end.UnixMilli() && prev > 0 && clock/1000 > prev/1000 {
			first = n
		}
	}
	if first != off {
		t.Errorf("unauthorized decided at offset %d; the first record of its partition in a new second at or after the end (%s) is %d", off, end.Format(time.RFC3339Nano), first)
	}
}
