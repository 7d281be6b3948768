package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether w is an interactive terminal: live progress
// lines (\r-updated) go there, plain lines everywhere else. /dev/null is a
// character device but not a terminal; term.IsTerminal asks the tty driver.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
