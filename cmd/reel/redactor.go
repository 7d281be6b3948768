package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/redact"
)

// redactorFlags are the redaction policy and key flags that reel record and
// reel redact share; openRedactor turns them into a Redactor.
type redactorFlags struct {
	policy, keyFile string
}

func (f *redactorFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "redaction policy file, YAML or JSON (default: the built-in policy)")
	fs.StringVar(&f.keyFile, "redact-key-file", "", "file holding the dataset's redaction key (else $REEL_REDACT_KEY, else a random key)")
}

// openRedactor builds the redactor of command (the name in its messages):
// the policy from --policy or the built-in one, the key from
// --redact-key-file, else $REEL_REDACT_KEY, else a random key with a
// warning on stderr. This is the only place reel reads the key; the redact
// package is given its bytes.
func (f *redactorFlags) openRedactor(command string, stderr io.Writer) (*redact.Redactor, error) {
	policy := redact.DefaultPolicy()
	if f.policy != "" {
		p, err := redact.LoadPolicy(f.policy)
		if err != nil {
			return nil, fmt.Errorf("load redaction policy: %w", err)
		}
		policy = p
	}
	key, err := f.key(command, stderr)
	if err != nil {
		return nil, err
	}
	r, err := redact.New(policy, key)
	if err != nil {
		return nil, fmt.Errorf("redactor: %w", err)
	}
	return r, nil
}

// key reads the redaction key (see openRedactor).
func (f *redactorFlags) key(command string, stderr io.Writer) ([]byte, error) {
	switch {
	case f.keyFile != "":
		text, err := os.ReadFile(f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("read redaction key: %w", err)
		}
		key, err := redact.ParseKey(text)
		if err != nil {
			return nil, fmt.Errorf("redaction key %s: %w", f.keyFile, err)
		}
		return key, nil
	case os.Getenv("REEL_REDACT_KEY") != "":
		key, err := redact.ParseKey([]byte(os.Getenv("REEL_REDACT_KEY")))
		if err != nil {
			return nil, fmt.Errorf("redaction key $REEL_REDACT_KEY: %w", err)
		}
		return key, nil
	}
	key, err := redact.NewRandomKey()
	if err != nil {
		return nil, fmt.Errorf("generate redaction key: %w", err)
	}
	fmt.Fprintf(stderr, "reel %s: WARNING: %s\n", command, strings.TrimPrefix(redact.RandomKeyWarning, "warning: "))
	return key, nil
}
