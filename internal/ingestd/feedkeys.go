package ingestd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nofly-dev/nofly/ingest/feedkey"
	"github.com/nofly-dev/nofly/internal/reloadstat"
)

// loadFeeds reads --feed-keys; a bad file is a configuration error naming
// the file and line (exit status 2).
func (s *service) loadFeeds() error {
	if s.cfg.FeedKeys == "" {
		return nil
	}
	feeds, err := feedkey.Load(s.cfg.FeedKeys)
	if err != nil {
		return badField("FeedKeys", err.Error())
	}
	s.feeds = feeds
	return nil
}

// logIntake says at start who may write.
func (s *service) logIntake() {
	switch {
	case s.feeds != nil:
		names := make([]string, len(s.feeds.Feeds))
		for i := range s.feeds.Feeds {
			names[i] = s.feeds.Feeds[i].Name
		}
		s.log.Info(fmt.Sprintf("intake: keys from %s: %d feeds", s.feeds.Path, len(names)), "intake", "keys",
			"feed_keys", s.feeds.Path, "feeds", names)
	case s.cfg.InsecureOpenIntake:
		s.log.Warn("intake: OPEN, insecure: any client that reaches "+s.Addr()+" may write telemetry (--insecure-open-intake)",
			"intake", "open")
	default:
		s.log.Info("intake: loopback only: only clients on 127.0.0.0/8 or ::1 may write; give --feed-keys for others",
			"intake", "loopback")
	}
}

// feedKeyCmd makes a feed's key: it prints the key once, on stdout, and the
// line for the --feed-keys file, which holds only the key's hash. With
// --append it adds the line to the file (after checking the file with it
// still parses) and prints only the key.
func feedKeyCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ingest feed-key")
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the feed's name, 1-64 of [A-Za-z0-9._-] (logs and metrics show it)")
	prefixes := fs.String("prefixes", "", "comma-separated drone-id prefixes the feed may write; empty: any")
	rate := fs.String("rate", "", "records the feed may write per second (N/s), minute (N/m) or hour (N/h); empty: unlimited")
	burst := fs.Int("burst", 0, "records the feed may write at once; 0: the N of --rate")
	appendTo := fs.String("append", "", "add the line to this key file (created 0600 if missing) and print only the key")
	if err := fs.Parse(args, getenv); err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("%w: --name is required", ErrConfig)
	}
	if err := feedkey.CheckName(*name); err != nil {
		return fmt.Errorf("%w: --name: %s", ErrConfig, err)
	}
	key, err := feedkey.NewKey()
	if err != nil {
		return err
	}
	f := feedkey.Feed{Name: *name, Hash: feedkey.Hash(key)}
	if *prefixes != "" {
		if f.Prefixes, err = feedkey.ParsePrefixes(*prefixes); err != nil {
			return fmt.Errorf("%w: --prefixes: %s", ErrConfig, err)
		}
	}
	if *rate != "" {
		if f.Rate, f.Per, err = feedkey.ParseRate(*rate); err != nil {
			return fmt.Errorf("%w: --rate: %s", ErrConfig, err)
		}
		f.Burst = f.Rate
	}
	switch {
	case *burst != 0 && *rate == "":
		return fmt.Errorf("%w: --burst needs --rate", ErrConfig)
	case *burst < 0:
		return fmt.Errorf("%w: --burst must be positive (records)", ErrConfig)
	case *burst > 0:
		f.Burst = *burst
	}
	line := f.Line()
	if *appendTo == "" {
		fmt.Fprintf(stdout, "# key of feed %s, shown only this once (nofly keeps its hash): the feed sends it as \"Authorization: Bearer <key>\"\n%s\n", *name, key)
		fmt.Fprintf(stdout, "# the line for the --feed-keys file:\n%s\n", line)
		return nil
	}
	if err := appendLine(*appendTo, line); err != nil {
		return err
	}
	fmt.Fprintln(stdout, key)
	fmt.Fprintf(stderr, "feed %s added to %s; ingest serve reads it at start and on SIGHUP\n", *name, *appendTo)
	return nil
}

// appendLine adds line to the key file at path if the file, with it, still
// parses (a feed of the same name or key is refused, naming the line).
func appendLine(path, line string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("feed keys: %w", err)
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		line = "\n" + line
	}
	line += "\n"
	if _, err := feedkey.Parse(path, bytes.NewReader(append(old, line...))); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("feed keys: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("feed keys %s: %w", path, err)
	}
	return f.Close()
}

// feedReloader reads --feed-keys again on SIGHUP and puts its feeds in use
// (ingest.Server.SetFeeds: the next write is checked against them; a feed
// whose rate did not change keeps its token bucket). A file that does not
// parse is logged (file and line, never a key or hash) and counted, and
// the feeds in use stay. Only SIGHUP reloads: the file is not watched. The
// reload is not in the audit trail (ingest has no Redis, and its Kafka
// principal may write only telemetry): the log line and the metric are
// its record.
type feedReloader struct {
	path   string
	setter interface {
		SetFeeds(*feedkey.Set) (feedkey.Changes, error)
	}
	log   *slog.Logger
	stat  *reloadstat.Stat
	feeds prometheus.Gauge
}

const (
	feedReloadsHelp = "Reads of the --feed-keys file on SIGHUP, by result: ok (its feeds are in use) or error (it did not parse or read; the feeds in use stayed)."
	feedLastHelp    = "1 if the last SIGHUP's read of --feed-keys took the file (or there was none), 0 if it failed and the feeds before it are still in use (NoflyTokenReloadFailed)."
)

// newFeedReloader is nil without --feed-keys (nothing to reload).
func newFeedReloader(s *service, reg prometheus.Registerer) *feedReloader {
	if s.feeds == nil {
		reloadstat.None(reg, "nofly_ingest_feed_keys", feedLastHelp)
		return nil
	}
	r := &feedReloader{
		path: s.feeds.Path, setter: s.api, log: s.log,
		stat: reloadstat.New(reg, "nofly_ingest_feed_keys", feedReloadsHelp, feedLastHelp),
		feeds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nofly_ingest_feed_keys",
			Help: "Feeds in the --feed-keys file in use.",
		}),
	}
	r.feeds.Set(float64(len(s.feeds.Feeds)))
	reg.MustRegister(r.feeds)
	return r
}

// reload reads the file again; on a nil reloader (no --feed-keys) it says
// there is nothing to reload.
func (r *feedReloader) reload(log *slog.Logger) {
	if r == nil {
		log.Info("SIGHUP: no --feed-keys to reload")
		return
	}
	set, err := feedkey.Load(r.path)
	var ch feedkey.Changes
	if err == nil {
		ch, err = r.setter.SetFeeds(set)
	}
	r.stat.Done(err)
	if err != nil {
		r.log.Error("feed keys: reload failed, the feeds in use are unchanged", "feed_keys", r.path, "error", err)
		return
	}
	r.feeds.Set(float64(len(set.Feeds)))
	r.log.Info("feed keys: reloaded", "feed_keys", r.path, "feeds", len(set.Feeds),
		"added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
}

// reloadOnHUP reloads the feed keys at every SIGHUP until ctx ends.
func (s *service) reloadOnHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				s.reloader.reload(s.log)
			}
		}
	}()
}
