package testenv

import "testing"

func TestTopicSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"TestX", "TestX"},
		{"TestX/batch=100", "TestX.batch_100"},
		{"TestX/a b:c", "TestX.a_b_c"},
	}
	for _, tc := range tests {
		if got := topicSafe(tc.in); got != tc.want {
			t.Errorf("topicSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
