package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/alarmstore"
	"github.com/nofly-dev/nofly/internal/redislayout"
)

// AlertName is the alertname label of every alert nofly posts.
const AlertName = "DroneInZone"

// The drop reasons of nofly_alertmanager_drops_total.
const (
	dropRefused     = "refused"     // a 4xx: sending it again will not help
	dropBacklog     = "backlog"     // the output fell MaxBacklog entries behind
	dropUndecodable = "undecodable" // an outbox entry that is not an event
)

// AlertmanagerState is what an Alertmanager output last told its
// Alertmanager about one alarm: a value of its redislayout State hash,
// written with its cursor. With it a clear resolves the very series that
// was posted (its labels, authorized included) and expires the ack's
// silence.
type AlertmanagerState struct {
	Drone    string `json:"drone"`
	Zone     string `json:"zone"`
	ZoneName string `json:"zone_name"`
	Category string `json:"category"`
	// Authorized is the series posted: authorized="true" or "false".
	Authorized bool `json:"authorized"`
	// StartsMS is the raise time, unix milliseconds (the alert's startsAt).
	StartsMS int64 `json:"starts_ms"`
	// Silence is the id of the silence the alarm's ack made, if any.
	Silence string `json:"silence,omitempty"`
	// Operator is the pilot as known at the raise: an authorisation
	// change's event does not carry it, and its post must not lose it.
	Operator *alerts.OperatorFix `json:"operator,omitempty"`

	// both: the series posted is not known (an alarm the output never
	// saw raised, gone from the alarm index): a clear resolves both.
	both bool
}

// amAlert is an alert of Alertmanager's API v2 (POST /api/v2/alerts).
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

type amMatcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// amSilence is a silence of Alertmanager's API v2.
type amSilence struct {
	ID        string      `json:"id,omitempty"`
	Matchers  []amMatcher `json:"matchers"`
	StartsAt  time.Time   `json:"startsAt"`
	EndsAt    time.Time   `json:"endsAt"`
	CreatedBy string      `json:"createdBy"`
	Comment   string      `json:"comment"`
	Status    *struct {
		State string `json:"state"`
	} `json:"status,omitempty"`
}

// amCreate is a silence to make for an ack.
type amCreate struct {
	alarm, by, note string
	at              time.Time
	done            bool
}

// amPlan is what one batch of events (or one refresh) asks of an
// Alertmanager: the silences to expire, the alerts to post (one per label
// set, the last word on it), the silences to make, and the state to store
// once they are done. Requests done are marked, so a retry sends only
// the rest.
type amPlan struct {
	expire  []string
	expired map[string]bool
	alerts  []amAlert
	byKey   map[string]int
	posted  int // alerts[:posted] were accepted
	create  []*amCreate
	state   map[string]*AlertmanagerState // alarm id → state; nil deletes it
}

func newPlan() *amPlan {
	return &amPlan{expired: map[string]bool{}, byKey: map[string]int{}, state: map[string]*AlertmanagerState{}}
}

// add puts a, replacing an alert with the same labels already planned
// (Alertmanager identifies an alert by its labels: the last one wins).
func (p *amPlan) add(a amAlert) {
	k := labelKey(a.Labels)
	if i, ok := p.byKey[k]; ok && i >= p.posted {
		p.alerts[i] = a
		return
	}
	p.byKey[k] = len(p.alerts)
	p.alerts = append(p.alerts, a)
}

func labelKey(l map[string]string) string {
	// The labels that tell two of nofly's series apart.
	return l["alarm_id"] + "\x00" + l["authorized"]
}

func (p *amPlan) silence(alarm string) *amCreate {
	for _, c := range p.create {
		if c.alarm == alarm && !c.done {
			return c
		}
	}
	return nil
}

func (p *amPlan) empty() bool {
	return len(p.expire) == 0 && len(p.alerts) == 0 && len(p.create) == 0 && len(p.state) == 0
}

// amTarget is one output's Alertmanager.
type amTarget struct {
	url string // base, without a trailing /
	cfg *Alertmanager
	m   amOutputMetrics
}

