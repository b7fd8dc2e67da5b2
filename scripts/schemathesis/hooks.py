"""Schemathesis hooks for ingest's description (scripts/schemathesis.sh).

What internal/ingestd/openapi.yaml states that a JSON Schema cannot express:

- NDJSON. OpenAPI 3.0 has no schema for a sequence of JSON texts, so an
  NDJSON body is described as the array of its lines' values; the
  serializer sends such an array as one JSON text per line.
- Clocks. A time more than max-clock-skew-ahead ahead of the receive time is
  refused with 400 naming it (a bound relative to "now"), and a Remote ID
  time before 1970 too (its seq, unix milliseconds, would be negative).
  Generated dates run from year 0 to 9999, so most are out of bounds:
  map_case moves three in four of those (chosen by a hash of the value, so a
  seed replays) into the last hour, which keeps positive requests
  acceptable, and leaves the rest to exercise the refusal.
- Remote ID's "no position" (lat = lng = 0, or librid's null, null) and a
  flight with no position are left out of a request; a request left with no
  position is refused with 400 "no records in the body". Generators love 0,
  so map_case moves three in four such positions off it in the same way.

filter_failure excuses a schema-valid request refused for one of these
reasons only, after checking the reason holds for the request as sent: the
400 lists only errors on times that are in fact out of bounds, or says "no
records" of a body whose every position is left out. Every other check
still applies to such a request.

NOFLY_ST_SKEW_AHEAD is the bound in seconds, as the script starts ingest
with it.

And for the alert API's description (scripts/schemathesis-alerter.sh):

- Identifiers. Generated alarm ids and zone ids name nothing; map_case puts
  a real one (NOFLY_ST_ALARM_IDS, NOFLY_ST_ZONE_IDS) in three in four
  positive requests, so GET, ack, PUT and DELETE reach their 200s too.
- Cursors are opaque: only one the API handed out is one. map_case puts a
  cursor of the route seen in an answer (after_call collects them) in
  three in four, and
  filter_failure excuses the 400 naming cursor (or after) only when the
  cursor sent is not one handed out.
- If-Match is a version, and a change against any other than the current
  one gets 412. map_case puts the current version (the latest ETag seen) in
  three in four; filter_failure excuses a 412 only when it names the
  If-Match sent and a different current version.
- Zone changes are validated whole, as the alerter loads zones: a schema
  can say "an object", not "a loadable zone set". map_case sends the
  scenario set (NOFLY_ST_ZONES) less one zone, or a valid feature, in three
  in four positive PUTs; those must be accepted. filter_failure excuses
  invalid_zones for the other, generated bodies only, a feature whose id
  is not the path's (refused, as the description says), and a DELETE that
  would leave no zone (the alerter runs without --allow-empty-zones).
- GET /v1/alarms refuses an until before since (400), as its description
  says; filter_failure excuses that 400 when the times are so.
- GET /v1/drones and GET /v1/map/zones refuse a bbox whose min is above
  its max (400), as their descriptions say and the pattern cannot;
  filter_failure excuses that 400 when the bbox sent is so.
- Authorisations (POST /v1/authorizations) are validated whole: the
  description says in prose what a schema cannot (until after from and at
  most 366 days later, a reason not only spaces, lengths in UTF-8 bytes).
  map_case sends a valid authorisation in three in four positive POSTs;
  those must be created (201). filter_failure excuses invalid_authorization
  for the other, generated bodies only. Authorisation ids name nothing
  unless one was created: map_case puts an id an answer handed out (201s
  and lists, collected by after_call) in three in four positive requests
  of /v1/authorizations/{authorization_id}, so GET and DELETE reach their
  200s (and DELETE its 409, already ended). If-Match of POST and DELETE is
  the authorisation set's version, tracked as the zone set's is. DELETE is
  a revocation: the authorisation stays, ended (its description says so),
  so the stateful phase's "deleted resource still available" is excused
  when the GET after it answers it revoked and ended.
"""

import datetime
import json
import os
import re
import threading
import urllib.parse
import zlib

import schemathesis
from schemathesis.core.parameters import ParameterLocation

