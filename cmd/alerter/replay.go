package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/nofly-dev/nofly/alerts/consume"
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
	input := fs.String("input", "", "recorded telemetry, NDJSON one record per line (- for stdin)")
	strict := fs.Bool("strict", false, "stop at the first bad line, writing no event; without it bad lines are skipped, reported at the end, and the exit status is 1")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	switch {
	case c.Zones == "":
		return badField("Zones", "a zone file is required")
	case *input == "":
		return fmt.Errorf("%w: --input is required", ErrConfig)
	case c.Batch < 1:
		return badField("Batch", "must be at least 1")
	}
	ix, zrep, err := c.zoneSource().load()
	if err != nil {
		return err
	}
	// The zone summary on stderr: an audit over no zones, or over zones
	// dropped or warned of, must say so.
	logZoneReport(newLogger(stderr, c.LogLevel), "zones loaded", zrep, ix.Version())
	var in io.Reader = os.Stdin
	name := "stdin"
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, *input
	}
	res, err := consume.Replay(ctx, ix, in, stdout, consume.ReplayOptions{Name: name, Batch: c.Batch, Strict: *strict})
	if err != nil {
		return err
	}
	log := newLogger(stderr, c.LogLevel)
	res.Input.Log(log)
	log.Info("replayed", "records", res.Records, "applied", res.Applied,
		"duplicates", res.Duplicates, "raised", res.Raised, "cleared", res.Cleared,
		"bad_lines", res.Input.Bad, "fields_dropped", res.Input.DroppedBy)
	return res.Input.Err()
}
