// Package reloadstat counts the SIGHUP reloads of a secrets file the same
// way in every process (the API's token file, ingest's feed keys): a
// counter of reads by result and a gauge that the last one took the file,
// which the NoflyTokenReloadFailed rule watches.
package reloadstat

import "github.com/prometheus/client_golang/prometheus"

// Stat is one file's reload metrics: <name>_reloads_total{result} and
// <name>_last_reload_successful.
type Stat struct {
	reloads *prometheus.CounterVec
	last    prometheus.Gauge
}

// New registers name's two metrics with both results present at 0 and
// the gauge at 1 (nothing has failed yet).
func New(reg prometheus.Registerer, name, reloadsHelp, lastHelp string) *Stat {
	s := &Stat{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name + "_reloads_total", Help: reloadsHelp}, []string{"result"}),
		last:    prometheus.NewGauge(prometheus.GaugeOpts{Name: name + "_last_reload_successful", Help: lastHelp}),
	}
	s.reloads.WithLabelValues("ok")
	s.reloads.WithLabelValues("error")
	s.last.Set(1)
	reg.MustRegister(s.reloads, s.last)
	return s
}

// None registers only the gauge, always 1, for a process without the file:
// nothing to reload, so nothing failed, and the alert rule's series is
// there on every process.
func None(reg prometheus.Registerer, name, lastHelp string) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name + "_last_reload_successful", Help: lastHelp},
		func() float64 { return 1 }))
}

// Done counts one reload by its error (nil: the file is in use).
func (s *Stat) Done(err error) {
	if err != nil {
		s.reloads.WithLabelValues("error").Inc()
		s.last.Set(0)
		return
	}
	s.reloads.WithLabelValues("ok").Inc()
	s.last.Set(1)
}
