package sse

import (
	"encoding/json"
	"reflect"
	"testing"
)

// requestSeeds are request bodies of every API and the unusual spellings
// that must go to encoding/json.
var requestSeeds = []string{
	`{"model":"m","stream":true,"max_tokens":32,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hi"}]}`,
	`{"model":"claude","max_tokens":1024,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"caf\u00e9"}]}]}`,
	`{"model":"gpt","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
	`{"model":"o4","input":[{"role":"user","content":"x"}],"instructions":"Be kind.","max_output_tokens":50}`,
	`{"prompt":["a","b"],"max_tokens":null,"stream":null,"model":null,"messages":null}`,
	` {"input":[1,2,3], "x":{"y":[true,false,-1.5e3]}, "functions":[]} `,
	`{"messages":[],"max_completion_tokens":-7}`,
	`{"messages":[null,{"role":null}]}`,
	`{"Model":"m"}`,
	`{"model":"a","model":"b"}`,
	`{"max_tokens":1.5}`,
	`{"max_tokens":1e3}`,
	`{"max_tokens":123456789012345678901}`,
	`{"stream":"yes"}`,
	`{"model":5}`,
	`{"messages":{}}`,
	`{"messages":[{"role":"user","content":"a"}]} x`,
	`{"mod\u0065l":"m"}`,
	`{"model":"\xff"}`,
	"{\"model\":\"caf\xe9\",\"messages\":[{\"role\":\"\xff\",\"content\":\"\xc3\"}]}",
	`null`,
	`[1]`,
	`{"messages":[{"role":"user","role":"system"}]}`,
	`{"messages":[{"ROLE":"user"}]}`,
}

func TestParseRequest(t *testing.T) {
	fast := map[string]bool{ // the bodies the one pass reads itself
		requestSeeds[0]: true, requestSeeds[1]: true, requestSeeds[2]: true, requestSeeds[3]: true,
		requestSeeds[4]: true, requestSeeds[5]: true, requestSeeds[6]: true, requestSeeds[7]: true,
		requestSeeds[19]: true, // invalid UTF-8: decoded by encoding/json's rules, read in one pass
	}
	for _, body := range requestSeeds {
		t.Run(body, func(t *testing.T) {
			var want Request
			wantErr := json.Unmarshal([]byte(body), &want)
			got, err := ParseRequest([]byte(body))
			if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseRequest = %+v, %v; encoding/json gives %+v, %v", got, err, want, wantErr)
			}
			if _, ok := fastRequest([]byte(body)); ok != fast[body] {
				t.Fatalf("read in one pass: %v, want %v", ok, fast[body])
			}
		})
	}
	r, err := ParseRequest([]byte(requestSeeds[0]))
	if err != nil || r.Model != "m" || !r.Stream || r.MaxOutput("max_tokens") != 32 || len(r.Messages) != 2 ||
		r.Messages[1].Role != "user" || string(r.Messages[1].Content) != `"Hi"` {
		t.Fatalf("ParseRequest = %+v, %v", r, err)
	}
}

// FuzzParseRequest checks the one pass against encoding/json: whenever it
// answers, encoding/json decodes the body without error to the same
// Request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := fastRequest(body)
		if !ok {
			return
		}
		var want Request
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("fastRequest(%q) = %+v, but encoding/json fails: %v", body, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fastRequest(%q) = %+v, encoding/json says %+v", body, got, want)
		}
	})
}
