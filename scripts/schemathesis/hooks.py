"""Schemathesis hooks for ingest's description (scripts/schemathesis.sh).

What cmd/ingest/openapi.yaml states that a JSON Schema cannot express:

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
"""

import datetime
import json
import os
import re
import zlib

import schemathesis

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


@schemathesis.hook
def map_case(context, case):
    if isinstance(case.body, (dict, list)):
        case.body = map_body(case.operation.path, case.body)
    return case


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


@schemathesis.hook
def filter_failure(context, failure, case, response):
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
