// Package remoteid turns Remote ID into telemetry positions: a Network
// Remote ID USS's flights answer (ASTM F3411-22a, the InterUSS OpenAPI's
// GetFlightsResponse, RIDFlight, RIDAircraftState) and Broadcast Remote ID
// Location messages as OpenDroneID decoders write them in JSON (librid's
// message packs, opendroneid-core-c's decoded structs): see ODID.
//
// The rules, each chosen so that no unknown value is read in the direction
// that would miss an alarm:
//
//   - drone_id: see DroneID.
//   - seq: the position's time in unix milliseconds, so a position a USS
//     sends again in its next answer gets the same (drone_id, seq) and the
//     alerter drops it as a duplicate.
//   - Positions of one drone are put in time order and deduplicated within a
//     request (a USS may list recent_positions newest first, and its current
//     state usually repeats the newest one).
//   - Altitude: F3411's alt and ODID's AltitudeGeo are above the WGS84
//     ellipsoid: alt_m with alt_ref WGS84. -1000 ("unknown") leaves alt_m
//     out; the geofence then counts the drone as within every AMSL/WGS84
//     limit.
//   - Height: only a height above GroundLevel (ODID height type 1) is
//     agl_m. A height above TakeoffLocation (type 0) is not height above
//     the ground under the drone (it took off from a roof, a hill, a
//     valley) and is dropped, so AGL limits count as met.
//   - Accuracy: the horizontal/vertical accuracy class becomes its bound in
//     metres (h_accuracy_m, v_accuracy_m); "unknown" and the open-ended
//     classes (HA10NMPlus, VA150mPlus) leave it out.
//   - Track and direction: 361 ("unknown") is left out; other values are
//     normalised into [0, 360) (F3411 tracks run from -359.99).
//   - Speed: 255 ("unknown") is left out.
//   - An optional value that is not of its type (a string for a track, a
//     height that is no RIDHeight, an accuracy class or height reference
//     F3411 does not define) is dropped alone, listed in Result.Notes; the
//     position is kept. Only the required fields (id, time, lat/lng) refuse
//     an item.
//   - lat = lng = 0 is both formats' "no position": such a position is
//     skipped (listed in Result.Skipped, never produced), not refused, since
//     it carries nothing to test against a zone; so is a flight with
//     neither current_state nor recent_positions (F3411 allows one known
//     only by its operating_area). The rest of the request is kept.
package remoteid
