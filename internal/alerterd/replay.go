package alerterd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nofly-dev/nofly/alerts"
	"github.com/nofly-dev/nofly/alerts/consume"
	"github.com/nofly-dev/nofly/geofence"
)

// ErrInput is wrapped by errors about the replayed file's content.
var ErrInput = consume.ErrInput

func replayCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := DefaultConfig()
	fs := newFlagSet("alerter replay")
	fs.SetOutput(stderr)
	fs.field(&c, "Zones", usages["Zones"])
	for _, f := range []string{"StrictZones", "ConservativeZones", "AllowEmptyZones"} {
		fs.field(&c, f, usages[f])
	}
	fs.field(&c, "Batch", usages["Batch"])
	fs.field(&c, "LogLevel", usages["LogLevel"])
	for _, f := range []string{"SignalLostAfter", "DroneTTL", "EventTTL", "ApproachBefore", "ApproachBufferM"} {
		fs.field(&c, f, usages[f])
	}
	input := fs.String("input", "", "recorded telemetry, NDJSON one record per line (- for stdin); a line's receive time, the log's clock, from its \"received\" (RFC 3339) or a \"<unix ms>\\t\" prefix (kcat -f '%T\\t%s\\n'); tick lines {\"tick\":...} move the clock too")
	history := fs.String("zone-history", "", "zone history: GET /v1/zones/history's answer saved to a file, or that URL (bearer token from NOFLY_API_TOKEN): each record is evaluated with the zone set version its partition used live; needs --partition")
	authHistory := fs.String("authorization-history", "", "authorisation history: GET /v1/authorizations/history's answer saved to a file, or that URL (bearer token from NOFLY_API_TOKEN): each record is decided with the authorisation set version its partition used live; needs --partition")
	partition := fs.Int("partition", -1, "the partition the input was dumped from (with --zone-history or --authorization-history): its switches apply, and the events carry it")
	firstOffset := fs.Int64("first-offset", 0, "the offset of the input's first line (line n is offset first-offset+n-1), for a partition dumped from later than offset 0")
	strict := fs.Bool("strict", false, "stop at the first bad line, writing no event; without it bad lines are skipped, reported at the end, and the exit status is 1")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	switch {
	case c.Zones == "" && *history == "":
		return badField("Zones", "a zone file (or --zone-history) is required")
	case *history != "" && *partition < 0:
		return fmt.Errorf("%w: --zone-history needs --partition, the partition the input was dumped from", ErrConfig)
	case *authHistory != "" && *partition < 0:
		return fmt.Errorf("%w: --authorization-history needs --partition, the partition the input was dumped from", ErrConfig)
	case *input == "":
		return fmt.Errorf("%w: --input is required", ErrConfig)
	case c.Batch < 1:
		return badField("Batch", "must be at least 1")
	case c.SignalLostAfter < time.Second:
		return badField("SignalLostAfter", "must be at least 1s")
	case c.DroneTTL < c.SignalLostAfter:
		return badField("DroneTTL", "must be at least --signal-lost-after")
	case c.ApproachBufferM < 0 || c.ApproachBufferM > 10_000:
		return badField("ApproachBufferM", "must be 0 to 10000 metres")
	}
	if _, err := alerts.ParseApproachBefore(c.ApproachBefore); err != nil {
		return badField("ApproachBefore", err.Error())
	}
	log := newLogger(stderr, c.LogLevel)
	var ix *geofence.Index // the zones before the first switch
	if c.Zones != "" {
		var zrep geofence.LoadReport
		var err error
		ix, zrep, err = c.zoneSource().load()
		if err != nil {
			return err
		}
		// The zone summary on stderr: an audit over no zones, or over zones
		// dropped or warned of, must say so.
		logZoneReport(log, "zones loaded", zrep, ix.Version())
	}
	var switches []consume.ZoneSwitch
	if *history != "" {
		var err error
		switches, err = historySwitches(ctx, *history, *partition, c.zoneValidator(), ix != nil, getenv("NOFLY_API_TOKEN"), log)
		if err != nil {
			return err
		}
	}
	var authSwitches []consume.AuthSwitch
	if *authHistory != "" {
		var err error
		if authSwitches, err = authHistorySwitches(ctx, *authHistory, *partition, getenv("NOFLY_API_TOKEN"), log); err != nil {
			return err
		}
	}
	var in io.Reader = os.Stdin
	name := "stdin"
	size := int64(-1) // unknown: a pipe
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, *input
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
	}
	// Without --zones, ix is nil: every record is after a switch
	// (historySwitches checks).
	res, err := consume.Replay(ctx, ix, in, stdout, consume.ReplayOptions{Name: name, Batch: c.Batch, Strict: *strict,
		Partition: max(*partition, 0), FirstOffset: *firstOffset, Switches: switches, AuthSwitches: authSwitches, Timing: c.timing(), Approach: c.approach(),
		Progress: func(p consume.ReplayProgress) { logProgress(log, p, size) }, ProgressEvery: replayProgressEvery})
	if err != nil {
		return err
	}
	res.Input.Log(log)
	log.Info("replayed", "records", res.Records, "applied", res.Applied, "ticks", res.Ticks,
		"duplicates", res.Duplicates, "raised", res.Raised, "cleared", res.Cleared,
		"signal_lost", res.SignalLost, "signal_regained", res.SignalRegained, "forgotten", res.Forgotten,
		"authorized", res.Authorized, "unauthorized", res.Unauthorized,
		"approaching", res.Approaching, "approach_ended", res.ApproachEnded,
		"bad_lines", res.Input.Bad, "fields_dropped", res.Input.DroppedBy)
	return res.Input.Err()
}

// replayProgressEvery is how often a long replay says where it is on
// stderr; a replay shorter than that says nothing of it.
var replayProgressEvery = 5 * time.Second

// logProgress logs a running replay's progress: records and bytes read,
// records a second since the start and, when the input's size is known,
// how much of it has been read.
func logProgress(log *slog.Logger, p consume.ReplayProgress, size int64) {
	rate := 0.0
	if s := p.Elapsed.Seconds(); s > 0 {
		rate = float64(p.Records) / s
	}
	attrs := []any{"records", p.Records, "records_per_s", int64(rate), "bytes_read", p.Bytes}
	if size >= 0 {
		pct := 100.0
		if size > 0 {
			pct = float64(p.Bytes) * 100 / float64(size)
		}
		attrs = append(attrs, "bytes_total", size, "percent", float64(int(pct*10))/10)
	}
	log.Info("replaying", attrs...)
}
