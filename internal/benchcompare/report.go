package benchcompare

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
)

// Report is what cmd/benchcompare --json writes: the run's configuration,
// the machine and every side's figures in every round, the unit of each in
// its field's name. internal/benchcharts reads it for BENCHMARKS.md's
// chart; a run measured before --json existed is transcribed into the same
// shape, with Source saying from where.
type Report struct {
	// Source is empty for a run written by the command itself; a
	// transcription names the BENCHMARKS.md section, commit and command.
	Source  string       `json:"source,omitempty"`
	Command string       `json:"command"`
	Config  ReportConfig `json:"config"`
	Machine Machine      `json:"machine"`
	// Note is what the figures alone do not say (a transcription's load
	// average, events stated only in the text).
	Note string      `json:"note,omitempty"`
	Rows []ReportRow `json:"rows"`
}

// ReportConfig is Config without what does not describe the run.
type ReportConfig struct {
	Tile38     string `json:"tile38"`
	Partitions int    `json:"partitions"`
	Drones     int    `json:"drones"`
	Positions  int    `json:"positions"`
	Seed       uint64 `json:"seed"`
	Clients    int    `json:"clients"`
	Batch      int    `json:"batch"`
	Rounds     int    `json:"rounds"`
}

// ReportRow is one side in one round. The CPU maps are µs per position of
// each process measured: Own those the side's total counts, Other the rest
// in the same window (another side's servers, idle or serving other users
// of the machine, and the benchmark client), shown, not counted.
type ReportRow struct {
	Round              int                `json:"round"`
	Side               string             `json:"side"`
	Positions          int                `json:"positions"`
	WallSeconds        float64            `json:"wall_s,omitempty"`
	PositionsPerSecond float64            `json:"positions_per_s"`
	CPUOwn             map[string]float64 `json:"cpu_us_per_position"`
	CPUOther           map[string]float64 `json:"other_cpu_us_per_position,omitempty"`
	CPUTotal           float64            `json:"total_cpu_us_per_position"`
	// Events is nil in a transcription that did not record the counts.
	Events *ReportEvents `json:"events,omitempty"`
}

// ReportEvents is a side's events against the reference and against the
// stale-blind reference.
type ReportEvents struct {
	Delivered    int `json:"delivered"`
	Reference    int `json:"reference"`
	Missing      int `json:"missing"`
	Extra        int `json:"extra"`
	ExtraRaised  int `json:"extra_raised"`
	ExtraCleared int `json:"extra_cleared"`
	Duplicate    int `json:"duplicate"`
	StaleBlind   struct {
		Missing   int `json:"missing"`
		Extra     int `json:"extra"`
		Duplicate int `json:"duplicate"`
	} `json:"stale_blind"`
}

// LoadAvg is /proc/loadavg's first three fields ("?" where there is none).
func LoadAvg() string { return loadavg() }

// NewReport builds the report of rows run with cfg; loadStart and loadEnd
// are /proc/loadavg's first three fields before and after.
func NewReport(cfg Config, command, loadStart, loadEnd string, rows []Row) *Report {
	r := &Report{
		Command: command,
		Config: ReportConfig{Tile38: cfg.Tile38, Partitions: cfg.Partitions, Drones: cfg.Drones, Positions: cfg.Positions,
			Seed: cfg.Seed, Clients: cfg.Clients, Batch: cfg.Batch, Rounds: cfg.Rounds},
		Machine: Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadStart, LoadEnd: loadEnd},
		Rows:    make([]ReportRow, 0, len(rows)),
	}
	for _, row := range rows {
		rr := ReportRow{Round: row.Round, Side: row.Side, Positions: row.Records, WallSeconds: row.Wall.Seconds(),
			PositionsPerSecond: row.PerSecond(), CPUOwn: map[string]float64{}, CPUTotal: row.TotalMicros()}
		own := map[int]bool{}
		for _, p := range sideOf[row.Side] {
			own[p] = true
		}
		for p := range nProcs {
			v := row.MicrosPerRecord(p)
			switch {
			case v < 0: // not measured: absent, not zero
			case own[p]:
				rr.CPUOwn[procNames[p]] = v
			default:
				if rr.CPUOther == nil {
					rr.CPUOther = map[string]float64{}
				}
				rr.CPUOther[procNames[p]] = v
			}
		}
		ev := &ReportEvents{Delivered: row.Diff.Events, Reference: row.Diff.Reference, Missing: row.Diff.Missing,
			Extra: row.Diff.Extra, ExtraRaised: row.Diff.ExtraRaised, ExtraCleared: row.Diff.ExtraCleared, Duplicate: row.Diff.Duplicate}
		ev.StaleBlind.Missing, ev.StaleBlind.Extra, ev.StaleBlind.Duplicate = row.StaleBlind.Missing, row.StaleBlind.Extra, row.StaleBlind.Duplicate
		rr.Events = ev
		r.Rows = append(r.Rows, rr)
	}
	return r
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("benchcompare: encode report: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("benchcompare: write report: %w", err)
	}
	return nil
}