// labels of the series of alarm id in state st (authorized as given).
func (t *amTarget) labels(id string, st *AlertmanagerState, authorized bool) map[string]string {
	sev, ok := t.cfg.Severity[st.Category]
	if !ok {
		if sev, ok = t.cfg.Severity["*"]; !ok {
			sev = "warning"
		}
	}
	return map[string]string{
		"alertname":  AlertName,
		"alarm_id":   id,
		"drone":      st.Drone,
		"zone":       st.Zone,
		"zone_name":  st.ZoneName,
		"category":   st.Category,
		"severity":   sev,
		"authorized": strconv.FormatBool(authorized),
	}
}

// link is the dashboard's deep link to alarm id, "" without a dashboard URL.
func (t *amTarget) link(id string) string {
	if t.cfg.DashboardURL == "" {
		return ""
	}
	return t.cfg.DashboardURL + "/#alarm=" + id
}

// where is a position as the descriptions write it.
type where struct {
	ts       time.Time
	lat, lon float64
	alt      *float64
	ref      string
	assumed  bool
	op       *alerts.OperatorFix // the pilot as known at the raise (nil: not reported)
}

func whereOf(e *alerts.Event) where {
	return where{ts: e.TS, lat: e.Lat, lon: e.Lon, alt: e.AltM, ref: e.AltRef, assumed: e.HeightAssumed, op: e.Operator}
}

// pilotTypes are the pilot location types as a person reads them.
var pilotTypes = map[string]string{
	"takeoff": "take-off point",
	"live":    "live GNSS",
	"fixed":   "fixed location",
}

// pilotText is the annotations of the pilot at the raise: where, what kind
// and as of when ("operator"), and how far and which way from the drone
// ("operator_range"), for a person reading the page in a pager or a chat.
func (w where) pilotText() (at, rng string) {
	o := w.op
	kind, ok := pilotTypes[o.Type]
	if !ok {
		kind = "type unknown"
	}
	at = fmt.Sprintf("%.5f, %.5f (%s, as of %s)", o.Lat, o.Lon, kind, o.TS.UTC().Format(time.RFC3339))
	m, deg := alerts.RangeBearing(w.lat, w.lon, o.Lat, o.Lon)
	d := strconv.FormatFloat(m, 'f', 0, 64) + " m"
	if m >= 1000 {
		d = strconv.FormatFloat(m/1000, 'f', 1, 64) + " km"
	}
	return at, fmt.Sprintf("%s at %.0f° from the drone", d, math.Mod(math.Round(deg), 360))
}

func (w where) String() string {
	h := "height unknown"
	if w.alt != nil {
		ref := w.ref
		if ref == "" {
			ref = "AMSL"
		}
		h = strconv.FormatFloat(*w.alt, 'f', 0, 64) + " m " + ref
	}
	s := fmt.Sprintf("at %.5f, %.5f, %s, %s", w.lat, w.lon, h, w.ts.UTC().Format(time.RFC3339))
	if w.assumed {
		s += " (a vertical limit could not be checked: taken to be inside)"
	}
	return s
}

func zoneText(st *AlertmanagerState) string {
	if st.ZoneName == "" || st.ZoneName == st.Zone {
		return st.Zone + " (" + st.Category + ")"
	}
	return st.Zone + " " + strconv.Quote(st.ZoneName) + " (" + st.Category + ")"
}

