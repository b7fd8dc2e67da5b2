// Package soak is the national-scale soak of issue 29 (cmd/soak): a fleet
// of drones at a set rate per drone through the real ingest and alerter,
// a generated national zone set loaded through PUT /v1/zones, dashboards
// open in headless chromium and an SSE client on /v1/events/stream, all
// measured every sample interval: consumer lag, alarm latency from
// ingest's 202 to the SSE client, Redis used_memory, the alerter's RSS,
// each process's CPU per 1,000 positions, each page's frame time and JS
// heap. With Ceiling set it searches, by short steps, the most drones the
// machine carries with the lag under its target, and profiles the alerter
// and ingest there.
//
// The processes, their topics and Redis prefix come from
// internal/benchcompare's StartPipeline, as cmd/bench's do.
package soak

import (
	"errors"
	"log/slog"
	"math"
	"time"
)

// Config is one soak run.
type Config struct {
	Brokers      string `json:"brokers"`
	Redis        string `json:"redis"`
	KafkaPIDFile string `json:"kafka_pid_file"`
	Partitions   int    `json:"partitions"`
	// Drones each send Hz positions a second for Duration.
	Drones   int           `json:"drones"`
	Hz       float64       `json:"hz"`
	Duration time.Duration `json:"duration_ns"`
	// Clients post concurrently, each its own drones' positions of a tick
	// in one request.
	Clients int `json:"clients"`
	// Zones is the size of the generated set, ZoneFormat its generator
	// (internal/zonegen: "faa-grid" or "ed269").
	Zones      int    `json:"zones"`
	ZoneFormat string `json:"zone_format"`
	Seed       uint64 `json:"seed"`
	// TogglerShare of the drones hop in and out of one zone every
	// ToggleEvery fixes: a known, steady share of alarms. The others fly
	// straight lines at SpeedMPS across the set's sites, AltAGLM above
	// the ground, and alarm where a cell's ceiling is below them.
	TogglerShare float64 `json:"toggler_share"`
	ToggleEvery  int     `json:"toggle_every"`
	SpeedMPS     float64 `json:"speed_mps"`
	AltAGLM      float64 `json:"alt_agl_m"`
	// Dashboards is how many pages are open (0-3): an airport view, a
	// country view, one panning between sites every PanEvery.
	Dashboards int           `json:"dashboards"`
	PanEvery   time.Duration `json:"pan_every_ns"`
	Sample     time.Duration `json:"sample_ns"`
	// LagTarget is the consumer lag a rate must stay under.
	LagTarget time.Duration `json:"lag_target_ns"`
	// Ceiling searches the most drones (at Hz) with the lag under
	// LagTarget, in steps of CeilingStep, from CeilingStart drones up to
	// Drones; the run's traffic then is the search.
	Ceiling      bool          `json:"ceiling"`
	CeilingStart int           `json:"ceiling_start,omitempty"`
	CeilingStep  time.Duration `json:"ceiling_step_ns,omitempty"`
	// Profile, if set, records perf profiles of the alerter and ingest
	// for this long at the end of the traffic (at the ceiling when
	// searching) into ProfileDir.
	Profile    time.Duration `json:"profile_ns,omitempty"`
	ProfileDir string        `json:"profile_dir,omitempty"`
	BinDir     string        `json:"bin_dir,omitempty"`
	LogDir     string        `json:"log_dir,omitempty"`
	Command    string        `json:"command"`
	Log        *slog.Logger  `json:"-"`
}

// Defaults is issue 29's proof: 50,000 drones at 1 Hz for 10 minutes
// over 100,000 zones with three dashboards.
func Defaults() Config {
	return Config{Brokers: "127.0.0.1:9092", Redis: "127.0.0.1:6379", Partitions: 12, Drones: 50_000, Hz: 1,
		Duration: 10 * time.Minute, Clients: 50, Zones: 100_000, ZoneFormat: "faa-grid", Seed: 29,
		TogglerShare: 0.004, ToggleEvery: 10, SpeedMPS: 12, AltAGLM: 20, Dashboards: 3, PanEvery: 5 * time.Second,
		Sample: 10 * time.Second, LagTarget: 2 * time.Second, CeilingStart: 5000, CeilingStep: 60 * time.Second}
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	if c.Drones < 1 || c.Clients < 1 || c.Partitions < 1 || c.ToggleEvery < 1 || c.Zones < 1 {
		errs = append(errs, errors.New("--drones, --clients, --partitions, --toggle-every and --zones must be at least 1"))
	}
	if !(c.Hz > 0) || math.IsInf(c.Hz, 0) {
		errs = append(errs, errors.New("--hz must be a positive number"))
	}
	if c.Duration <= 0 && !c.Ceiling {
		errs = append(errs, errors.New("--duration must be positive"))
	}
	if c.Sample < time.Second || c.LagTarget <= 0 || c.PanEvery <= 0 {
		errs = append(errs, errors.New("--sample must be at least 1s, --lag-target and --pan-every positive"))
	}
	if c.TogglerShare < 0 || c.TogglerShare > 1 {
		errs = append(errs, errors.New("--toggler-share must be between 0 and 1"))
	}
	if c.Dashboards < 0 || c.Dashboards > len(pageViews) {
		errs = append(errs, errors.New("--dashboards must be from 0 to 3"))
	}
	if c.ZoneFormat != "faa-grid" && c.ZoneFormat != "ed269" {
		errs = append(errs, errors.New(`--zone-format must be "faa-grid" or "ed269"`))
	}
	if c.Ceiling && (c.CeilingStart < 1 || c.CeilingStart > c.Drones || c.CeilingStep < 2*c.Sample) {
		errs = append(errs, errors.New("--ceiling needs --ceiling-start from 1 to --drones and --ceiling-step of at least two samples"))
	}
	if c.Profile < 0 || (c.Profile > 0 && c.ProfileDir == "") {
		errs = append(errs, errors.New("--profile needs --profile-dir"))
	}
	return errors.Join(errs...)
}

// togglerStride: every stride-th drone (0, stride, 2·stride…) is a
// toggler, so any prefix of the fleet (a ceiling step) holds the share;
// 0: none.
func (c Config) togglerStride() int {
	if c.TogglerShare <= 0 {
		return 0
	}
	return max(1, int(math.Round(1/c.TogglerShare)))
}
