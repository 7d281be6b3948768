package recorder

import "testing"

func TestSessionFromBody(t *testing.T) {
	fields := []string{"conversation_id", "metadata.user_id", "user"}
	cases := []struct{ body, want string }{
		{`{"user":"u-1","messages":[]}`, "u-1"},
		{`{"user":"u-1","conversation_id":"c-9"}`, "c-9"},
		{`{"metadata":{"user_id":"a-7"},"user":"u-1"}`, "a-7"},
		{`{"metadata":{"user_id":42}}`, "42"},
		{`{"metadata":"x","user":{"id":1}}`, ""},
		{`not json`, ""},
		{`{"user":`, ""},
		{``, ""},
	}
	for _, tc := range cases {
		if got := sessionFromBody([]byte(tc.body), fields); got != tc.want {
			t.Errorf("sessionFromBody(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
	if got := sessionFromBody([]byte(`{"user":"u-1"}`), nil); got != "" {
		t.Errorf("no fields configured: %q", got)
	}
}