// firing is the firing alert of alarm id in state st: startsAt the raise,
// endsAt four refreshes ahead (as Prometheus does with its resend delay),
// so an alarm nobody refreshes any more resolves by itself.
func (t *amTarget) firing(id string, st *AlertmanagerState, w where, auth *alerts.AuthRef, lostSince *time.Time, now time.Time) amAlert {
	name := st.ZoneName
	if name == "" {
		name = st.Zone
	}
	summary := fmt.Sprintf("Drone %s in %s (%s)", st.Drone, name, st.Category)
	desc := fmt.Sprintf("Drone %s is in zone %s, %s.", st.Drone, zoneText(st), w)
	ann := map[string]string{}
	if auth != nil {
		summary += ", authorised"
		ann["authorization"] = fmt.Sprintf("%s (%s) until %s", auth.ID, auth.Reference, auth.Until.UTC().Format(time.RFC3339))
		desc += " Authorised flight: " + ann["authorization"] + "."
	}
	if lostSince != nil {
		ann["signal_lost_since"] = lostSince.UTC().Format(time.RFC3339)
		desc += " Signal lost since " + ann["signal_lost_since"] + "."
	}
	if w.op != nil {
		ann["operator"], ann["operator_range"] = w.pilotText()
		desc += " Pilot at " + ann["operator"] + ", " + ann["operator_range"] + "."
	}
	ann["summary"], ann["description"] = summary, desc
	a := amAlert{Labels: t.labels(id, st, auth != nil), Annotations: ann,
		StartsAt: minTime(time.UnixMilli(st.StartsMS).UTC(), now), EndsAt: now.Add(4 * t.cfg.Refresh),
		GeneratorURL: t.link(id)}
	if a.GeneratorURL != "" {
		ann["dashboard"] = a.GeneratorURL
	}
	return a
}

