// Package api is the alerter's HTTP alert API (docs/design.md, "HTTP alert
// API"): alarms with their lifecycle and acks, the event history and its
// live stream, versioned zones and drones. Every alerter instance serves it
// on its --http listener; any instance answers any request, since the
// state is in Redis. The description is openapi/*.yaml, served merged at
// /openapi.json.
package api
