package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// AlertmanagerProc is a private Prometheus Alertmanager (Debian's
// prometheus-alertmanager, scripts/alertmanager.sh: installed if missing,
// started by PID, HA gossip off) on a free port, that one test owns and
// may stop and start again (its silences and notification log persist in
// its directory, as a real one's do).
type AlertmanagerProc struct {
	port int
	dir  string
}

// StartAlertmanager starts one with the configuration config (YAML) and
// stops it when the test ends. The test fails, never skips, when it
// cannot be installed or started.
func StartAlertmanager(t testing.TB, config string) *AlertmanagerProc {
	t.Helper()
	a := &AlertmanagerProc{port: FreePort(t), dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(a.dir, "alertmanager.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(a.dir, "alertmanager.log"))
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("alertmanager %s, end of its log:\n%s", a.URL(), b)
		}
		_ = a.Stop(context.Background())
	})
	if err := a.Start(context.Background()); err != nil {
		t.Fatalf("start private alertmanager: %v", err)
	}
	return a
}

// URL is its base URL, http://127.0.0.1:port.
func (a *AlertmanagerProc) URL() string { return "http://127.0.0.1:" + strconv.Itoa(a.port) }

// Start starts it (again), returning once it answers /-/ready.
func (a *AlertmanagerProc) Start(ctx context.Context) error { return a.run(ctx, "start") }

// Stop stops it (SIGTERM: it snapshots silences and the notification log).
func (a *AlertmanagerProc) Stop(ctx context.Context) error { return a.run(ctx, "stop") }

func (a *AlertmanagerProc) run(ctx context.Context, verb string) error {
	return runScript(ctx, "alertmanager.sh", verb, "ALERTMANAGER_PORT="+strconv.Itoa(a.port),
		"ALERTMANAGER_DIR="+a.dir, "ALERTMANAGER_CONFIG="+filepath.Join(a.dir, "alertmanager.yml"))
}

// AMAlert is an alert as Alertmanager's API v2 lists it (GET
// /api/v2/alerts) and as its webhook notifications carry it.
type AMAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	// Status is a notification's alert's "firing" or "resolved"; the API's
	// alerts have it in State.
	Status string `json:"-"`
	State  string `json:"-"`
}

// Alerts lists the alerts it holds (active, silenced and inhibited).
func (a *AlertmanagerProc) Alerts(ctx context.Context) ([]AMAlert, error) {
	var raw []struct {
		AMAlert
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := a.get(ctx, "/api/v2/alerts", &raw); err != nil {
		return nil, err
	}
	out := make([]AMAlert, len(raw))
	for i, r := range raw {
		out[i] = r.AMAlert
		out[i].State = r.Status.State
	}
	return out, nil
}

// AMSilence is a silence as GET /api/v2/silences lists it.
type AMSilence struct {
	ID       string `json:"id"`
	Matchers []struct {
		Name    string `json:"name"`
		Value   string `json:"value"`
		IsRegex bool   `json:"isRegex"`
		IsEqual *bool  `json:"isEqual"`
	} `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

// Silences lists its silences (active, pending and expired).
func (a *AlertmanagerProc) Silences(ctx context.Context) ([]AMSilence, error) {
	var out []AMSilence
	return out, a.get(ctx, "/api/v2/silences", &out)
}

func (a *AlertmanagerProc) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+path, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, res.Status, b)
	}
	return json.Unmarshal(b, v)
}

// AMReceiver is a webhook receiver for an Alertmanager's notifications:
// it records each alert of each notification, with the notification's
// time.
type AMReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []AMNotified
}

// AMNotified is one alert of one notification.
type AMNotified struct {
	At     time.Time
	Status string // firing, resolved
	Alert  AMAlert
}

// StartAMReceiver starts a receiver, closed when the test ends.
func StartAMReceiver(t testing.TB) *AMReceiver {
	r := &AMReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var msg struct {
			Alerts []struct {
				AMAlert
				Status string `json:"status"`
			} `json:"alerts"`
		}
		if err := json.NewDecoder(req.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		r.mu.Lock()
		for _, a := range msg.Alerts {
			al := a.AMAlert
			al.Status = a.Status
			r.got = append(r.got, AMNotified{At: now, Status: a.Status, Alert: al})
		}
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is where the Alertmanager's webhook_configs should post.
func (r *AMReceiver) URL() string { return r.srv.URL + "/" }

// Notified returns what was received so far, in order, for alarm id
// (every alarm when id is "").
func (r *AMReceiver) Notified(id string) []AMNotified {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []AMNotified
	for _, n := range r.got {
		if id == "" || n.Alert.Labels["alarm_id"] == id {
			out = append(out, n)
		}
	}
	return out
}

// AlertmanagerConfig is a configuration whose only receiver is the
// webhook at url (send_resolved on), one group per alarm, and the given
// repeat interval, with group_wait and group_interval of 1 s.
func AlertmanagerConfig(url string, repeat time.Duration) string {
	return fmt.Sprintf(`route:
  receiver: test
  group_by: [alarm_id]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: %s
receivers:
  - name: test
    webhook_configs:
      - url: %q
        send_resolved: true
`, repeat, url)
}
