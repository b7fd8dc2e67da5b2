// Package audit is the audit trail: who did what to the alerter, when,
// from where, and whether it was allowed (docs/design.md, "The audit
// trail"). Every sign-in, ack, zone change, authorisation change, refused
// write and token-file reload is one Entry in a Redis stream, written IN
// THE SAME SCRIPT as the change it records where the change is a Redis
// write (the ack script, the zone and authorisation stores' put script):
// a change is never without its entry, and a retried change that writes
// nothing (an ack of an acked alarm, a put against a stale version) adds
// none. Entries not tied to a Redis write (a sign-in, a reload, a refused
// request) are a plain XADD.
//
// Since Redis Cluster runs a script on one slot, each store's entries go
// to a stream under that store's own hash tag ("<tag>:audit"): one per
// telemetry partition (acks), one for zones, one for authorisations, and
// {prefix:audit}:audit for the rest. Log.List merges them newest first;
// Dispatcher sends them to the Kafka topic audit.events exactly once for
// read_committed readers, the way the outbox's events go to alerts.events.
package audit

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// Actions.
const (
	ActionSignIn              = "sign_in"
	ActionSignOut             = "sign_out"
	ActionAck                 = "ack"
	ActionZonesPut            = "zones_put"   // PUT /v1/zones: the whole set
	ActionZonePut             = "zone_put"    // PUT /v1/zones/{id}
	ActionZoneDelete          = "zone_delete" // DELETE /v1/zones/{id}
	ActionAuthorizationCreate = "authorization_create"
	ActionAuthorizationRevoke = "authorization_revoke"
	ActionTokenReload         = "token_reload"
	ActionFeedKeysReload      = "feed_keys_reload"
	// ActionRequest is a write the caller's role does not allow (outcome
	// denied): the request names it.
	ActionRequest = "request"
)

// Actions lists every action, for validating a filter.
var Actions = []string{ActionSignIn, ActionSignOut, ActionAck, ActionZonesPut, ActionZonePut, ActionZoneDelete,
	ActionAuthorizationCreate, ActionAuthorizationRevoke, ActionTokenReload, ActionFeedKeysReload, ActionRequest}

// Outcomes.
const (
	OutcomeOK     = "ok"
	OutcomeDenied = "denied" // refused for the caller's role (403)
	OutcomeFailed = "failed" // e.g. a reload that kept the old file
)

// Via says how the caller proved who they are.
const (
	ViaToken  = "token"  // a token of the token file
	ViaOIDC   = "oidc"   // an OIDC session or access token
	ViaNone   = "none"   // no token file: the loopback-only anonymous admin
	ViaSystem = "system" // the alerter itself (a reload on SIGHUP)
)

// Limits on what an entry holds, so an entry stays a few kB however
// large the change.
const (
	MaxField  = 256     // who, role, target, client, request: bytes
	MaxDetail = 8 << 10 // detail JSON: bytes; larger is replaced by a note
)

// Entry is one audited action.
type Entry struct {
	// ID is where the entry is kept ("<source>-<stream id>"), unique and
	// stable; TS is its stream id's time (the Redis clock at the write).
	// Both are set when an entry is read, not when it is written (Encode
	// leaves them out: empty, they are not in the JSON).
	ID string    `json:"id,omitempty"`
	TS time.Time `json:"ts,omitzero"`
	// Who is the caller's name (a token's name, an OIDC user's name),
	// Role its role, Via how it was proved (ViaToken, ViaOIDC, ...).
	Who  string `json:"who"`
	Role string `json:"role"`
	Via  string `json:"via"`
	// Action is one of Actions; Target what it acted on: the alarm id,
	// the zone id ("" for the whole set), the authorisation id, the file.
	Action string `json:"action"`
	Target string `json:"target"`
	// BeforeVersion and AfterVersion are the zone or authorisation set's
	// versions either side of the change.
	BeforeVersion *int64 `json:"before_version,omitempty"`
	AfterVersion  *int64 `json:"after_version,omitempty"`
	// Detail is the action's own data: an ack's note, the authorisation
	// created or revoked. Never a token or a secret.
	Detail json.RawMessage `json:"detail,omitempty"`
	// Client is the client's address (the peer, or the forwarded address
	// from a trusted proxy); Request is "METHOD /path".
	Client  string `json:"client,omitempty"`
	Request string `json:"request,omitempty"`
	// Outcome is OutcomeOK, OutcomeDenied or OutcomeFailed; Status the
	// HTTP status answered (0 outside a request).
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"`
}