UTC = datetime.timezone.utc
SKEW_AHEAD = datetime.timedelta(seconds=float(os.environ.get("NOFLY_ST_SKEW_AHEAD", "600")))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
# map_case moves times this close to a bound too, so none is left near one.
MARGIN = datetime.timedelta(hours=2)
# feeds/remoteid.MaxODIDAhead: how far ahead of received_at a TimeStamp may
# resolve.
ODID_AHEAD = datetime.timedelta(seconds=10)
RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|([+-])(\d{2}):(\d{2}))"
)


@schemathesis.serializer("application/x-ndjson", "application/ndjson")
def ndjson(ctx, value):
    if isinstance(value, bytes):
        return value
    lines = value if isinstance(value, list) else [value]
    return "".join(json.dumps(v) + "\n" for v in lines).encode()


def now():
    return datetime.datetime.now(UTC)


def parse_time(v):
    """The instant of an RFC 3339 string (or RID Time object) as Go reads it, or None."""
    if isinstance(v, dict):
        v = v.get("value")
    if not isinstance(v, str):
        return None
    m = RFC3339.fullmatch(v)
    if not m:
        return None
    y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or ""
    try:
        t = datetime.datetime(max(y, 1), mo, d, h, mi, sec, int((frac[1:] + "000000")[:6] or 0), tzinfo=UTC)
    except ValueError:
        return None
    if m.group(8) != "Z":
        off = datetime.timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
        try:
            t = t - off if m.group(9) == "+" else t + off
        except OverflowError:  # an offset past the ends of Python's calendar
            return datetime.datetime.min.replace(tzinfo=UTC) if y < 5000 else datetime.datetime.max.replace(tzinfo=UTC)
    return t


def out_of_bounds(t, rid, margin=datetime.timedelta(0)):
    """Whether ingest refuses time t: ahead beyond the skew, or (Remote ID) before 1970."""
    return t > now() + SKEW_AHEAD - margin or (rid and t < EPOCH + margin)


