package kafkaperm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/nofly-dev/nofly/internal/testenv"
)

// TestCheckWithoutAuthorizer: the project's broker runs no authorizer, so
// it reports every operation allowed and Check passes; a topic that does
// not exist is an error naming it, never a pass. (The refusals against a
// broker with the ACL authorizer are TestSecureEndToEnd's, cluster tag.)
func TestCheckWithoutAuthorizer(t *testing.T) {
	brokers := testenv.KafkaBrokers()
	topic := testenv.CreateTopic(t, brokers, 2)
	missing := testenv.UniqueName("kafkaperm-missing")
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := Conn{Brokers: brokers, Transport: tr}
	// The operations are reported, not left unknown (which Check would
	// not hold against anyone): kafka-go's Transport would answer from its
	// cache without them, hence the connection of Check's own.
	md, err := rawMetadata(context.Background(), c, &metadata.Request{TopicNames: []string{topic}, IncludeTopicAuthorizedOperations: true})
	if err != nil {
		t.Fatal(err)
	}
	if ops := md.Topics[0].TopicAuthorizedOperations; ops == unknownOps || ops&(1<<Write) == 0 {
		t.Fatalf("topic %s: authorized operations %b, want them reported, WRITE among them", topic, ops)
	}
	for _, tc := range []struct {
		name    string
		need    Need
		wantErr string // "" = allowed
	}{
		{"topic, group and transactional id", Need{
			Topics:           map[string][]Op{topic: {Describe, Read, Write}},
			Groups:           []string{testenv.UniqueName("kafkaperm-group")},
			TransactionalIDs: []string{testenv.UniqueName("kafkaperm-txn")},
		}, ""},
		{"nothing", Need{}, ""},
		{"missing topic", Need{Topics: map[string][]Op{topic: {Read}, missing: {Write}}}, "topic " + missing + ": [3] Unknown Topic Or Partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := Check(ctx, c, Principal(""), tc.need)
			t.Logf("took %v", time.Since(start).Round(time.Millisecond))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Check: %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestAllowedBits(t *testing.T) {
	const readDescribe = 1<<Read | 1<<Describe
	for _, tc := range []struct {
		name  string
		field int32
		ops   []Op
		deny  Op // 0: allowed
	}{
		{"all granted", readDescribe, []Op{Describe, Read}, 0},
		{"write missing", readDescribe, []Op{Describe, Read, Write}, Write},
		{"nothing granted", 0, []Op{Describe}, Describe},
		{"not reported", unknownOps, []Op{Write}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := allowed(tc.field, tc.ops, "User:u", `topic "t"`)
			var d *Denied
			if tc.deny == 0 {
				if err != nil {
					t.Fatalf("allowed: %v", err)
				}
				return
			}
			if !errors.As(err, &d) || d.Op != tc.deny || !IsDenied(err) {
				t.Fatalf("allowed: %v, want %v denied", err, tc.deny)
			}
			if want := `kafka principal User:u may not ` + tc.deny.String() + ` topic "t"`; !strings.Contains(err.Error(), want) {
				t.Errorf("%v does not say %q", err, want)
			}
		})
	}
}
