package testenv

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestDocACLs: the documented kafka-acls.sh lines read as the grants the
// secured test applies, the default names renamed, one entry per operation.
func TestDocACLs(t *testing.T) {
	acls := DocACLs(t, map[string]string{"telemetry.positions": "T", "alerts.events": "E", "audit.events": "A", "nofly-alerter": "G"})
	type key struct {
		principal string
		rt        kafka.ResourceType
		name      string
		pattern   kafka.PatternType
		op        kafka.ACLOperationType
	}
	got := map[key]bool{}
	for _, a := range acls {
		if a.PermissionType != kafka.ACLPermissionTypeAllow || a.Host != "*" {
			t.Errorf("%+v: want an allow for any host", a)
		}
		got[key{a.Principal, a.ResourceType, a.ResourceName, a.ResourcePatternType, a.Operation}] = true
	}
	const ing, al = "User:nofly-ingest", "User:nofly-alerter"
	lit, pre := kafka.PatternTypeLiteral, kafka.PatternTypePrefixed
	topic, group, txn := kafka.ResourceTypeTopic, kafka.ResourceTypeGroup, kafka.ResourceTypeTransactionalID
	read, write, describe := kafka.ACLOperationTypeRead, kafka.ACLOperationTypeWrite, kafka.ACLOperationTypeDescribe
	want := []key{
		{ing, topic, "T", lit, write}, {ing, topic, "T", lit, describe},
		{al, topic, "T", lit, read}, {al, topic, "T", lit, describe},
		{al, group, "G", lit, read},
		{al, topic, "E", lit, write}, {al, topic, "E", lit, read}, {al, topic, "E", lit, describe},
		{al, topic, "A", lit, write}, {al, topic, "A", lit, read}, {al, topic, "A", lit, describe},
		{al, txn, "nofly-outbox:E:", pre, write}, {al, txn, "nofly-outbox:E:", pre, describe},
		{al, txn, "nofly-audit:A", lit, write}, {al, txn, "nofly-audit:A", lit, describe},
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("missing grant %+v", w)
		}
	}
	if len(acls) != len(want) {
		t.Errorf("%d grants, want exactly %d (no more than the services use)", len(acls), len(want))
	}
}

func TestParseACLLineRefuses(t *testing.T) {
	for _, line := range []string{
		"kafka-acls.sh --add --allow-principal User:x --operation Write",                  // no resource
		"kafka-acls.sh --add --operation Write --topic t",                                 // no principal
		"kafka-acls.sh --add --allow-principal User:x --operation Fly --topic t",          // unknown operation
		"kafka-acls.sh --add --allow-principal User:x --operation Write --topic t --deny", // an option not understood
	} {
		if _, err := parseACLLine(line, nil); err == nil {
			t.Errorf("%s: parsed", line)
		}
	}
}
