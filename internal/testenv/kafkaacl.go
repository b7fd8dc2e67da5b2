package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/nofly-dev/nofly/internal/kafkaconn"
)

// DocACLs are the kafka-acls.sh lines of docs/operations.md "Least
// privilege" (between its kafka-acls markers) as ACL entries: the secured
// test grants exactly what the operators are told to grant. rename maps a
// default name of the doc (a topic, the group, a transactional id prefix's
// topic part) to the test's; a name it does not know is kept.
func DocACLs(t testing.TB, rename map[string]string) []kafka.ACLEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- kafka-acls:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- kafka-acls:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md: no kafka-acls:begin/end block")
	}
	var acls []kafka.ACLEntry
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "kafka-acls.sh ") {
			continue
		}
		e, err := parseACLLine(line, rename)
		if err != nil {
			t.Fatalf("docs/operations.md: %v: %s", err, line)
		}
		acls = append(acls, e...)
	}
	if len(acls) == 0 {
		t.Fatal("docs/operations.md: no kafka-acls.sh line in the kafka-acls block")
	}
	return acls
}

// parseACLLine reads the options of one `kafka-acls.sh --add` line this
// project's doc uses: one principal, operations, one resource.
func parseACLLine(line string, rename map[string]string) ([]kafka.ACLEntry, error) {
	f := strings.Fields(line)
	var (
		principal string
		ops       []kafka.ACLOperationType
		rt        kafka.ResourceType
		name      string
		pattern   = kafka.PatternTypeLiteral
	)
	for i := 1; i < len(f); i++ {
		arg := func() (string, error) {
			if i+1 >= len(f) {
				return "", fmt.Errorf("%s without a value", f[i])
			}
			i++
			return f[i], nil
		}
		var v string
		var err error
		switch f[i] {
		case "--add":
		case "--bootstrap-server", "--command-config":
			_, err = arg()
		case "--allow-principal":
			principal, err = arg()
		case "--operation":
			if v, err = arg(); err == nil {
				var op kafka.ACLOperationType
				err = op.UnmarshalText([]byte(v))
				ops = append(ops, op)
			}
		case "--resource-pattern-type":
			if v, err = arg(); err == nil {
				err = pattern.UnmarshalText([]byte(v))
			}
		case "--topic", "--group", "--transactional-id":
			rt = map[string]kafka.ResourceType{"--topic": kafka.ResourceTypeTopic, "--group": kafka.ResourceTypeGroup,
				"--transactional-id": kafka.ResourceTypeTransactionalID}[f[i]]
			name, err = arg()
		default:
			return nil, fmt.Errorf("option %s not understood", f[i])
		}
		if err != nil {
			return nil, err
		}
	}
	if principal == "" || len(ops) == 0 || name == "" {
		return nil, fmt.Errorf("a principal, an operation and a resource are needed")
	}
	for from, to := range rename {
		switch {
		case name == from:
			name = to
		case rt == kafka.ResourceTypeTransactionalID && strings.Contains(name, ":"+from+":"):
			name = strings.Replace(name, ":"+from+":", ":"+to+":", 1)
		case rt == kafka.ResourceTypeTransactionalID && strings.HasSuffix(name, ":"+from):
			name = strings.TrimSuffix(name, from) + to
		}
	}
	out := make([]kafka.ACLEntry, len(ops))
	for i, op := range ops {
		out[i] = kafka.ACLEntry{ResourceType: rt, ResourceName: name, ResourcePatternType: pattern,
			Principal: principal, Host: "*", Operation: op, PermissionType: kafka.ACLPermissionTypeAllow}
	}
	return out, nil
}

// GrantACLs creates acls as the admin (the PLAINTEXT listener's super
// user) and waits until the broker applies them (KRaft: through the
// metadata log, so a moment after the answer).
func (s *SecureKafka) GrantACLs(t testing.TB, acls []kafka.ACLEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(s.Brokers()...), Transport: tr, Timeout: 15 * time.Second}
	res, err := c.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: acls})
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for i, err := range res.Errors {
		if err != nil {
			t.Fatalf("create ACL %+v: %v", acls[i], err)
		}
	}
}

// UserSecurity is Security as one of the least-privilege users of
// scripts/kafka.sh (KAFKA_SASL_USERS), with its own password file.
func (s *SecureKafka) UserSecurity(user, mechanism string, withCert bool) kafkaconn.Security {
	sec := s.Security(mechanism, withCert)
	sec.KafkaSASLUser, sec.KafkaSASLPasswordFile = user, filepath.Join(s.Dir, "kafka-"+user+".password")
	return sec
}
