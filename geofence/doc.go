// Package geofence holds no-fly zones and answers, for a drone position,
// which zones contain it. It knows nothing of Kafka or Redis.
//
// # Model
//
// A Zone has an id (unique in its set), a name, a Category and one or more
// Volumes. A Volume is a horizontal area — polygons with holes (a GeoJSON
// Polygon or MultiPolygon) or a circle (centre and radius, great-circle
// distance on a sphere of radius orb.EarthRadius) — between an optional
// floor and ceiling. GeoJSON zones have one volume; ED-269 and ED-318 zones
// have one per geometry element or layer (Flugplatz Reichenbach's stacked
// rings are three volumes of one zone), so that a drone moving from one
// ring to the next stays in the same zone and its alarm does not flap.
//
// A point is in a polygon when it is inside the outer ring and inside no
// hole (crossing-number test; a point exactly on an edge may fall either
// way). Polygon edges are straight lines in longitude/latitude (RFC 7946). An
// edge whose ends are more than 180° of longitude apart crosses the
// antimeridian the short way, so an unsplit ring such as 179°E → 179°W
// covers 2° of longitude; zones split at the antimeridian into a
// MultiPolygon work as well. A ring that goes once around a pole (say
// along 85°N through 0°, 90°, 180°, -90°) bounds the polar cap on the side
// of its mean latitude; the cap can also be written as a box whose edges
// run along ±180° and ±90° (an edge from -180° to 180° at one latitude is
// that whole parallel). Circles that cross the antimeridian or cover a pole
// work as-is. Positions are normalised to longitudes in [-180, 180).
//
// # Categories
//
// "restricted" and "warning", as in docs/design.md. ED-269 / ED-318
// restrictions map as: PROHIBITED → restricted; REQ_AUTHORISATION
// (ED-318: REQ_AUTHORIZATION, both spellings accepted) and CONDITIONAL →
// warning, because the flight may be legal (authorised or meeting the
// conditions) but an operator should look; the original value is kept in
// Zone.Restriction. NO_RESTRICTION zones restrict nothing and are not
// imported (the interuss ED-269 sample has one, sharing its identifier
// with a REQ_AUTHORISATION zone); the load report lists them. A GeoJSON
// zone without a category is restricted (the safe default).
//
// # Formats
//
// LoadFile and Parse detect the format from the content; a UTF-8 byte
// order mark is skipped. A Loader sets the options: Strict (unknown
// GeoJSON properties are errors, not warnings; an API taking zones sets
// it) and Conservative (see Missing and unknown values).
//
//   - GeoJSON FeatureCollection (docs/design.md): geometry Polygon,
//     MultiPolygon, or Point with properties.radius_m; properties id
//     (required, unique), name, category, floor_m / ceiling_m with
//     floor_ref / ceiling_ref (AMSL default, AGL, WGS84), active_from /
//     active_until (RFC 3339), clear_buffer_m (default 0),
//     approach_before_s (Zone.ApproachBefore: seconds, > 0 and <= 3600,
//     how long before a predicted entry to warn; unset, the alerter's
//     default for the category applies; not fingerprinted). An optional
//     top-level "version" names the set. ParseGeoJSON. Flight Blender's
//     geofence properties are read as ours, with a warning: upper_limit
//     as ceiling_m, lower_limit as floor_m (metres; the format gives no
//     reference, see below), start_time as active_from, end_time as
//     active_until, and, as its files have no id, name as the id.
//   - ED-269 JSON, ParseED269, in three layouts: {title, features: [...]};
//     {UASZoneList: [...]} with schedules under "dailyPeriod" (or
//     "schedule"); EUROCONTROL's {uas_zones: [...]}, where applicability,
//     geometry and zoneAuthority may be single objects instead of arrays.
//     Keys match regardless of case and underscores. Each zone: identifier,
//     name, restriction, zoneAuthority, applicability (permanent,
//     startDateTime / endDateTime, schedule or dailyPeriod of {day,
//     startTime, endTime}), geometry: list of {uomDimensions (M, FT or
//     FL, converted to metres), lowerLimit / upperLimit (either may be
//     null), lowerVerticalReference / upperVerticalReference (AGL, AMSL,
//     WGS84; STD, pressure altitude, is compared as AMSL, which it equals in
//     the standard atmosphere),
//     horizontalProjection: Polygon, MultiPolygon, or {type: Circle,
//     center: [lon, lat], radius}}. Coordinates are [lon, lat].
//   - ED-318 GeoJSON, ParseED318: a FeatureCollection whose geometries
//     (Polygon, MultiPolygon, Point with extent {subType: Circle, radius},
//     or a GeometryCollection of them, one volume each) carry a layer
//     {lower, lowerReference, upper, upperReference, uom (m, ft or FL)};
//     properties identifier, name ([{text, lang}]), type (the restriction),
//     zoneAuthority, limitedApplicability (as ED-269's applicability).
//     Metadata dates must be date-time strings.
//
// A file loads whole or not at all: any problem rejects it with a
// *ValidationError that lists every problem, each naming the file (its
// path as given), the feature (counted from 1, as telemetry lines are,
// and its id) and the field, e.g.
//
//	zones/uk.geojson: feature 4 (id "EGLL-CTR"): properties.floor_m: must be below properties.ceiling_m (500 >= 300 AMSL)
//
// A set that loads carries a LoadReport (ZoneSet.Report): zones loaded,
// zones dropped with their reason (NO_RESTRICTION), and warnings, Problems
// like the errors. It warns when no zone remains and when every window of
// a zone has passed; such a zone is kept, since a replay evaluates each
// record at its own time and would lose the alarms of past telemetry.
//
// Validation: rings closed with at least 4 positions and not intersecting
// themselves (the error names the ring, the two edges by the indices of
// their positions and the point where they meet, as lon, lat); no NaN or
// infinity; latitude in [-90, 90], longitude in [-180, 180]; radius > 0;
// floor < ceiling when both are in the same reference; clear_buffer_m >=
// 0; 0 < approach_before_s <= 3600; active_from < active_until; ids
// unique, each 1 to 256 characters (MaxIDLen) of which none is a control
// character (CheckID; any other character, "/" included, is an id's: the
// alert API percent-decodes its path, so /v1/zones/a%2Fb is zone "a/b").
// Before any of it the document itself (CheckText): valid UTF-8, since a
// bad byte would be read as U+FFFD but stored and served as sent, and
// arrays and objects nested at most 64 (MaxDepth) deep, which the formats
// need a tenth of and clients' JSON parsers need bounded; the error names
// the field's JSON path and the byte.
//
// # Missing and unknown values
//
// Nothing missing or unknown is read in the direction that alarms less. A
// value the format makes mandatory and that decides whether a position is
// inside — a limit's vertical reference or unit, a time's UTC offset — is
// refused; with Loader.Conservative (the alerter's --conservative-zones)
// it is read as alarming most, with a warning:
//
//   - a limit without a reference (RefUnknown) counts as met when it is
//     met in any reference the position has a height in, or when the
//     position lacks a height in some reference (the one meant might be
//     that one); a Hit through it has HeightAssumed;
//   - a limit without a unit is read in the unit that makes a floor
//     lowest and a ceiling highest among M, FT and FL;
//   - a date-time or time of day without an offset starts at the earliest
//     instant it could mean (UTC+14) and ends at the latest (UTC-12).
//
// Field by field (GeoJSON names first; ED-269 / ED-318 after):
//
//	field                           missing                               unknown or bad value
//	id / identifier                 error (Flight Blender: name, warning) error (over 256 characters, a control character)
//	category                        restricted                            error
//	restriction / type              error                                 error; NO_RESTRICTION dropped, reported
//	floor_m, ceiling_m              no floor (ground), no ceiling (sky)   error; "120.5" read, warning
//	floor_ref, ceiling_ref          AMSL (the design's default)             error
//	upper_limit, lower_limit        as ceiling_m, floor_m, warning; their reference missing: refused / conservative
//	active_from, active_until       unbounded                             error; no offset: refused / conservative
//	start_time, end_time            as active_from, active_until, warning
//	radius_m                        error for a Point                     error; numeric string read, warning
//	clear_buffer_m                  0                                     error (< 0 too); numeric string read, warning
//	approach_before_s               unset: the alerter's default          error (<= 0, > 3600 too); numeric string read, warning
//	any other property              -                                     warning naming feature and key; Strict: error
//	lowerLimit, upperLimit; layer lower, upper
//	                                no floor, no ceiling (null too)       error; numeric string read, warning
//	uomDimensions; layer uom        with a limit: refused / conservative; error (M, FT, FL; m, ft)
//	                                without one: warning
//	lower/upperVerticalReference; layer lower/upperReference
//	                                with its limit: refused / conservative; error (AGL, AMSL, WGS84, W84;
//	                                without it: warning                   STD is read as AMSL)
//	applicability                   always active                         error
//	startDateTime, endDateTime      unbounded                             error; no offset: refused / conservative
//	schedule / dailyPeriod day      every day                             error
//	startTime, endTime              00:00Z, 24:00Z                        error; no offset: refused / conservative
//	radius (Circle, extent)         error                                 error; numeric string read, warning
//	coordinates                     error                                 error (positions are JSON numbers, RFC 7946)
//
// # Vertical test
//
// Limits are inclusive: floor <= height <= ceiling. A limit is compared
// with the position's height in the limit's own reference (Heights: AMSL,
// WGS84, AGL). When the position has no height in that reference the
// limit counts as met — an unknown height over a runway must alarm — and
// the Hit says so with HeightAssumed.
//
// # Time
//
// A zone is active at t iff ActiveFrom <= t < ActiveUntil (a zero bound is
// unbounded) and, when it has Windows (ED-269/ED-318 applicability), t is
// within one of them: From <= t < Until and, if the window has a weekly
// schedule, within one of its intervals. Schedule times are times of day
// in UTC unless they carry an offset; an interval is [startTime, endTime),
// an endTime at or before startTime runs into the next day, and an
// endTime of 23:59 or 23:59:59 means midnight. A zone inactive at the
// position's time does not contain it.
//
// # Hysteresis
//
// Index.StillInside(zoneID, p) is the test for a drone whose alarm for the
// zone is raised: it stays raised while StillInside is true, that is while
// the zone is active at p.Time and, for some volume of the zone, the
// horizontal distance from p to the volume's area is at most the zone's
// ClearBufferM (0 inside the area) and p's height is at most ClearBufferM
// below the floor and at most ClearBufferM above the ceiling (unknown
// heights count as within, as in the vertical test). So a drone counts as
// out only when it is farther than the buffer outside the boundary, or the
// zone is no longer active, or the zone was removed by a reload. Distances
// to polygons are measured in a local equirectangular projection around
// the position (accurate to well under 1% for buffers up to tens of
// kilometres away from the poles); to circles, along the great circle.
//
// # Approaches
//
// Index.Approaches(p, vE, vN, horizonS, bufferM) looks ahead: the zones
// that the straight path from p at velocity (vE, vN) m/s enters within
// horizonS seconds (EtaS, the entry point) or whose area is within bufferM
// of p now (DistM), one per zone in the set's order. The path is straight
// in the local equirectangular projection around p that hysteresis
// distances use, so polygon entries are exact crossings of their
// longitude/latitude edges; circle entries are the roots of the haversine
// test Query applies, so stepping along the path with Query finds the
// same entry. Only volumes whose vertical limits hold at p's heights count
// (the heights are taken to stay; unknown ones count as within); a zone
// containing p is left out (Query reports it); an entry counts when the
// zone is active at the entry's time, a buffer approach when it is active
// now. A path across the antimeridian is followed; within metres of a pole
// there is no path, and within about a degree distances to a polar cap
// are to its pole side (the projection degenerates). ApproachBefore, the
// zone's own warning horizon, is the caller's to apply.
//
// # Index
//
// NewIndex validates a set (the same rules as the parsers, so zones built
// in code are checked too) and builds an immutable Index, safe for
// concurrent readers. Polygons are cut at the antimeridian into pieces;
// each piece and circle gets a bounding box, and a uniform grid over the
// zones' extent (about four cells per piece, coarsened when big pieces
// would make cell lists long) lists, per cell, the pieces whose box meets
// it, with the box inline (float32, rounded outwards). A query looks up one
// cell, checks the boxes, the vertical limits and the time,
// then runs the exact test: haversine for circles, and for polygons a
// crossing-number test over only the edges in the point's horizontal band
// of the polygon (edges are bucketed into bands at build time). Query
// appends to a caller's slice and does not allocate. Current holds the
// index in use and swaps in a new one on reload; Diff compares two by
// fingerprint.
package geofence
