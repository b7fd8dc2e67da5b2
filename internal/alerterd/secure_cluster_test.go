//go:build cluster

package alerterd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/committed"
	"github.com/nofly-dev/nofly/internal/kafkaconn"
	"github.com/nofly-dev/nofly/internal/redisconn"
	"github.com/nofly-dev/nofly/internal/testenv"
)

// secRun is a command of ours started by a test, its stdout and stderr
// captured together.
type secRun struct {
	name string
	cmd  *exec.Cmd
	out  *lockedOutput
	done chan struct{}
}

type lockedOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secureRuns collects every run of a test so its end can search all their
// output for the passwords.
type secureRuns struct {
	mu   sync.Mutex
	runs []*secRun
}

func (s *secureRuns) start(t *testing.T, name, bin string, args, env []string) *secRun {
	t.Helper()
	r := &secRun{name: name, cmd: exec.Command(bin, args...), out: &lockedOutput{}, done: make(chan struct{})}
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", r.name, r.out.String())
		}
	})
	s.mu.Lock()
	s.runs = append(s.runs, r)
	s.mu.Unlock()
	return r
}

// noSecrets fails the test for every run whose output holds one of secrets.
func (s *secureRuns) noSecrets(t *testing.T, secrets map[string]string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		out := r.out.String()
		for what, secret := range secrets {
			if strings.Contains(out, secret) {
				t.Errorf("%s: its output holds the %s", r.name, what)
			}
		}
	}
	t.Logf("%d runs' output searched for %d passwords", len(s.runs), len(secrets))
}

// wait waits up to d for the process to exit and returns its exit code.
func (r *secRun) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("%s still running after %v; output:\n%s", r.name, d, r.out.String())
		return -1
	}
}

// stop sends SIGTERM and expects a clean exit.
func (r *secRun) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.wait(t, 60*time.Second); code != 0 {
		t.Errorf("%s exited %d after SIGTERM; output:\n%s", r.name, code, r.out.String())
	}
}

// lastLine is the last non-empty line of the output: where a command that
// gives up at start says why.
func (r *secRun) lastLine() string {
	lines := strings.Split(strings.TrimRight(r.out.String(), "\n"), "\n")
	return lines[len(lines)-1]
}

func kafkaFlags(s kafkaconn.Security) []string {
	f := []string{"--kafka-tls=" + strconv.FormatBool(s.KafkaTLS)}
	for flag, v := range map[string]string{
		"--kafka-tls-ca": s.KafkaTLSCA, "--kafka-tls-cert": s.KafkaTLSCert, "--kafka-tls-key": s.KafkaTLSKey,
		"--kafka-sasl": s.KafkaSASL, "--kafka-sasl-user": s.KafkaSASLUser, "--kafka-sasl-password-file": s.KafkaSASLPasswordFile,
	} {
		if v != "" {
			f = append(f, flag, v)
		}
	}
	return f
}

func kafkaEnv(s kafkaconn.Security) []string {
	return []string{
		"NOFLY_KAFKA_TLS=" + strconv.FormatBool(s.KafkaTLS), "NOFLY_KAFKA_TLS_CA=" + s.KafkaTLSCA,
		"NOFLY_KAFKA_TLS_CERT=" + s.KafkaTLSCert, "NOFLY_KAFKA_TLS_KEY=" + s.KafkaTLSKey,
		"NOFLY_KAFKA_SASL=" + s.KafkaSASL, "NOFLY_KAFKA_SASL_USER=" + s.KafkaSASLUser,
		"NOFLY_KAFKA_SASL_PASSWORD_FILE=" + s.KafkaSASLPasswordFile,
	}
}

func redisEnv(a redisconn.Access) []string {
	return []string{
		"NOFLY_REDIS_TLS=" + strconv.FormatBool(a.RedisTLS), "NOFLY_REDIS_TLS_CA=" + a.RedisTLSCA,
		"NOFLY_REDIS_TLS_CERT=" + a.RedisTLSCert, "NOFLY_REDIS_TLS_KEY=" + a.RedisTLSKey,
		"NOFLY_REDIS_USER=" + a.RedisUser, "NOFLY_REDIS_PASSWORD_FILE=" + a.RedisPasswordFile,
	}
}