// Encode is the JSON stored for e: its fields clipped to their limits,
// its ID and TS left out (the stream gives them).
func (e Entry) Encode() []byte {
	e.ID, e.TS = "", time.Time{}
	e.Who, e.Role, e.Via = Clip(e.Who), Clip(e.Role), Clip(e.Via)
	e.Action, e.Target, e.Client, e.Request = Clip(e.Action), Clip(e.Target), Clip(e.Client), Clip(e.Request)
	if len(e.Detail) > MaxDetail || (len(e.Detail) > 0 && !json.Valid(e.Detail)) {
		e.Detail = json.RawMessage(`{"omitted":"detail over ` + strconv.Itoa(MaxDetail) + ` bytes"}`)
	}
	b, _ := json.Marshal(e)
	return b
}

// Clip cuts s to MaxField bytes on a rune boundary.
func Clip(s string) string {
	if len(s) <= MaxField {
		return s
	}
	s = s[:MaxField]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// Stream is the audit stream under a store's hash tag (with its braces).
func Stream(tag string) string { return tag + ":audit" }

// Tag is the hash tag of the entries tied to no store: {prefix:audit}.
func Tag(prefix string) string { return "{" + prefix + ":audit}" }

// Write is an entry ready for a change script: the entry's JSON, and the
// stream id below which the stream is trimmed in the same XADD (MINID ~).
type Write struct {
	Entry []byte
	MinID string
}

// change is a pending entry, carried by the context of a request into the
// store whose script writes it.
type change struct {
	e         Entry
	retention time.Duration
	now       func() time.Time
}

type changeKey struct{}

// WithChange returns ctx carrying e, to be written by the script of the
// change ctx is passed to (Change reads it) and kept retention.
func WithChange(ctx context.Context, e Entry, retention time.Duration, now func() time.Time) context.Context {
	if now == nil {
		now = time.Now
	}
	return context.WithValue(ctx, changeKey{}, &change{e: e, retention: retention, now: now})
}

// Change is the pending entry of ctx for a change from version before to
// after (both 0 when the change has no version, an ack), ok false when
// ctx carries none: the change is then not audited (a test, a tool).
func Change(ctx context.Context, before, after int64) (w Write, ok bool) {
	c, _ := ctx.Value(changeKey{}).(*change)
	if c == nil {
		return Write{}, false
	}
	e := c.e
	if before != 0 || after != 0 {
		e.BeforeVersion, e.AfterVersion = &before, &after
	}
	return Write{Entry: e.Encode(), MinID: minID(c.now(), c.retention)}, true
}

// minID is the stream id of now - retention ("0" when retention is 0: keep all).
func minID(now time.Time, retention time.Duration) string {
	if retention <= 0 {
		return "0"
	}
	return strconv.FormatInt(now.Add(-retention).UnixMilli(), 10) + "-0"
}

// Recorder records an entry not tied to a Redis change: a sign-in, a
// reload, a refused request. The API and the reloaders take this, so a
// test can record in memory.
type Recorder interface {
	Record(ctx context.Context, e Entry) error
}

// FieldEntry is the stream field holding an entry's JSON.
const FieldEntry = "entry"

// XAddLua is the Lua that appends an entry in a change script: stream is
// the KEYS expression of the audit stream, entry and minid the ARGV
// expressions of Write.Entry and Write.MinID. An empty entry appends
// nothing.
func XAddLua(stream, entry, minid string) string {
	return "if " + entry + " ~= '' then redis.call('XADD', " + stream + ", 'MINID', '~', " + minid + ", '*', '" + FieldEntry + "', " + entry + ") end\n"
}
