package ingestd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/feeds/mavlink"
	"github.com/nofly-dev/nofly/geofence"
	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/testenv"
	"github.com/nofly-dev/nofly/telemetry"
)

// e2eZones: a box over part of the InterUSS Zurich sample's first flight
// (it flies south through it), and a box near Heathrow for the MAVLink
// vehicle. clear_buffer_m 0: leaving the box clears.
const e2eZones = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"E2E-RID","name":"Zurich sample box","category":"restricted","clear_buffer_m":0},
 "geometry":{"type":"Polygon","coordinates":[[[8.4870,47.3702],[8.4890,47.3702],[8.4890,47.3704],[8.4870,47.3704],[8.4870,47.3702]]]}},
{"type":"Feature","properties":{"id":"E2E-MAV","name":"MAVLink box","category":"restricted","clear_buffer_m":0},
 "geometry":{"type":"Polygon","coordinates":[[[-0.47,51.46],[-0.45,51.46],[-0.45,51.48],[-0.47,51.48],[-0.47,51.46]]]}}
]}`

var (
	alerterOnce sync.Once
	alerterBin  string
	alerterErr  error
)

// buildAlerter builds cmd/alerter once per test run.
func buildAlerter(t testing.TB) string {
	t.Helper()
	alerterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nofly-alerter-")
		if err != nil {
			alerterErr = err
			return
		}
		alerterBin = filepath.Join(dir, "alerter")
		out, err := exec.Command("go", "build", "-o", alerterBin, "../../cmd/alerter").CombinedOutput()
		if err != nil {
			alerterErr = fmt.Errorf("go build ../alerter: %v\n%s", err, out)
		}
	})
	if alerterErr != nil {
		t.Fatal(alerterErr)
	}
	return alerterBin
}

// ridAnswer is a USS's flights answer holding the sample flight's states
// from..to-1, times moved to start at base: the newest as current_state,
// all as recent_positions newest first.
func ridAnswer(t testing.TB, states []map[string]any, serial string, from, to int, base time.Time) []byte {
	t.Helper()
	tm := func(i int) map[string]any {
		return map[string]any{"value": base.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano), "format": "RFC3339"}
	}
	var recent []map[string]any
	for i := to - 1; i >= from; i-- {
		recent = append(recent, map[string]any{"time": tm(i), "position": states[i]["position"]})
	}
	last := states[to-1]
	cur := map[string]any{"timestamp": tm(to - 1), "position": last["position"], "track": last["track"], "speed": last["speed"],
		"speed_accuracy": last["speed_accuracy"], "timestamp_accuracy": last["timestamp_accuracy"], "operational_status": last["operational_status"]}
	b, err := json.Marshal(map[string]any{"timestamp": tm(to - 1), "flights": []map[string]any{{
		"id": "e2e-flight", "aircraft_type": "Helicopter", "simulated": true,
		"uas_id": map[string]any{"serial_number": serial}, "current_state": cur, "recent_positions": recent,
		// The sample flight's operator_location, in F3411-22a's form.
		"details": map[string]any{"operator_location": map[string]any{"position": map[string]any{"lat": 47.37085983569079, "lng": 8.487908591798265},
			"altitude_type": "Takeoff"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func postRID(t testing.TB, url string, body []byte) {
	t.Helper()
	res, err := http.Post(url+"/v1/telemetry/rid", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/telemetry/rid: %d %s", res.StatusCode, b)
	}
}

type transition struct {
	Drone, Zone, Type string
	Seq               int64
}

func (x transition) String() string {
	return fmt.Sprintf("%s %s %s @%d", x.Drone, x.Type, x.Zone, x.Seq)
}

// expectTransitions is the independent expectation: each drone's records
// in seq order (a seq not above the last is a duplicate), each queried
// against the geofence index directly; a zone entered is raised, a zone
// left is cleared.
func expectTransitions(t testing.TB, ix *geofence.Index, recs []telemetry.Position) []transition {
	t.Helper()
	by := map[string][]telemetry.Position{}
	for _, p := range recs {
		by[p.DroneID] = append(by[p.DroneID], p)
	}
	var out []transition
	for drone, ps := range by {
		var last int64 = -1
		in := map[string]bool{}
		for _, p := range ps { // partition order: the order produced
			if p.Seq <= last {
				continue
			}
			last = p.Seq
			pt := geofence.Point{Lat: p.Lat, Lon: p.Lon, Time: p.TS}
			if p.AltM != nil {
				pt.Heights = pt.Heights.Set(map[string]geofence.Ref{"AMSL": geofence.AMSL, "WGS84": geofence.WGS84, "AGL": geofence.AGL}[p.Ref()], *p.AltM)
			}
			now := map[string]bool{}
			for _, h := range ix.Query(pt, nil) {
				now[h.Zone.ID] = true
			}
			for z := range in {
				if !now[z] {
					out = append(out, transition{drone, z, "cleared", p.Seq})
				}
			}
			for z := range now {
				if !in[z] {
					out = append(out, transition{drone, z, "raised", p.Seq})
				}
			}
			in = now
		}
	}
	sortTransitions(out)
	return out
}

func sortTransitions(ts []transition) {
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Drone != b.Drone {
			return a.Drone < b.Drone
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.Type > b.Type // raised before cleared only at equal seq, never here
	})
}

// TestFeedsEndToEnd: a Network Remote ID flights answer and Broadcast
// Remote ID Location messages posted to a real ingest, and MAVLink
// GLOBAL_POSITION_INT sent over UDP to ingest mavlink, reach the
// real broker; a real alerter (the built binary) raises and clears their
// alarms on alerts.events, exactly as the geofence index queried directly
// on the converted positions says.
func TestFeedsEndToEnd(t *testing.T) {
	brokers := testenv.Kafka(t)
	redisAddr := testenv.Redis(t)
	const partitions = 3
	topic := testenv.CreateTopic(t, brokers, partitions)
	events := testenv.UniqueName("e2e-events")
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{events}})
	})
	zonesPath := filepath.Join(t.TempDir(), "zones.geojson")
	if err := os.WriteFile(zonesPath, []byte(e2eZones), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := geofence.LoadFile(zonesPath)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := geofence.NewIndex(set)
	if err != nil {
		t.Fatal(err)
	}

	// The alerter, as a process.
	bin := buildAlerter(t)
	actx, acancel := context.WithCancel(context.Background())
	alerter := exec.CommandContext(actx, bin, "--brokers", strings.Join(brokers, ","), "--topic", topic,
		"--partitions", fmt.Sprint(partitions), "--group", testenv.UniqueName("e2e-alerter"), "--redis", redisAddr,
		"--redis-prefix", testenv.RedisPrefix(t, "e2e"), "--zones", zonesPath, "--events-topic", events,
		"--http=", "--linger", "10ms", "--log-level", "warn",
		// The feeds' transitions are what the index predicts: raises and
		// clears (approaching warnings have their own tests in alerts/).
		"--approach-before", "off")
	var alerterLog bytes.Buffer
	alerter.Stdout, alerter.Stderr = &syncWriter{w: &alerterLog}, &syncWriter{w: &alerterLog}
	alerter.Cancel = func() error { return alerter.Process.Signal(os.Interrupt) }
	alerter.WaitDelay = 30 * time.Second
	if err := alerter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		acancel()
		_ = alerter.Wait()
		if t.Failed() {
			t.Logf("alerter log:\n%s", alerterLog.String())
		}
	})

	// Ingest's HTTP intake and its MAVLink relay, in this process.
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.LogLevel = brokers, topic, partitions, "warn"
	svc := startService(t, cfg)
	udp := freeUDPAddr(t)
	stopMav := startMavlink(t, "--brokers", strings.Join(brokers, ","), "--topic", topic, "--partitions", fmt.Sprint(partitions),
		"--listen", "udp://"+udp, "--fleet", "e2e", "--http=", "--linger", "20ms", "--log-level", "warn")

	// Remote ID: the sample's first flight in two polls of a USS, the
	// second repeating five positions of the first (as a USS's
	// recent_positions do).
	flights := sampleStates(t)
	states := flights[0]
	serial := "1AKGAAN8G70R7JS"
	base := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	postRID(t, svc.url, ridAnswer(t, states, serial, 0, 10, base))
	postRID(t, svc.url, ridAnswer(t, states, serial, 5, len(states), base))

	// Broadcast Remote ID: three Location messages of one drone, north of,
	// inside and south of the Zurich box, as a receiver posts them.
	var odid []map[string]any
	for i, lat := range []float64{47.3710, 47.3703, 47.3695} {
		heard := base.Add(time.Duration(20+i) * time.Second)
		odid = append(odid, map[string]any{"basic_id": map[string]any{"IDType": 1, "UASID": "ODID-E2E"},
			"received_at": heard.Add(300 * time.Millisecond).Format(time.RFC3339Nano),
			"location": map[string]any{"Latitude": lat, "Longitude": 8.4880, "AltitudeGeo": 520, "HeightType": 0, "Height": 40,
				"Direction": 361, "SpeedHorizontal": 255, "TimeStamp": float64(heard.Sub(heard.Truncate(time.Hour))) / float64(time.Second)},
			"system": map[string]any{"OperatorLocationType": 1, "OperatorLatitude": 47.3701 - float64(i)*0.0001, "OperatorLongitude": 8.4870, "OperatorAltitudeGeo": 480}})
	}
	odidBody, _ := json.Marshal(odid)
	res, err := http.Post(svc.url+"/v1/telemetry/odid", "application/json", bytes.NewReader(odidBody))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/telemetry/odid: %d %s", res.StatusCode, b)
	}
	res.Body.Close()

	// MAVLink: vehicle 5 flies west to east through the box and back out,
	// rebooting on the way; vehicle 6 stays south of it.
	conn, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testenv.CheckFor(t, 30*time.Second, func() error {
		c, err := net.ListenPacket("udp", udp)
		if err == nil {
			c.Close()
			return fmt.Errorf("%s not bound yet", udp)
		}
		return nil
	})
	// Vehicle 5's pilot stands at a fixed point (OPEN_DRONE_ID_SYSTEM,
	// heard before its positions).
	sysFrame, err := mavlink.EncodeV2(200, 5, 1, mavlink.MsgOpenDroneIDSystem, mavlink.OpenDroneIDSystem{
		OperatorLat: 514690000, OperatorLon: -4520000, OperatorAltitudeGeo: 95, OperatorLocationType: 2}.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(sysFrame); err != nil {
		t.Fatal(err)
	}
	lons := []float64{-0.49, -0.48, -0.465, -0.46, -0.455, -0.44, -0.43}
	boot := []uint32{50_000, 50_500, 51_000, 400, 900, 1_400, 1_900} // a reboot after the third
	for i := range lons {
		sendGPI(t, conn, uint8(i), 5, mavlink.GlobalPositionInt{TimeBootMS: boot[i], Lat: 514700000, Lon: int32(lons[i] * 1e7), Alt: 90_000, Hdg: 9000})
		sendGPI(t, conn, uint8(i), 6, mavlink.GlobalPositionInt{TimeBootMS: boot[i], Lat: 514000000, Lon: int32(lons[i] * 1e7), Alt: 90_000, Hdg: mavlink.HdgUnknown})
		time.Sleep(30 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if err := stopMav(); err != nil { // SIGTERM's path: everything read is acknowledged first
		t.Fatal(err)
	}

	// What reached the topic, and what the geofence says of it.
	var recs []telemetry.Position
	for _, m := range readTopic(t, brokers, topic, partitions) {
		p, err := telemetry.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, p)
	}
	// The pilots' positions came through each feed into the topic: the
	// flight's, each ODID message's own System, vehicle 5's, none for 6.
	wantOp := map[string][]string{
		"1AKGAAN8G70R7JS": {"47.37085983569079 8.487908591798265 takeoff"},
		"ODID-E2E":        {"47.3701 8.487 live", "47.37 8.487 live", "47.3699 8.487 live"},
		"e2e-5":           {"51.469 -0.452 fixed"},
		"e2e-6":           {"-"},
	}
	for _, p := range recs {
		got := "-"
		if o := p.Operator; o != nil {
			got = fmt.Sprint(o.Lat, " ", o.Lon, " ", o.Type)
		}
		if !slices.Contains(wantOp[p.DroneID], got) {
			t.Errorf("%s seq %d: operator %q, want one of %q", p.DroneID, p.Seq, got, wantOp[p.DroneID])
		}
	}
	want := expectTransitions(t, ix, recs)
	// The expectation itself must be what the scenario was built for.
	var summary []string
	for _, x := range want {
		summary = append(summary, x.Drone+" "+x.Type+" "+x.Zone)
	}
	if got := strings.Join(summary, ", "); got != "1AKGAAN8G70R7JS raised E2E-RID, 1AKGAAN8G70R7JS cleared E2E-RID, "+
		"ODID-E2E raised E2E-RID, ODID-E2E cleared E2E-RID, e2e-5 raised E2E-MAV, e2e-5 cleared E2E-MAV" {
		t.Fatalf("the scenario does not cross the zones as planned: %s", got)
	}

	// The alerter's events, read as a read_committed consumer reads them.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	rd := &committed.Reader{Addr: kafka.TCP(brokers...), Topic: events, Transport: tr}
	var got []transition
	testenv.CheckFor(t, 90*time.Second, func() error {
		var err error
		if got, err = readEvents(rd, partitions); err != nil {
			return err
		}
		if len(got) < len(want) {
			return fmt.Errorf("%d of %d events on %s", len(got), len(want), events)
		}
		return nil
	})
	time.Sleep(time.Second) // anything extra the alerter would write
	if got, err = readEvents(rd, partitions); err != nil {
		t.Fatal(err)
	}
	sortTransitions(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("alerts.events\n got %v\nwant %v", got, want)
	}
	// Each raise carries its drone's pilot as the feed reported it.
	pilots, err := raisedPilots(rd, partitions)
	if err != nil {
		t.Fatal(err)
	}
	for _, drone := range []string{"1AKGAAN8G70R7JS", "ODID-E2E", "e2e-5"} {
		if p, ok := pilots[drone]; !ok || !slices.Contains(wantOp[drone], p) {
			t.Errorf("%s raised with pilot %q, want one of %q", drone, p, wantOp[drone])
		}
	}
	t.Logf("%d records from Remote ID and MAVLink, %d events as the geofence index predicts: %v", len(recs), len(got), got)
}

// raisedPilots reads the pilot ("lat lon type", "-" for none) of each
// drone's raised event.
func raisedPilots(rd *committed.Reader, partitions int) (map[string]string, error) {
	out := map[string]string{}
	for p := range partitions {
		rs, err := rd.ReadAll(context.Background(), p)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			var e struct {
				Type     string `json:"type"`
				DroneID  string `json:"drone_id"`
				Operator *struct {
					Lat, Lon float64
					Type     string
				} `json:"operator"`
			}
			if err := json.Unmarshal(r.Value, &e); err != nil {
				return nil, fmt.Errorf("event %s: %v", r.Value, err)
			}
			if e.Type != "raised" {
				continue
			}
			out[e.DroneID] = "-"
			if o := e.Operator; o != nil {
				out[e.DroneID] = fmt.Sprint(o.Lat, " ", o.Lon, " ", o.Type)
			}
		}
	}
	return out, nil
}

// sampleStates reads the InterUSS sample's flights' states.
func sampleStates(t testing.TB) [][]map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../testdata/feeds/interuss/zurich.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Flights []struct {
			States []map[string]any `json:"states"`
		} `json:"flights"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out [][]map[string]any
	for _, f := range doc.Flights {
		out = append(out, f.States)
	}
	return out
}

// readEvents reads every committed event of the events topic.
func readEvents(rd *committed.Reader, partitions int) ([]transition, error) {
	var out []transition
	for p := range partitions {
		rs, err := rd.ReadAll(context.Background(), p)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			var e struct {
				Type    string `json:"type"`
				DroneID string `json:"drone_id"`
				ZoneID  string `json:"zone_id"`
				Seq     int64  `json:"seq"`
			}
			if err := json.Unmarshal(r.Value, &e); err != nil {
				return nil, fmt.Errorf("event %s: %v", r.Value, err)
			}
			out = append(out, transition{e.DroneID, e.ZoneID, e.Type, e.Seq})
		}
	}
	return out, nil
}