def recent(v, rid):
    """v, or a time in the last hour in its place when it is out of bounds (3 in 4)."""
    t = parse_time(v)
    if t is None or not out_of_bounds(t, rid, MARGIN):
        return v
    raw = v.get("value") if isinstance(v, dict) else v
    h = zlib.crc32(raw.encode())
    if h % 4 == 0:
        return v  # left out of bounds: the refusal is exercised too
    s = (now() - datetime.timedelta(seconds=h % 3600)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {**v, "value": s} if isinstance(v, dict) else s


def items(body):
    if isinstance(body, list):
        return body
    return [body]


def somewhere(pos, lat, lng, salt):
    """pos, or (3 in 4, by a hash of the request salt and pos) moved off 0, 0
    when it is there, Remote ID's "no position"."""
    if not isinstance(pos, dict) or pos.get(lat) != 0 or pos.get(lng) != 0:
        return pos
    if zlib.crc32((salt + json.dumps(pos, sort_keys=True, default=repr)).encode()) % 4 == 0:
        return pos  # left at 0, 0: leaving it out is exercised too
    return {**pos, lat: 1.5}


def rid_state(s, time_key, salt):
    if not isinstance(s, dict):
        return s
    s = dict(s)
    if time_key in s:
        s[time_key] = recent(s[time_key], True)
    if "position" in s:
        s["position"] = somewhere(s["position"], "lat", "lng", salt)
    return s


def odid_message(m, salt):
    if not isinstance(m, dict):
        return m
    m = dict(m)
    if "received_at" in m:
        m["received_at"] = recent(m["received_at"], True)
    if isinstance(m.get("location"), dict):
        m["location"] = somewhere(somewhere(m["location"], "Latitude", "Longitude", salt), "latitude", "longitude", salt)
    if isinstance(m.get("messages"), list):
        m["messages"] = [somewhere(x, "latitude", "longitude", salt) for x in m["messages"]]
    return m


def map_body(path, body):
    """Move the times and the 0, 0 positions of a request of the operation at path."""
    # Generators repeat one template position across many requests: hashed
    # with the whole request, it is moved in some and kept in others.
    salt = json.dumps(body, sort_keys=True, default=repr)
    if path == "/v1/telemetry":
        out = [{**r, "ts": recent(r["ts"], False)} if isinstance(r, dict) and "ts" in r else r for r in items(body)]
        return out if isinstance(body, list) else out[0]
    if path == "/v1/telemetry/rid" and isinstance(body, dict) and isinstance(body.get("flights"), list):
        flights = []
        for f in body["flights"]:
            if isinstance(f, dict):
                f = dict(f)
                if "current_state" in f:
                    f["current_state"] = rid_state(f["current_state"], "timestamp", salt)
                if isinstance(f.get("recent_positions"), list):
                    f["recent_positions"] = [rid_state(rp, "time", salt) for rp in f["recent_positions"]]
            flights.append(f)
        return {**body, "flights": flights}
    if path == "/v1/telemetry/odid":
        out = [odid_message(m, salt) for m in items(body)]
        return out if isinstance(body, list) else out[0]
    return body


def map_ingest_case(case):
    if isinstance(case.body, (dict, list)):
        case.body = map_body(case.operation.path, case.body)


PATH_TOKEN = re.compile(r"\[(\d+)\]|\.?([A-Za-z_][A-Za-z0-9_]*)")


def at(body, path):
    """The value at a JSON path such as flights[1].current_state.timestamp, or None."""
    v = body
    for idx, key in PATH_TOKEN.findall(path):
        if idx:
            if not isinstance(v, list) or int(idx) >= len(v):
                return None
            v = v[int(idx)]
        else:
            if not isinstance(v, dict) or key not in v:
                return None
            v = v[key]
    return v


def resolve_odid(seconds, recv):
    """feeds/remoteid.ResolveSecondsPastHour."""
    try:
        base = recv.replace(minute=0, second=0, microsecond=0) + datetime.timedelta(milliseconds=round(seconds * 1e3))
        limit = recv + ODID_AHEAD
        for t in (base + datetime.timedelta(hours=1), base, base - datetime.timedelta(hours=1)):
            if t <= limit:
                return t
    except OverflowError:
        pass
    # Only at the ends of the calendar, years from either bound: within the
    # hour of recv is as out of bounds as recv.
    return recv


def error_time(path, body, e):
    """The instant a 400's error e is about, when it is a time field, or None."""
    field = e.get("field", "")
    if path == "/v1/telemetry":
        recs = items(body)
        line = e.get("line", 0)
        if field != "ts" or not 1 <= line <= len(recs) or not isinstance(recs[line - 1], dict):
            return None
        return parse_time(recs[line - 1].get("ts"))
    if path == "/v1/telemetry/rid" and re.search(r"\.(timestamp|time)$", field):
        return parse_time(at(body, field))
    m = re.fullmatch(r"(\[\d+\])\.received_at", field)
    if path == "/v1/telemetry/odid" and m:
        item = at(items(body), m.group(1))
        if not isinstance(item, dict) or not isinstance(item.get("received_at"), str):
            return None
        return parse_time(item["received_at"])  # before 1970: the seq would be negative
    m = re.fullmatch(r"(\[\d+\])\..*\.(TimeStamp|timestamp)", field)
    if path == "/v1/telemetry/odid" and m:
        item = at(items(body), m.group(1))
        if not isinstance(item, dict) or not isinstance(item.get("received_at"), str):
            return None  # resolved against the receive time: never out of bounds
        recv = parse_time(item["received_at"])
        ts = at(items(body), field)
        if recv is None or ts is None or ts == 0xFFFF:
            return recv  # unknown: the receive time is the position's
        if not isinstance(ts, (int, float)):
            return None
        return resolve_odid(ts / (1 if m.group(2) == "TimeStamp" else 10), recv)
    return None


def left_out(lat, lng, librid=False):
    """Whether a Remote ID position is left out: 0, 0, or librid's unknown null, null."""
    return (lat == 0 and lng == 0 and not isinstance(lat, bool)) or (librid and lat is None and lng is None)


def positions_left_out(path, body):
    """Whether every position of a Remote ID request is left out (vacuously, when it has none)."""
    out = []
    if path == "/v1/telemetry/rid":
        for f in body.get("flights", []) if isinstance(body, dict) else []:
            if not isinstance(f, dict):
                return False
            cs = f.get("current_state")
            if isinstance(cs, dict):
                out.append(left_out(at(cs, "position.lat"), at(cs, "position.lng")))
            for rp in f.get("recent_positions") or []:
                out.append(left_out(at(rp, "position.lat"), at(rp, "position.lng")))
    elif path == "/v1/telemetry/odid":
        for m in items(body):
            if not isinstance(m, dict):
                return False
            if "messages" in m:
                for msg in m["messages"] if isinstance(m["messages"], list) else []:
                    if isinstance(msg, dict) and msg.get("message_type") == 1:
                        out.append(left_out(msg.get("latitude"), msg.get("longitude"), True))
                continue
            loc = m.get("location")
            if not isinstance(loc, dict):
                return False
            if "TimeStamp" not in loc and "timestamp" in loc:
                out.append(left_out(loc.get("latitude"), loc.get("longitude"), True))
            else:
                out.append(left_out(loc.get("Latitude"), loc.get("Longitude")))
    else:
        return False
    return all(out)


def keep_ingest_failure(failure, case, response):
    """Keep every failure but a schema-valid request refused with 400 for a
    reason the description states in prose, the reason checked."""
    if failure.code != "ST202" or response.status_code != 400:
        return True
    try:
        answer = json.loads(response.content)
    except ValueError:
        return True
    path, body = case.operation.path, case.body
    if answer == {"error": "no records in the body"}:
        return not positions_left_out(path, body)
    errors = answer.get("errors") if isinstance(answer, dict) else None
    if not errors:
        return True
    for e in errors:
        t = error_time(path, body, e)
        # Received before now: beyond now + bound is beyond it at receipt.
        if t is None or not out_of_bounds(t, path != "/v1/telemetry"):
            return True
    return False


# The alert API (scripts/schemathesis-alerter.sh).


def env_list(name):
    return [v for v in os.environ.get(name, "").split(",") if v]


ALARM_IDS = env_list("NOFLY_ST_ALARM_IDS")
ZONE_IDS = env_list("NOFLY_ST_ZONE_IDS")
ZONE_SET = None
if os.environ.get("NOFLY_ST_ZONES"):
    with open(os.environ["NOFLY_ST_ZONES"]) as f:
        ZONE_SET = json.load(f)
CURSOR_PARAMS = {"/v1/alarms": "cursor", "/v1/drones": "cursor", "/v1/events": "after", "/v1/audit": "cursor"}
ZONE_CHANGES = {("PUT", "/v1/zones"), ("PUT", "/v1/zones/{id}"), ("DELETE", "/v1/zones/{id}")}
AUTH_CHANGES = {("POST", "/v1/authorizations"), ("DELETE", "/v1/authorizations/{authorization_id}")}

lock = threading.Lock()
# Every cursor an answer handed out, by route: one route's cursor is not
# another's. NOFLY_ST_CURSORS holds route=cursor pairs to start from.
cursors = {p: set() for p in CURSOR_PARAMS}
for pair in env_list("NOFLY_ST_CURSORS"):
    route, _, c = pair.partition("=")
    if route in cursors and c:
        cursors[route].add(c)
zone_version = [int(os.environ.get("NOFLY_ST_ZONE_VERSION", "1"))]  # the latest ETag seen
auth_version = [0]  # the authorisation set's latest ETag seen
auth_ids = set()  # the authorisation ids answers handed out
made = set()  # the ids of the cases whose zone or authorisation body map_case made (valid ones)


def positive(case, location):
    """Whether case's location was generated to fit the schema."""
    meta = case.meta
    comp = meta.components.get(location) if meta is not None else None
    return comp is None or not comp.mode.is_negative


def chosen(salt, options):
    """One of options, or None one time in four, by a hash of salt (a seed replays)."""
    h = zlib.crc32(json.dumps(salt, sort_keys=True, default=repr).encode())
    if not options or h % 4 == 0:
        return None
    return options[(h // 4) % len(options)]


def valid_feature(zone_id, salt):
    """A loadable GeoJSON zone: a 500 m circle near the scenario's zones."""
    h = zlib.crc32(json.dumps(salt, sort_keys=True, default=repr).encode())
    props = {"name": "schemathesis " + zone_id, "category": "warning", "radius_m": 500}
    if h % 2:
        props["id"] = zone_id  # else it takes the path's
    return {"type": "Feature", "geometry": {"type": "Point", "coordinates": [-0.30 - (h % 50) / 1000, 51.55]},
            "properties": props}


def valid_authorization(salt):
    """An authorisation the server takes: a window around now, a zone of the scenario or all."""
    h = zlib.crc32(json.dumps(salt, sort_keys=True, default=repr).encode())
    zones = "all" if h % 3 == 0 or not ZONE_IDS else {"ids": [ZONE_IDS[h % len(ZONE_IDS)]]}
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return {"drone": "ST-%d*" % (h % 100) if h % 2 else "ST-%d" % (h % 1000), "zones": zones,
            "from": (now() - datetime.timedelta(minutes=h % 60)).strftime(fmt),
            "until": (now() + datetime.timedelta(hours=1 + h % 24)).strftime(fmt),
            "reason": "schemathesis", "reference": "ST-%d" % h}


def map_if_match(case, version):
    """If-Match of a positive change: the current version (in some form) three in four times."""
    if case.headers is not None and "If-Match" in case.headers and positive(case, ParameterLocation.HEADER):
        with lock:
            v = version[0]
        forms = [str(v), '"%d"' % v, 'W/"%d"' % v]
        case.headers["If-Match"] = chosen(["if-match", case.headers["If-Match"]], forms) or case.headers["If-Match"]


def map_authorization_case(case, op, pp):
    if "authorization_id" in pp and positive(case, ParameterLocation.PATH):
        with lock:
            seen = sorted(auth_ids)
        pp["authorization_id"] = chosen(["authorization", case.method, pp["authorization_id"]], seen) or pp["authorization_id"]
    if op not in AUTH_CHANGES:
        return
    map_if_match(case, auth_version)
    if op[0] == "POST" and isinstance(case.body, dict) and positive(case, ParameterLocation.BODY):
        salt = ["body", case.body]
        if chosen(salt, [True]) is None:
            return  # left generated: refused as invalid_authorization (excused)
        case.body = valid_authorization(salt)
        made.add(case.id)


def map_alerter_case(case):
    op = (case.method.upper(), case.operation.path)
    pp = case.path_parameters or {}
    if case.operation.path.startswith("/v1/authorizations"):
        map_authorization_case(case, op, pp)
        return
    if "alarm_id" in pp and positive(case, ParameterLocation.PATH):
        pp["alarm_id"] = chosen(["alarm", pp["alarm_id"]], ALARM_IDS) or pp["alarm_id"]
    if case.operation.path == "/v1/zones/{id}" and "id" in pp and positive(case, ParameterLocation.PATH):
        pp["id"] = chosen(["zone", case.method, pp["id"]], ZONE_IDS) or pp["id"]
    name = CURSOR_PARAMS.get(case.operation.path)
    if name and isinstance(case.query, dict) and name in case.query and positive(case, ParameterLocation.QUERY):
        with lock:
            seen = sorted(cursors[case.operation.path])
        case.query[name] = chosen(["cursor", case.query[name]], seen) or case.query[name]
    if op not in ZONE_CHANGES:
        return
    map_if_match(case, zone_version)
    if op[0] == "PUT" and isinstance(case.body, dict) and positive(case, ParameterLocation.BODY):
        salt = ["body", case.body]
        if chosen(salt, [True]) is None:
            return  # left generated: refused as invalid_zones (excused)
        if op[1] == "/v1/zones" and ZONE_SET is not None:
            # The scenario set less one zone: each such PUT changes the set.
            feats = ZONE_SET["features"]
            drop = zlib.crc32(json.dumps(salt, sort_keys=True, default=repr).encode()) % len(feats)
            case.body = {**ZONE_SET, "features": feats[:drop] + feats[drop + 1:]}
        elif op[1] == "/v1/zones/{id}":
            # The path parameter as schemathesis holds it is percent-encoded;
            # the server decodes it (api/params.go), so the feature's id is
            # the decoded one.
            case.body = valid_feature(urllib.parse.unquote(pp["id"]), salt)
        else:
            return
        made.add(case.id)


@schemathesis.hook
def map_case(context, case):
    if case.operation.path.startswith("/v1/telemetry"):
        map_ingest_case(case)
    else:
        map_alerter_case(case)
    return case


def answer_of(response):
    try:
        return json.loads(response.content)
    except ValueError:
        return None


@schemathesis.hook
def after_call(context, case, response):
    """Collect the cursors and the zone version the answers hand out."""
    path = case.operation.path
    for prefix, version in (("/v1/zones", zone_version), ("/v1/authorizations", auth_version)):
        if path.startswith(prefix) and response.status_code in (200, 201, 412):
            m = re.fullmatch(r'"(\d+)"', response.headers.get("etag", [""])[0])
            if m:
                with lock:
                    version[0] = int(m.group(1))
    if path.startswith("/v1/authorizations") and response.status_code in (200, 201):
        v = answer_of(response)
        items = v.get("authorizations") if isinstance(v, dict) and path == "/v1/authorizations" and case.method.upper() == "GET" else [v]
        with lock:
            auth_ids.update(a["id"] for a in items or [] if isinstance(a, dict) and isinstance(a.get("id"), str))
    if response.status_code != 200:
        return
    found = []
    if path == "/v1/events":
        for line in response.content.splitlines()[-1:]:  # the last line's cursor is past them all
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict) and isinstance(v.get("cursor"), str):
                found.append(v["cursor"])
    elif path in CURSOR_PARAMS:
        v = answer_of(response)
        if isinstance(v, dict) and isinstance(v.get("next_cursor"), str):
            found.append(v["next_cursor"])
    if found:
        with lock:
            cursors[path].update(found)


def parse_if_match(h):
    m = re.fullmatch(r'(?:W/)?(?:"(\d{1,18})"|(\d{1,18}))', (h or "").strip())
    return int(m.group(1) or m.group(2)) if m else None


def keep_alerter_failure(failure, case, response):
    """Keep every failure but a schema-valid request refused for a reason
    the description states in prose, the reason checked."""
    if failure.code == "ST301" and case.operation.path == "/v1/authorizations/{authorization_id}" and response.status_code == 200:
        # DELETE revokes: the authorisation is kept, ended, as described.
        a = answer_of(response)
        return not (isinstance(a, dict) and a.get("state") == "ended" and a.get("revoked_at"))
    if failure.code != "ST202":
        return True
    answer = answer_of(response)
    if not isinstance(answer, dict) or not isinstance(answer.get("details"), dict):
        return True
    code, details = answer.get("code"), answer["details"]
    op = (case.method.upper(), case.operation.path)
    name = CURSOR_PARAMS.get(case.operation.path)
    if response.status_code == 400 and name and details.get("field") == name:
        with lock:
            return (case.query or {}).get(name) in cursors[case.operation.path]
    if response.status_code == 400 and op in (("GET", "/v1/alarms"), ("GET", "/v1/audit")) and details.get("field") == "until":
        # "not before since", in the parameter's description.
        since, until = (parse_time((case.query or {}).get(k)) for k in ("since", "until"))
        return not (since is not None and until is not None and until < since)
    if response.status_code == 400 and op in (("GET", "/v1/drones"), ("GET", "/v1/map/zones")) and details.get("field") == "bbox":
        try:
            b = [float(x) for x in str((case.query or {}).get("bbox", "")).split(",")]
        except ValueError:
            return True
        return not (len(b) == 4 and (b[0] > b[2] or b[1] > b[3]))
    if response.status_code == 400 and op == ("POST", "/v1/authorizations") and code == "invalid_authorization":
        return case.id in made
    if response.status_code == 412 and (op in ZONE_CHANGES or op in AUTH_CHANGES) and code == "version_mismatch":
        sent = parse_if_match((case.headers or {}).get("If-Match"))
        return not (sent is not None and details.get("if_match") == sent and details.get("current_version") != sent)
    if response.status_code == 400 and op in ZONE_CHANGES:
        if code == "invalid_zones" and op[0] == "PUT":
            return case.id in made
        if code == "invalid_zones" and op[0] == "DELETE":
            return details.get("field") != "features"
        if op == ("PUT", "/v1/zones/{id}") and details.get("field") == "properties.id":
            props = case.body.get("properties") if isinstance(case.body, dict) else None
            given = props.get("id") if isinstance(props, dict) else None
            path_id = urllib.parse.unquote(case.path_parameters.get("id") or "")
            return not (isinstance(given, str) and given != path_id)
    return True


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if case.operation.path.startswith("/v1/telemetry"):
        return keep_ingest_failure(failure, case, response)
    return keep_alerter_failure(failure, case, response)
