package redislayout

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKeysPinned pins the exact key strings of a sample partition: Redis
// contents written by earlier releases must stay readable, byte for byte.
func TestKeysPinned(t *testing.T) {
	k := Of("nofly", "telemetry.positions", 3)
	tests := []struct{ name, got, want string }{
		{"tag", k.Tag(), "{nofly:telemetry.positions:3}"},
		{"applied", k.Applied(), "{nofly:telemetry.positions:3}:applied"},
		{"drones", k.Drones(), "{nofly:telemetry.positions:3}:drones"},
		{"drone ids", k.DroneIDs(), "{nofly:telemetry.positions:3}:drones:ids"},
		{"drone geo", k.DroneGeo(), "{nofly:telemetry.positions:3}:drones:geo"},
		{"drone changes", k.DroneChanges(), "{nofly:telemetry.positions:3}:drones:changes"},
		{"drone indexes' mark", k.DroneIndexed(), "{nofly:telemetry.positions:3}:drones:indexed"},
		{"outbox", k.Outbox(), "{nofly:telemetry.positions:3}:outbox"},
		{"event", k.Event("3f0c:raised"), "{nofly:telemetry.positions:3}:ev:3f0c:raised"},
		{"event prefix", k.EventPrefix(), "{nofly:telemetry.positions:3}:ev:"},
		{"event bucket", k.EventBucket(1764950400000), "{nofly:telemetry.positions:3}:evb:1764950400000"},
		{"event bucket prefix", k.EventBucketPrefix(), "{nofly:telemetry.positions:3}:evb:"},
		{"event mark", k.EventMark(), "{nofly:telemetry.positions:3}:evmark"},
		{"legacy flag", k.Legacy(), "{nofly:telemetry.positions:3}:evlegacy"},
		{"alarms", k.Alarms(), "{nofly:telemetry.positions:3}:alarms"},
		{"active alarms", k.AlarmsActive(), "{nofly:telemetry.positions:3}:alarms:active"},
		{"cleared alarms", k.AlarmsCleared(), "{nofly:telemetry.positions:3}:alarms:cleared"},
		{"alarm gc", k.AlarmsGC(), "{nofly:telemetry.positions:3}:alarms:gc"},
		{"active alarms by drone", k.AlarmsActiveBy(ByDrone, "UAV-7"), "{nofly:telemetry.positions:3}:alarms:active:drone:UAV-7"},
		{"cleared alarms by zone", k.AlarmsClearedBy(ByZone, "EGLL-CTR"), "{nofly:telemetry.positions:3}:alarms:cleared:zone:EGLL-CTR"},
		{"active alarms by category", k.AlarmsActiveBy(ByCategory, "restricted"), "{nofly:telemetry.positions:3}:alarms:active:category:restricted"},
		{"alarm index mark", k.AlarmsIndexMark(), "{nofly:telemetry.positions:3}:alarms:ixv"},
		{"track", k.Track("UAV-7"), "{nofly:telemetry.positions:3}:track:UAV-7"},
		{"track prefix", k.TrackPrefix(), "{nofly:telemetry.positions:3}:track:"},
		{"zone version", k.ZoneVersion(), "{nofly:telemetry.positions:3}:zonever"},
		{"clock", k.Clock(), "{nofly:telemetry.positions:3}:clock"},
		{"zone switches", k.ZoneSwitches(), "{nofly:telemetry.positions:3}:zoneswitch"},
		{"authorisation version", k.AuthVersion(), "{nofly:telemetry.positions:3}:authver"},
		{"authorisation switches", k.AuthSwitches(), "{nofly:telemetry.positions:3}:authswitch"},
		{"kafka cursor", k.Cursor(KafkaOutput), "{nofly:telemetry.positions:3}:cursor:kafka"},
		{"webhook cursor", k.Cursor(WebhookOutput("ops")), "{nofly:telemetry.positions:3}:cursor:webhook:ops"},
		{"webhook dead letters", k.Dead(WebhookOutput("ops")), "{nofly:telemetry.positions:3}:dead:webhook:ops"},
		{"alertmanager cursor", k.Cursor(AlertmanagerOutput("am1:9093")), "{nofly:telemetry.positions:3}:cursor:alertmanager:am1:9093"},
		{"alertmanager state", k.State(AlertmanagerOutput("am1:9093")), "{nofly:telemetry.positions:3}:state:alertmanager:am1:9093"},
		{"other prefix and partition", Of("t-1", "pos", 10).Applied(), "{t-1:pos:10}:applied"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestFieldsPinned pins the fields of the streams, in XADD order.
func TestFieldsPinned(t *testing.T) {
	e := Entry{ID: "5-1", EventID: "a:raised", Event: []byte(`{"x":1}`)}
	d := DeadLetter{Entry: e, Reason: "permanent: HTTP 400", Attempts: 2, Status: 400}
	tests := []struct {
		name      string
		got, want []any
	}{
		{"outbox entry", e.Values(), []any{"event", []byte(`{"x":1}`)}},
		{"outbox entry before issue 32", e.LegacyValues(), []any{"event_id", "a:raised", "event", []byte(`{"x":1}`)}},
		{"dead letter", d.Values(), []any{"outbox_id", "5-1", "event_id", "a:raised", "event", []byte(`{"x":1}`),
			"reason", "permanent: HTTP 400", "attempts", 2, "status", 400}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s values = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// keyRow is a key cell of a table row in docs/redis-layout.md: | `<tag>:...` |.
var keyRow = regexp.MustCompile("(?m)^\\| `(<tag>:[^`]*)` \\|")

// TestDocMatchesLayout checks docs/redis-layout.md, the written contract,
// against this package both ways: every key the tables name is one Keys
// spells, and every key Keys spells has a row; the tag example, the outbox
// entry's fields and the dead letter's fields are the ones used here.
func TestDocMatchesLayout(t *testing.T) {
	b, err := os.ReadFile("../../docs/redis-layout.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	// Every method of Keys that names a key is listed here once; a new one
	// fails the count below until it is added here and to the doc.
	k := Of("<prefix>", "<topic>", 0)
	generic := func(s string) string { return strings.Replace(s, k.Tag(), "<tag>", 1) }
	code := map[string]string{ // method → key as the doc writes it
		"Applied":       generic(k.Applied()),
		"Drones":        generic(k.Drones()),
		"DroneIDs":      generic(k.DroneIDs()),
		"DroneGeo":      generic(k.DroneGeo()),
		"DroneChanges":  generic(k.DroneChanges()),
		"DroneIndexed":  generic(k.DroneIndexed()),
		"Outbox":        generic(k.Outbox()),
		"Audit":         generic(k.Audit()),
		"Event":         generic(k.Event("<event_id>")),
		"EventBucket":   generic(k.EventBucketPrefix()) + "<expiry_ms>",
		"EventMark":     generic(k.EventMark()),
		"Legacy":        generic(k.Legacy()),
		"Alarms":        generic(k.Alarms()),
		"AlarmsActive":  generic(k.AlarmsActive()),
		"AlarmsCleared": generic(k.AlarmsCleared()),
		"AlarmsGC":      generic(k.AlarmsGC()),
		// The alarm index's secondary sets and their mark.
		"AlarmsActiveBy":  generic(k.AlarmsActiveBy("<by>", "<value>")),
		"AlarmsClearedBy": generic(k.AlarmsClearedBy("<by>", "<value>")),
		"AlarmsIndexMark": generic(k.AlarmsIndexMark()),

		"Track":        generic(k.Track("<drone_id>")),
		"ZoneVersion":  generic(k.ZoneVersion()),
		"Clock":        generic(k.Clock()),
		"ZoneSwitches": generic(k.ZoneSwitches()),
		"AuthVersion":  generic(k.AuthVersion()),
		"AuthSwitches": generic(k.AuthSwitches()),
		"Cursor":       generic(k.Cursor(KafkaOutput)) + " " + generic(k.Cursor(WebhookOutput("<name>"))) + " " + generic(k.Cursor(AlertmanagerOutput("<name>"))),
		"State":        generic(k.State(AlertmanagerOutput("<name>"))),
		"Dead":         generic(k.Dead(WebhookOutput("<name>"))),
		"ReplCheck":    generic(k.ReplCheck()),
	}
	notKeys := []string{"Tag", "EventPrefix", "EventBucketPrefix", "TrackPrefix"}
	if n := reflect.TypeFor[Keys]().NumMethod(); n != len(code)+len(notKeys) {
		t.Fatalf("Keys has %d methods, this test knows %d: add the new key to docs/redis-layout.md and here", n, len(code)+len(notKeys))
	}
	var want []string
	for _, v := range code {
		want = append(want, strings.Fields(v)...)
	}
	var got []string
	for _, m := range keyRow.FindAllStringSubmatch(doc, -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("docs/redis-layout.md key rows = %q\nredislayout.Keys spells  %q", got, want)
	}

	if ex := Of("nofly", "telemetry.positions", 3).Tag(); !regexp.MustCompile(`tag = \{<prefix>:<topic>:<partition>\} +e\.g\. ` + regexp.QuoteMeta(ex)).MatchString(doc) {
		t.Errorf("docs/redis-layout.md: the tag line does not read tag = {<prefix>:<topic>:<partition>} e.g. %s", ex)
	}
	if want := "`ARGV = expected_version, new_applied, ttl_ms, n_drones, \"<tag>:evb:\", \"<tag>:ev:\", retention_ms, n_tracks, track_len, track_ttl_ms, \"<tag>:track:\", zone_version, clock_ms, n_forgotten, auth_version, n_placed, n_new, (drone_id, state)×n, (drone_id, point, keep)×t, forgotten_drone_id×f, (lon, lat, drone_id)×g, new_drone_id×w, (event_id, event_json, index)×m`"; generic(k.EventBucketPrefix()) != "<tag>:evb:" ||
		generic(k.EventPrefix()) != "<tag>:ev:" || generic(k.TrackPrefix()) != "<tag>:track:" || !strings.Contains(doc, want) {
		t.Errorf("docs/redis-layout.md: the batch script's key prefixes are not %q (code: %q, %q)", want, generic(k.EventBucketPrefix()), generic(k.EventPrefix()))
	}
	if want := "`KEYS = applied, drones, outbox, evmark, evlegacy, alarms, alarms:active, alarms:cleared, alarms:gc, zonever, zoneswitch, clock, authver, authswitch, drones:ids, drones:geo, drones:changes, drones:indexed`"; !strings.Contains(doc, want) {
		t.Errorf("docs/redis-layout.md: the batch script's KEYS line is not %q", want)
	}
	if k.EventBucket(1764000000000) != k.EventBucketPrefix()+"1764000000000" {
		t.Errorf("EventBucket(1764000000000) = %q", k.EventBucket(1764000000000))
	}

	// The outbox entry's table, in order.
	entry := section(t, doc, "### Outbox entry")
	var fields []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(entry, -1) {
		fields = append(fields, m[1])
	}
	if want := names(Entry{}.Values()); !slices.Equal(fields, want) {
		t.Errorf("docs/redis-layout.md outbox entry fields = %q, want %q", fields, want)
	}
	// The dead letters' row: "fields `a`, `b`, ..." in order.
	dead := regexp.MustCompile("(?m)^\\| `<tag>:dead:[^|]*\\|[^|]*\\| dead letters [^:]*: fields ((?:`[a-z_]+`(?:, )?)+)").FindStringSubmatch(doc)
	if dead == nil {
		t.Fatal("docs/redis-layout.md: no dead-letter row listing its fields")
	}
	fields = nil
	for _, f := range strings.Split(dead[1], ", ") {
		fields = append(fields, strings.Trim(f, "`"))
	}
	if want := names(DeadLetter{}.Values()); !slices.Equal(fields, want) {
		t.Errorf("docs/redis-layout.md dead letter fields = %q, want %q", fields, want)
	}
}

// section returns the doc from the heading that starts with heading to the
// next heading.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading)
	if i < 0 {
		t.Fatalf("docs/redis-layout.md: no %q", heading)
	}
	s := doc[i+1+len(heading):]
	if j := strings.Index(s, "\n#"); j >= 0 {
		s = s[:j]
	}
	return s
}

// names are the field names of XADD values (every other one).
func names(values []any) []string {
	var out []string
	for i := 0; i < len(values); i += 2 {
		out = append(out, values[i].(string))
	}
	return out
}
