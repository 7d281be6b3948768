package main

import (
	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
)

// sessionsValue is --sessions (replay, stats): off, recorded or infer.
type sessionsValue struct{ mode analysis.SessionMode }

func (v *sessionsValue) String() string { return v.mode.String() }
func (v *sessionsValue) Type() string   { return "off|recorded|infer" }
func (v *sessionsValue) Set(s string) error {
	m, err := analysis.ParseSessionMode(s)
	if err != nil {
		return err
	}
	v.mode = m
	return nil
}

// registerSessions adds --sessions with the library default.
func registerSessions(fs *pflag.FlagSet, v *sessionsValue, usage string) {
	v.mode = analysis.DefaultSessionMode
	fs.Var(v, "sessions", usage)
}
