package redact_test

import (
	"fmt"
	"os"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
)

func Example() {
	// The key comes from the caller (cmd/reel reads REEL_REDACT_KEY or a key
	// file); the library never reads the environment.
	r, err := redact.New(redact.DefaultPolicy(), []byte("example-dataset-key-0123456789"))
	if err != nil {
		fmt.Println(err)
		return
	}
	x := &formats.Exchange{
		Method:         "POST",
		Path:           "/v1/chat/completions",
		ReqHeaders:     map[string]string{"Authorization": "Bearer sk-proj-abcdefghijklmnopqrstuvwx", "Content-Type": "application/json"},
		ReqContentType: "application/json",
		ReqBody:        []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hello, I am Jane."}],"max_tokens":64}`),
	}
	r.RedactExchange(x)
	fmt.Println(x.ReqHeaders["Authorization"])
	fmt.Println(string(x.ReqBody[:40]))
	fmt.Println(len(x.ReqBody) == int(x.ReqBodyBytes), len(x.PrefixHashes), x.RedactErr == "")
	// Output:
	// <redacted len=39>
	// {"model":"gpt-4o","messages":[{"role":"u
	// true 1 true
}

func ExampleRedactor_Explain() {
	r, _ := redact.New(nil, []byte("example-dataset-key-0123456789"))
	body := []byte(`{"model":"gpt-4o","stop":["jane@example.com"]}`)
	b, expl, _ := r.Explain("application/json", body, false)
	for _, e := range expl {
		fmt.Printf("%s: %s\n", e.Field, e.Action)
	}
	_ = redact.WriteExplanation(os.Stdout, b, nil)
	// Output:
	// model: keep
	// stop[0]: detect
	// prefix_hashes: 0 blocks []
	// topic: ""
}

func ExampleLoadPolicy() {
	dir, _ := os.MkdirTemp("", "policy")
	defer os.RemoveAll(dir)
	path := dir + "/policy.yaml"
	os.WriteFile(path, []byte(`
version: 1
json:
  keep: [metadata.tier]     # also keep this field verbatim
  unkeep: [stop]            # stop sequences become synthetic text
headers:
  keep: [x-tenant]
  credentials: [x-internal-token]
binary: drop
topics:
  - name: billing
    keywords: [invoice, refund, 发票]
`), 0o600)
	p, err := redact.LoadPolicy(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Binary, p.Topics[len(p.Topics)-1].Name)
	// Output: drop billing
}