const secureZones = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"SEC-ZONE","name":"secured box","category":"restricted","clear_buffer_m":0},
 "geometry":{"type":"Polygon","coordinates":[[[8.4870,47.3700],[8.4890,47.3700],[8.4890,47.3710],[8.4870,47.3710],[8.4870,47.3700]]]}}
]}`

// TestSecureEndToEnd runs the real binaries against a broker that speaks
// only SASL_SSL to them and a Redis that speaks only TLS to an ACL user:
// ingest serve (configured by flags, SASL PLAIN, no client certificate)
// takes an incursion, and alerter serve (configured by environment
// variables, SCRAM-SHA-512, client certificates to both) raises it on the
// events topic, read committed over the same security, and in its API.
// Before that, each bad setting stops a command at start with one line
// naming what failed; no output of any run holds a password.
func TestSecureEndToEnd(t *testing.T) {
	t.Parallel() // servers of its own on free ports; the step mostly waits on them
	ingest, alerter := ingestBinary(t), alerterBinary(t)
	sk := testenv.StartSecureKafka(t)
	sr := testenv.StartSecureRedis(t)
	brokers := strings.Join(sk.SecureBrokers(), ",")
	wrongKafka, wrongRedis := sk.WrongPasswordFile(t), sr.WrongPasswordFile(t)
	secrets := map[string]string{"Kafka password": sk.Password(t), "Redis password": sr.Password(t)}
	for what, f := range map[string]string{"wrong Kafka password": wrongKafka, "wrong Redis password": wrongRedis} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		secrets[what] = strings.TrimSpace(string(b))
	}
	var runs secureRuns
	t.Cleanup(func() { runs.noSecrets(t, secrets) })

	dir := t.TempDir()
	zones := filepath.Join(dir, "zones.geojson")
	if err := os.WriteFile(zones, []byte(secureZones), 0o644); err != nil {
		t.Fatal(err)
	}
	const partitions = 2
	topic, events := testenv.UniqueName("secure-telemetry"), testenv.UniqueName("secure-events")
	auditTopic := testenv.UniqueName("secure-audit")
	prefix := testenv.UniqueName("secure")
	// Least privilege: the services connect as principals of their own,
	// granted exactly the ACLs of docs/operations.md; the admin (the
	// loopback listener's super user) creates the topics, which they may
	// not.
	ingestKafka := sk.UserSecurity("nofly-ingest", kafkaconn.Plain, false)
	alerterKafka := sk.UserSecurity("nofly-alerter", kafkaconn.ScramSHA512, true)
	for _, s := range []kafkaconn.Security{ingestKafka, alerterKafka} {
		b, err := os.ReadFile(s.KafkaSASLPasswordFile)
		if err != nil {
			t.Fatal(err)
		}
		secrets["Kafka password of "+s.KafkaSASLUser] = strings.TrimSpace(string(b))
	}
	// The topics of the refusals: one ingest may only describe, one the
	// alerter may not write, one it may use but under no transactional id
	// of its own, and one nobody created.
	roTopic, roEvents, noTxnEvents := testenv.UniqueName("secure-ro"), testenv.UniqueName("secure-ro-events"), testenv.UniqueName("secure-notxn")
	missingEvents, otherGroup := testenv.UniqueName("secure-missing"), testenv.UniqueName("secure-group")
	for name, n := range map[string]int{topic: partitions, events: partitions, auditTopic: 1, roTopic: partitions, roEvents: partitions, noTxnEvents: partitions} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := testenv.EnsureTopic(ctx, sk.Brokers(), name, n)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	acls := testenv.DocACLs(t, map[string]string{"telemetry.positions": topic, "alerts.events": events, "audit.events": auditTopic, "nofly-alerter": prefix})
	allow := func(principal string, rt kafka.ResourceType, name string, ops ...kafka.ACLOperationType) {
		for _, op := range ops {
			acls = append(acls, kafka.ACLEntry{ResourceType: rt, ResourceName: name, ResourcePatternType: kafka.PatternTypeLiteral,
				Principal: principal, Host: "*", Operation: op, PermissionType: kafka.ACLPermissionTypeAllow})
		}
	}
	allow("User:nofly-ingest", kafka.ResourceTypeTopic, roTopic, kafka.ACLOperationTypeDescribe)
	allow("User:nofly-alerter", kafka.ResourceTypeTopic, roEvents, kafka.ACLOperationTypeDescribe, kafka.ACLOperationTypeRead)
	allow("User:nofly-alerter", kafka.ResourceTypeTopic, noTxnEvents, kafka.ACLOperationTypeDescribe, kafka.ACLOperationTypeRead, kafka.ACLOperationTypeWrite)
	sk.GrantACLs(t, acls)
	// Redis the same way: the alerter's ACL user has exactly the line of
	// docs/operations.md; another lacks EVALSHA.
	adminRedis := sr.Client(t)
	redisUser := func(user string, drop string) redisconn.Access {
		pw := testenv.UniqueName("pw")
		_, rules := testenv.DocRedisACL(t, prefix, pw)
		args := []any{"acl", "setuser", user}
		for _, r := range rules {
			if r != drop {
				args = append(args, r)
			}
		}
		if err := adminRedis.Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s: %v", user, err)
		}
		f := filepath.Join(t.TempDir(), user+".password")
		if err := os.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		secrets["Redis password of "+user] = pw
		a := sr.Security(true)
		a.RedisUser, a.RedisPasswordFile = user, f
		return a
	}
	docUser, _ := testenv.DocRedisACL(t, prefix, "")
	noEvalsha := testenv.UniqueName("nofly-noevalsha")
	alerterRedis := redisUser(docUser, "")
	noEvalshaRedis := redisUser(noEvalsha, "+evalsha")
	ingestArgs := func(k kafkaconn.Security, port int) []string {
		return append([]string{"serve", "--brokers", brokers, "--topic", topic, "--partitions", strconv.Itoa(partitions),
			"--addr", "127.0.0.1:" + strconv.Itoa(port), "--log-level", "debug"}, kafkaFlags(k)...)
	}
	alerterArgsWith := func(port int, events, group string) []string {
		return []string{"serve", "--brokers", brokers, "--topic", topic, "--partitions", strconv.Itoa(partitions),
			"--group", group, "--redis", sr.Addr(), "--redis-prefix", prefix, "--zones", zones,
			"--events-topic", events, "--http", "127.0.0.1:" + strconv.Itoa(port), "--linger", "10ms", "--log-level", "debug"}
	}
	alerterArgs := func(port int) []string { return alerterArgsWith(port, events, prefix) }
	alerterEnv := func(k kafkaconn.Security, r redisconn.Access) []string {
		// The audit topic by variable: an alerter without the audit trail
		// ignores it.
		return append(append(kafkaEnv(k), redisEnv(r)...), "NOFLY_AUDIT_TOPIC="+auditTopic)
	}

	t.Run("refused at start", func(t *testing.T) {
		missing := filepath.Join(dir, "no-such-ca.pem")
		withKafka := func(s kafkaconn.Security, f func(*kafkaconn.Security)) kafkaconn.Security { f(&s); return s }
		withRedis := func(a redisconn.Access, f func(*redisconn.Access)) redisconn.Access { f(&a); return a }
		badKafkaPW := func(s *kafkaconn.Security) { s.KafkaSASLPasswordFile = wrongKafka }
		noKafkaCA := func(s *kafkaconn.Security) { s.KafkaTLSCA = missing }
		for _, tc := range []struct {
			name string
			bin  string
			args []string
			env  []string
			want []string // the last line says all of these
		}{
			{"ingest serve, wrong Kafka password", ingest, ingestArgs(withKafka(ingestKafka, badKafkaPW), testenv.FreePort(t)), nil,
				[]string{"ingest: ", "kafka refused the SASL credentials", "user nofly", wrongKafka}},
			{"ingest serve, missing Kafka CA file", ingest, ingestArgs(withKafka(ingestKafka, noKafkaCA), testenv.FreePort(t)), nil,
				[]string{"ingest: ", "CA file", missing}},
			{"ingest send, wrong Kafka password", ingest, append([]string{"send", "--brokers", brokers, "--topic", topic,
				"--file", writeNDJSON(t, dir)}, kafkaFlags(withKafka(ingestKafka, badKafkaPW))...), nil,
				[]string{"ingest: ", "kafka refused the SASL credentials", "user nofly", wrongKafka}},
			{"alerter serve, wrong Kafka password", alerter, alerterArgs(testenv.FreePort(t)), alerterEnv(withKafka(alerterKafka, badKafkaPW), alerterRedis),
				[]string{"alerter: ", "kafka refused the SASL credentials", "user nofly", wrongKafka}},
			{"alerter serve, missing Kafka CA file", alerter, alerterArgs(testenv.FreePort(t)), alerterEnv(withKafka(alerterKafka, noKafkaCA), alerterRedis),
				[]string{"alerter: ", "CA file", missing}},
			{"ingest serve, no WRITE on its topic", ingest, append([]string{"serve", "--brokers", brokers, "--topic", roTopic, "--partitions", strconv.Itoa(partitions),
				"--addr", "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))}, kafkaFlags(ingestKafka)...), nil,
				[]string{"ingest: ", fmt.Sprintf(`kafka principal User:nofly-ingest may not WRITE topic %q: grant it (docs/operations.md, Least privilege)`, roTopic)}},
			{"alerter serve, events topic missing", alerter, alerterArgsWith(testenv.FreePort(t), missingEvents, prefix), alerterEnv(alerterKafka, alerterRedis),
				[]string{"alerter: ", "events topic: topic " + missingEvents + " does not exist and this principal may not create it"}},
			{"alerter serve, no WRITE on the events topic", alerter, alerterArgsWith(testenv.FreePort(t), roEvents, prefix), alerterEnv(alerterKafka, alerterRedis),
				[]string{"alerter: ", fmt.Sprintf(`kafka principal User:nofly-alerter may not WRITE topic %q`, roEvents)}},
			{"alerter serve, no transactional id", alerter, alerterArgsWith(testenv.FreePort(t), noTxnEvents, prefix), alerterEnv(alerterKafka, alerterRedis),
				[]string{"alerter: ", fmt.Sprintf(`kafka principal User:nofly-alerter may not WRITE transactional id "nofly-outbox:%s:0"`, noTxnEvents)}},
			{"alerter serve, no READ on its group", alerter, alerterArgsWith(testenv.FreePort(t), events, otherGroup), alerterEnv(alerterKafka, alerterRedis),
				[]string{"alerter: ", fmt.Sprintf(`kafka principal User:nofly-alerter may not READ group %q`, otherGroup)}},
			{"alerter serve, Redis user without EVALSHA", alerter, alerterArgs(testenv.FreePort(t)), alerterEnv(alerterKafka, noEvalshaRedis),
				[]string{"alerter: ", fmt.Sprintf("redis permissions: redis user %s may not run EVALSHA on key {%s:probe}: NOPERM", noEvalsha, prefix)}},
			{"alerter serve, wrong Redis password", alerter, alerterArgs(testenv.FreePort(t)),
				alerterEnv(alerterKafka, withRedis(alerterRedis, func(a *redisconn.Access) { a.RedisPasswordFile = wrongRedis })),
				[]string{"alerter: ", "redis refused the credentials", "user nofly", wrongRedis}},
			{"alerter serve, missing Redis CA file", alerter, alerterArgs(testenv.FreePort(t)),
				alerterEnv(alerterKafka, withRedis(alerterRedis, func(a *redisconn.Access) { a.RedisTLSCA = missing })),
				[]string{"alerter: ", "CA file", missing}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				start := time.Now()
				r := runs.start(t, tc.name, tc.bin, tc.args, tc.env)
				// At start: a refusal is one round trip, not retries.
				if code := r.wait(t, 30*time.Second); code == 0 {
					t.Fatalf("exited 0; output:\n%s", r.out.String())
				}
				last := r.lastLine()
				for _, w := range tc.want {
					if !strings.Contains(last, w) {
						t.Errorf("the last line does not say %q: %s", w, last)
					}
				}
				if !strings.HasPrefix(last, tc.want[0]) {
					t.Errorf("the last line is not the command's own error line: %s", last)
				}
				t.Logf("exited %d after %v: %s", r.cmd.ProcessState.ExitCode(), time.Since(start).Round(time.Millisecond), last)
			})
		}
	})
	if t.Failed() {
		return
	}

	t.Run("incursion raised", func(t *testing.T) {
		aPort, iPort := testenv.FreePort(t), testenv.FreePort(t)
		al := runs.start(t, "alerter serve", alerter, alerterArgs(aPort), alerterEnv(alerterKafka, alerterRedis))
		in := runs.start(t, "ingest serve", ingest, ingestArgs(ingestKafka, iPort), nil)
		aURL, iURL := fmt.Sprintf("http://127.0.0.1:%d", aPort), fmt.Sprintf("http://127.0.0.1:%d", iPort)
		for _, u := range []string{iURL, aURL} {
			testenv.CheckFor(t, 90*time.Second, func() error {
				select {
				case <-in.done:
					return fmt.Errorf("ingest exited: %s", in.lastLine())
				case <-al.done:
					return fmt.Errorf("alerter exited: %s", al.lastLine())
				default:
				}
				return httpOK(u + "/readyz")
			})
		}

		ts := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
		body := fmt.Sprintf(`{"drone_id":"SEC-1","seq":1,"ts":%q,"lat":47.3705,"lon":8.4880,"alt_m":450}`+"\n", ts)
		res, err := http.Post(iURL+"/v1/telemetry", "application/x-ndjson", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /v1/telemetry: %d %s", res.StatusCode, b)
		}

		// alerts.events, read committed over SCRAM-SHA-512 with a client certificate.
		tr := sk.Conn(t, kafkaconn.ScramSHA512, true).Transport("secure-e2e")
		defer tr.CloseIdleConnections()
		rd := &committed.Reader{Addr: kafka.TCP(sk.SecureBrokers()...), Topic: events, Transport: tr}
		testenv.CheckFor(t, 90*time.Second, func() error {
			for p := range partitions {
				recs, err := rd.ReadAll(context.Background(), p)
				if err != nil {
					return err
				}
				for _, r := range recs {
					var e struct {
						Type    string `json:"type"`
						DroneID string `json:"drone_id"`
						ZoneID  string `json:"zone_id"`
					}
					if err := json.Unmarshal(r.Value, &e); err != nil {
						return fmt.Errorf("event %s: %v", r.Value, err)
					}
					if e.Type == "raised" && e.DroneID == "SEC-1" && e.ZoneID == "SEC-ZONE" {
						return nil
					}
				}
			}
			return fmt.Errorf("no raised event of SEC-1 in SEC-ZONE on %s yet", events)
		})

		// The alerter's API: its reads go to the TLS+ACL Redis.
		testenv.CheckFor(t, 30*time.Second, func() error {
			res, err := http.Get(aURL + "/v1/alarms?state=active&drone=SEC-1")
			if err != nil {
				return err
			}
			defer res.Body.Close()
			var page struct {
				Alarms []struct {
					DroneID string `json:"drone_id"`
					ZoneID  string `json:"zone_id"`
					State   string `json:"state"`
				} `json:"alarms"`
			}
			if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
				return fmt.Errorf("GET /v1/alarms: %d: %v", res.StatusCode, err)
			}
			for _, a := range page.Alarms {
				if a.DroneID == "SEC-1" && a.ZoneID == "SEC-ZONE" && a.State == "active" {
					return nil
				}
			}
			return fmt.Errorf("GET /v1/alarms: %d, no active alarm of SEC-1: %+v", res.StatusCode, page.Alarms)
		})

		in.stop(t)
		al.stop(t)
		// Every connection is secured, not only the main ones: a
		// plaintext one (an outbox tail reader, an admin client) shows as
		// errors against this broker, retried for ever.
		for _, r := range []*secRun{in, al} {
			for _, l := range strings.Split(r.out.String(), "\n") {
				if strings.Contains(l, `"level":"ERROR"`) {
					t.Errorf("%s logged an error: %s", r.name, l)
				}
			}
		}
		// What the logs say instead of a password: where it comes from.
		for _, r := range []*secRun{in, al} {
			pw := ingestKafka.KafkaSASLPasswordFile
			if r == al {
				pw = alerterKafka.KafkaSASLPasswordFile
			}
			if !strings.Contains(r.out.String(), pw) {
				t.Errorf("%s never names the Kafka password file it reads", r.name)
			}
		}
	})
}

func httpOK(url string) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, res.StatusCode, b)
	}
	return nil
}

// writeNDJSON writes one valid record for `ingest send`.
func writeNDJSON(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "one.ndjson")
	rec := fmt.Sprintf(`{"drone_id":"SEC-SEND","seq":1,"ts":%q,"lat":47.0,"lon":8.0}`+"\n", time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(p, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