// resolved is the series of alarm id in st (authorized as given) ended at
// end (not after now, not before the raise).
func (t *amTarget) resolved(id string, st *AlertmanagerState, authorized bool, end time.Time, why string, now time.Time) amAlert {
	end = minTime(end, now)
	name := st.ZoneName
	if name == "" {
		name = st.Zone
	}
	a := amAlert{Labels: t.labels(id, st, authorized),
		Annotations: map[string]string{
			"summary":     fmt.Sprintf("Drone %s no longer in %s (%s)", st.Drone, name, st.Category),
			"description": fmt.Sprintf("Drone %s: alarm in zone %s ended at %s (%s).", st.Drone, zoneText(st), end.UTC().Format(time.RFC3339), why),
		},
		StartsAt: minTime(time.UnixMilli(st.StartsMS).UTC(), end), EndsAt: end, GeneratorURL: t.link(id)}
	if a.GeneratorURL != "" {
		a.Annotations["dashboard"] = a.GeneratorURL
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stateFromEvent is the state an event's labels give, raised at ts.
func stateFromEvent(e *alerts.Event) *AlertmanagerState {
	st := &AlertmanagerState{Drone: e.DroneID, Zone: e.ZoneID, ZoneName: e.ZoneName, Category: e.Category,
		Authorized: e.Authorization != nil, StartsMS: e.TS.UnixMilli()}
	if e.Type == alerts.Raised {
		st.Operator = e.Operator
	}
	return st
}

// stateFromAlarm is the state of an alarm of the index.
func stateFromAlarm(a *alarmstore.Alarm) *AlertmanagerState {
	r := a.Raise()
	return &AlertmanagerState{Drone: a.DroneID, Zone: a.ZoneID, ZoneName: a.ZoneName, Category: a.Category,
		Authorized: a.Authorization != nil, StartsMS: a.Raised.TS.UnixMilli(), Operator: r.Operator}
}

// amResult is the outcome of one request.
type amResult struct {
	status int
	body   []byte
	err    error
}

func (r amResult) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

// retriable: no answer, a 5xx, 429 or 408; any other failure is a refusal.
func (r amResult) retriable() bool {
	return r.err != nil || r.status >= 500 || r.status == http.StatusTooManyRequests || r.status == http.StatusRequestTimeout
}

func (r amResult) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return "HTTP " + strconv.Itoa(r.status) + ": " + strings.TrimSpace(string(r.body[:min(len(r.body), 200)]))
}

// do sends one request to the Alertmanager's API.
func (o *output) amDo(ctx context.Context, method, path string, body any) amResult {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return amResult{err: err}
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, o.am.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, o.am.url+path, rd)
	if err != nil {
		return amResult{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return amResult{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return amResult{status: resp.StatusCode, body: b}
}

// errRetry is what amExec returns when a request may succeed later.
type errRetry struct{ r amResult }

func (e errRetry) Error() string { return "alertmanager: " + e.r.String() }

// amExec sends what p still asks, in order: silences to expire (before
// the clears, so a resolved notification is not muted by its own ack's
// silence), the alerts (500 per POST), the silences to make. It returns
// errRetry at the first request that may succeed later (those done stay
// done); a refused one is counted as a drop and skipped.
func (o *output) amExec(ctx context.Context, p *amPlan, kind string) error {
	m := o.am.m
	for _, id := range p.expire {
		if p.expired[id] {
			continue
		}
		r := o.amDo(ctx, http.MethodDelete, "/api/v2/silence/"+url.PathEscape(id), nil)
		// An unknown silence is gone already (0.25 answers 500 "silence not
		// found", later releases 404).
		gone := r.status == http.StatusNotFound || (r.status == http.StatusInternalServerError && bytes.Contains(r.body, []byte("not found")))
		switch {
		case r.ok() || gone:
			m.silencesExpired.Inc()
		case r.retriable():
			m.failures.Inc()
			return errRetry{r}
		default:
			m.failures.Inc()
			m.drops(dropRefused).Inc()
			o.log.Warn("alertmanager refused to expire a silence", "silence", id, "result", r.String())
		}
		p.expired[id] = true
	}
	for p.posted < len(p.alerts) {
		chunk := p.alerts[p.posted:min(len(p.alerts), p.posted+500)]
		r := o.amDo(ctx, http.MethodPost, "/api/v2/alerts", chunk)
		switch {
		case r.ok():
			m.posts(kind).Inc()
		case r.retriable():
			m.failures.Inc()
			return errRetry{r}
		default:
			// Alertmanager keeps the valid alerts of a POST it answers 400.
			m.failures.Inc()
			m.drops(dropRefused).Add(float64(len(chunk)))
			o.log.Warn("alertmanager refused alerts", "alerts", len(chunk), "result", r.String())
		}
		p.posted += len(chunk)
	}
	for _, c := range p.create {
		if c.done {
			continue
		}
		id, r := o.amSilence(ctx, c)
		switch {
		case id != "":
			if st := p.state[c.alarm]; st != nil {
				st.Silence = id
			}
		case r.retriable():
			m.failures.Inc()
			return errRetry{r}
		default:
			m.failures.Inc()
			m.drops(dropRefused).Inc()
			o.log.Warn("alertmanager refused a silence", "alarm_id", c.alarm, "result", r.String())
		}
		c.done = true
	}
	return nil
}

// amSilence makes the silence of an ack, or finds the one a previous
// attempt (or the other member of a clustered pair) made: an active or
// pending silence whose only matcher is alarm_id="<id>". It returns the
// silence id, or "" and the failed request.
func (o *output) amSilence(ctx context.Context, c *amCreate) (string, amResult) {
	q := url.Values{"filter": {`alarm_id="` + c.alarm + `"`}}
	r := o.amDo(ctx, http.MethodGet, "/api/v2/silences?"+q.Encode(), nil)
	if !r.ok() {
		return "", r
	}
	var list []amSilence
	if err := json.Unmarshal(r.body, &list); err != nil {
		return "", amResult{err: fmt.Errorf("silences: %w", err)}
	}
	for _, s := range list {
		if s.Status != nil && (s.Status.State == "active" || s.Status.State == "pending") &&
			len(s.Matchers) == 1 && s.Matchers[0] == (amMatcher{Name: "alarm_id", Value: c.alarm, IsEqual: true}) {
			return s.ID, r
		}
	}
	by, note := c.by, c.note
	if by == "" {
		by = "nofly"
	}
	if note == "" {
		note = "acknowledged in nofly"
	}
	now := time.Now().UTC()
	s := amSilence{Matchers: []amMatcher{{Name: "alarm_id", Value: c.alarm, IsEqual: true}},
		StartsAt: now, EndsAt: c.at.Add(o.am.cfg.SilenceMax), CreatedBy: by, Comment: note}
	r = o.amDo(ctx, http.MethodPost, "/api/v2/silences", s)
	if !r.ok() {
		return "", r
	}
	var created struct {
		SilenceID string `json:"silenceID"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil || created.SilenceID == "" {
		return "", amResult{status: r.status, body: r.body, err: fmt.Errorf("silence created, but no silenceID in the answer")}
	}
	o.am.m.silencesCreated.Inc()
	return created.SilenceID, r
}

// silenceDue reports whether an ack at at still calls for a silence now:
// one that would end within a minute is not worth making.
func (t *amTarget) silenceDue(at, now time.Time) bool {
	return at.Add(t.cfg.SilenceMax).After(now.Add(time.Minute))
}

// loadStates reads the states of ids (all of them when ids is nil).
func (o *output) loadStates(ctx context.Context, ids []string) (map[string]*AlertmanagerState, error) {
	key := o.keys.State(o.name)
	out := map[string]*AlertmanagerState{}
	put := func(id, raw string) {
		var st AlertmanagerState
		if json.Unmarshal([]byte(raw), &st) == nil {
			out[id] = &st
		}
	}
	if ids == nil {
		all, err := o.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, fmt.Errorf("alertmanager output: read state: %w", err)
		}
		for id, raw := range all {
			put(id, raw)
		}
		return out, nil
	}
	if len(ids) == 0 {
		return out, nil
	}
	vals, err := o.rdb.HMGet(ctx, key, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("alertmanager output: read state: %w", err)
	}
	for i, v := range vals {
		if raw, ok := v.(string); ok {
			put(ids[i], raw)
		}
	}
	return out, nil
}

// planEvents turns a batch of outbox entries into what the Alertmanager
// must be told. Only raised, cleared, authorized, unauthorized and acked
// events concern it; approaching warnings are not alarms, and a lost
// signal shows on the next refresh (annotation signal_lost_since).
func (o *output) planEvents(ctx context.Context, entries []redislayout.Entry, now time.Time) (*amPlan, error) {
	t := o.am
	evs := make([]alerts.Event, 0, len(entries))
	var ids []string
	seen := map[string]bool{}
	for _, e := range entries {
		var ev alerts.Event
		if err := json.Unmarshal(e.Event, &ev); err != nil || ev.AlarmID == "" {
			t.m.drops(dropUndecodable).Inc()
			o.log.Warn("alertmanager output: outbox entry is not an event; skipped", "outbox_id", e.ID)
			continue
		}
		switch ev.Type {
		case alerts.Raised, alerts.Cleared, alerts.Acked, alerts.Authorized, alerts.Unauthorized:
		default:
			continue
		}
		evs = append(evs, ev)
		if !seen[ev.AlarmID] {
			seen[ev.AlarmID] = true
			ids = append(ids, ev.AlarmID)
		}
	}
	p := newPlan()
	if len(evs) == 0 {
		return p, nil
	}
	stored, err := o.loadStates(ctx, ids)
	if err != nil {
		return nil, err
	}
	// current is the state as of the event at hand: stored, then changed
	// by the batch's earlier events (nil: cleared in this batch).
	current := func(ev *alerts.Event) (*AlertmanagerState, error) {
		if st, ok := p.state[ev.AlarmID]; ok {
			return st, nil
		}
		if st, ok := stored[ev.AlarmID]; ok {
			return st, nil
		}
		// Raised before this output started (or before it skipped a
		// backlog): the alarm index knows the alarm; the refresh posted it
		// with the authorisation it has now.
		a, err := alarmstore.GetIn(ctx, o.rdb, o.keys, o.partition, ev.AlarmID)
		switch {
		case errors.Is(err, alarmstore.ErrNotFound):
			st := stateFromEvent(ev)
			st.both = true
			return st, nil
		case err != nil:
			return nil, err
		}
		return stateFromAlarm(&a), nil
	}
	for i := range evs {
		ev := &evs[i]
		id := ev.AlarmID
		switch ev.Type {
		case alerts.Raised:
			st := stateFromEvent(ev)
			if prev, ok := stored[id]; ok {
				st.Silence = prev.Silence
			}
			p.add(t.firing(id, st, whereOf(ev), ev.Authorization, nil, now))
			p.state[id] = st
		case alerts.Authorized, alerts.Unauthorized:
			st, err := current(ev)
			if err != nil {
				return nil, err
			}
			if st == nil {
				continue // cleared already
			}
			authorized := ev.Type == alerts.Authorized
			if st.both {
				st.Authorized, st.both = !authorized, false
			}
			if st.Authorized != authorized {
				p.add(t.resolved(id, st, st.Authorized, ev.TS, ev.Type, now))
			}
			st.Authorized = authorized
			var auth *alerts.AuthRef
			if authorized {
				auth = ev.Authorization
			}
			w := whereOf(ev)
			if w.op == nil {
				w.op = st.Operator // the raise's: this event does not carry the pilot
			}
			p.add(t.firing(id, st, w, auth, nil, now))
			p.state[id] = st
		case alerts.Acked:
			st, err := current(ev)
			if err != nil {
				return nil, err
			}
			if st == nil || st.both {
				continue // cleared already, or gone from the index
			}
			if st.Silence == "" && p.silence(id) == nil && t.silenceDue(ev.TS, now) {
				p.create = append(p.create, &amCreate{alarm: id, by: ev.By, note: ev.Note, at: ev.TS})
			}
			p.state[id] = st
		case alerts.Cleared:
			st, err := current(ev)
			if err != nil {
				return nil, err
			}
			if st == nil {
				continue
			}
			why := "cleared: " + ev.Reason
			if st.both {
				p.add(t.resolved(id, st, false, ev.TS, why, now))
				p.add(t.resolved(id, st, true, ev.TS, why, now))
			} else {
				p.add(t.resolved(id, st, st.Authorized, ev.TS, why, now))
			}
			if st.Silence != "" {
				p.expire = append(p.expire, st.Silence)
			}
			if c := p.silence(id); c != nil {
				c.done = true // acked and cleared in one batch: no silence
			}
			p.state[id] = nil
		}
	}
	return p, nil
}

// planRefresh is the refresh of the partition's active alarms: each is
// posted firing again (the series it has now: a change of authorisation
// the events have not brought yet resolves the old one), an acked one
// gets its silence if it has none (an ack whose event was dropped), and
// an alarm the state holds but the index no longer has active (a clear
// dropped with a backlog) is resolved and its silence expired.
func (o *output) planRefresh(ctx context.Context, now time.Time) (*amPlan, error) {
	t := o.am
	active, err := alarmstore.ActiveIn(ctx, o.rdb, o.keys, o.partition)
	if err != nil {
		return nil, err
	}
	stored, err := o.loadStates(ctx, nil)
	if err != nil {
		return nil, err
	}
	p := newPlan()
	for i := range active {
		a := &active[i]
		st := stateFromAlarm(a)
		if prev, ok := stored[a.AlarmID]; ok {
			st.Silence = prev.Silence
			if prev.Authorized != st.Authorized {
				p.add(t.resolved(a.AlarmID, prev, prev.Authorized, now, "authorisation changed", now))
			}
		}
		r := a.Raise()
		p.add(t.firing(a.AlarmID, st, whereOf(&r), a.Authorization, a.SignalLostSince, now))
		if a.Ack != nil && st.Silence == "" && t.silenceDue(a.Ack.At, now) {
			p.create = append(p.create, &amCreate{alarm: a.AlarmID, by: a.Ack.By, note: a.Ack.Note, at: a.Ack.At})
		}
		p.state[a.AlarmID] = st
		delete(stored, a.AlarmID)
	}
	for id, st := range stored {
		p.add(t.resolved(id, st, st.Authorized, now, "no longer active", now))
		if st.Silence != "" {
			p.expire = append(p.expire, st.Silence)
		}
		p.state[id] = nil
	}
	return p, nil
}

// stateArgs are the state changes of p as the commit script takes them:
// n_set, (field, value)×n_set, deleted fields.
func stateArgs(p *amPlan) []any {
	var set, del []any
	for id, st := range p.state {
		if st == nil {
			del = append(del, id)
			continue
		}
		b, _ := json.Marshal(st)
		set = append(set, id, b)
	}
	return append(append([]any{len(set) / 2}, set...), del...)
}

// amCommitScript moves the cursor KEYS[1] to ARGV[1] and applies the
// state changes to the hash KEYS[2] in one step, unless the cursor is
// already at or past ARGV[1] (a zombie, or a retry: nothing written).
// ARGV[2] = n_set, then (field, value)×n_set, then the fields to delete.
var amCommitScript = redis.NewScript(`
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local cur = redis.call('GET', KEYS[1])
if cur then
  local cms, cseq = parse(cur)
  local nms, nseq = parse(ARGV[1])
  if cms and (cms > nms or (cms == nms and cseq >= nseq)) then
    return 0
  end
end
local n = tonumber(ARGV[2])
for i = 0, n - 1 do
  redis.call('HSET', KEYS[2], ARGV[3 + 2 * i], ARGV[4 + 2 * i])
end
for i = 3 + 2 * n, #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`)

// saveStates writes a refresh's state changes (no cursor move).
func (o *output) saveStates(ctx context.Context, p *amPlan) error {
	if len(p.state) == 0 {
		return nil
	}
	key := o.keys.State(o.name)
	_, err := o.rdb.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		for id, st := range p.state {
			if st == nil {
				pl.HDel(ctx, key, id)
				continue
			}
			b, _ := json.Marshal(st)
			pl.HSet(ctx, key, id, b)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("alertmanager output: save state: %w", err)
	}
	return nil
}

// streamEnd is the id of the outbox's last entry, StartID when empty.
func (o *output) streamEnd(ctx context.Context) (string, error) {
	msgs, err := o.rdb.XRevRangeN(ctx, o.keys.Outbox(), "+", "-", 1).Result()
	if err != nil {
		return "", fmt.Errorf("alertmanager output: last outbox entry: %w", err)
	}
	if len(msgs) == 0 {
		return redislayout.StartID, nil
	}
	return msgs[0].ID, nil
}

// refresh posts the partition's active alarms once; an error leaves the
// next refresh to try again (what was done stays done: it is all
// idempotent, and a silence is found again rather than made twice).
func (o *output) refresh(ctx context.Context) error {
	now := time.Now().UTC()
	p, err := o.planRefresh(ctx, now)
	if err != nil {
		return err
	}
	if err := o.amExec(ctx, p, "refresh"); err != nil {
		return err
	}
	o.am.m.refreshes.Inc()
	return o.saveStates(ctx, p)
}

// runAlertmanager drains the outbox into one Alertmanager until ctx ends:
// each batch of events becomes the requests that bring the Alertmanager
// to the alarms' state, retried with backoff until done, then the cursor
// and the state move in one script. Between batches, every Refresh (and
// at start) the partition's active alarms are posted again from the alarm
// index. An output without a cursor starts at the outbox's end: history
// is not replayed at an Alertmanager; the first refresh posts what is
// active.
func (o *output) runAlertmanager(ctx context.Context) {
	after := ""
	failures := 0
	fail := func(msg string, err error) {
		failures++
		o.m.errors.Inc()
		d := jittered(o.cfg.Backoff, o.am.cfg.BackoffMax, failures)
		o.log.Error(msg, "error", err, "attempt", failures, "retry_in", d)
		sleep(ctx, d)
	}
	var refreshAt time.Time
	refreshFailures := 0
	for ctx.Err() == nil {
		if after == "" {
			cur, err := o.rdb.Get(ctx, o.keys.Cursor(o.name)).Result()
			if errors.Is(err, redis.Nil) {
				if cur, err = o.streamEnd(ctx); err == nil {
					err = o.rdb.SetNX(ctx, o.keys.Cursor(o.name), cur, 0).Err()
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					fail("alertmanager output: read cursor", err)
				}
				continue
			}
			after = cur
			o.prog.restart(after)
			refreshAt = time.Time{}
			o.log.Info("alertmanager output resumes", "after", after, "url", o.am.url)
		}
		if now := time.Now(); !now.Before(refreshAt) {
			if err := o.refresh(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				refreshFailures++
				d := jittered(o.cfg.Backoff, o.am.cfg.BackoffMax, refreshFailures)
				if refreshFailures == 1 || refreshFailures%10 == 0 {
					o.log.Warn("alertmanager output: refresh failed", "error", err, "attempt", refreshFailures, "retry_in", d)
				}
				refreshAt = now.Add(d)
			} else {
				refreshFailures = 0
				refreshAt = now.Add(o.am.cfg.Refresh)
			}
		}
		block := min(o.cfg.Block, time.Until(refreshAt))
		entries, err := redislayout.ReadOutbox(ctx, o.rdb, o.keys, after, o.cfg.BatchSize, max(block, time.Millisecond))
		if err != nil {
			if ctx.Err() == nil {
				fail("alertmanager output: read outbox", err)
			}
			continue
		}
		if err := o.confirm(ctx, entries); err != nil {
			if ctx.Err() == nil {
				fail("alertmanager output: outbox entries not yet on enough Redis replicas; holding them", err)
			}
			continue
		}
		failures = 0
		if len(entries) == 0 {
			continue
		}
		p, skip, ok := o.deliverAM(ctx, entries)
		if !ok {
			return
		}
		last := entries[len(entries)-1].ID
		if skip {
			end, err := o.streamEnd(ctx)
			if err != nil {
				fail("alertmanager output: skip the backlog", err)
				continue
			}
			n := max(o.backlog.Load(), int64(len(entries)))
			if err := advance(ctx, o.rdb, o.keys, o.name, end, nil); err != nil {
				fail("alertmanager output: skip the backlog", err)
				continue
			}
			o.am.m.drops(dropBacklog).Add(float64(n))
			o.backlog.Store(0) // until the lag tracker measures from the new cursor
			o.log.Warn("alertmanager output: backlog over its bound dropped; the active alarms are posted again from the alarm index",
				"entries", n, "max_backlog", o.am.cfg.MaxBacklog, "after", end)
			after = ""
			continue
		}
		for try := 0; ; try++ {
			n, err := amCommitScript.Run(ctx, o.rdb, []string{o.keys.Cursor(o.name), o.keys.State(o.name)}, append([]any{last}, stateArgs(p)...)...).Int()
			if err == nil {
				if n == 0 {
					o.log.Warn("alertmanager output: cursor already past this batch (another instance runs the partition?)", "outbox_id", last)
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			fail("alertmanager output: save cursor", err)
		}
		after = last
		o.prog.add(len(entries))
		o.m.delivered.Add(float64(len(entries)))
	}
}

// deliverAM plans a batch and sends it until done: ok is false only when
// ctx ended; skip is true when the Alertmanager kept failing while the
// output fell more than MaxBacklog entries behind.
func (o *output) deliverAM(ctx context.Context, entries []redislayout.Entry) (p *amPlan, skip, ok bool) {
	for attempt := 1; ; attempt++ {
		var err error
		if p == nil {
			p, err = o.planEvents(ctx, entries, time.Now().UTC())
		}
		if err == nil {
			if err = o.amExec(ctx, p, "events"); err == nil {
				return p, false, true
			}
		}
		if ctx.Err() != nil {
			return nil, false, false
		}
		if o.am.cfg.MaxBacklog > 0 && o.backlog.Load() > o.am.cfg.MaxBacklog {
			return nil, true, true
		}
		o.m.retries.Inc()
		d := jittered(o.cfg.Backoff, o.am.cfg.BackoffMax, attempt)
		o.log.Debug("alertmanager attempt failed", "outbox_id", entries[0].ID, "attempt", attempt, "error", err, "retry_in", d)
		if attempt == 1 || attempt%10 == 0 {
			o.log.Warn("alertmanager output: cannot deliver; retrying", "error", err, "attempt", attempt, "retry_in", d)
		}
		if !sleep(ctx, d) {
			return nil, false, false
		}
	}
}
