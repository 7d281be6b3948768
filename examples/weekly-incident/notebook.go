package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reelkit/reel/analysis"
)

// notebook prints the story the way an on-call engineer writes it down:
// numbered steps, what was done, what was found, and the command that does
// the same by hand.
type notebook struct {
	w     io.Writer
	step  int
	start time.Time
}

func (n *notebook) title(format string, args ...any) {
	fmt.Fprintf(n.w, format+"\n", args...)
}

// section starts step n+1.
func (n *notebook) section(title string) {
	n.step++
	fmt.Fprintf(n.w, "\n[%d] %s  (t+%s)\n", n.step, title, time.Since(n.start).Round(time.Second))
}

// say prints an indented finding or remark.
func (n *notebook) say(format string, args ...any) {
	fmt.Fprintf(n.w, "    "+format+"\n", args...)
}

// cmd prints the by-hand equivalent, one shell line per argument.
func (n *notebook) cmd(lines ...string) {
	for i, l := range lines {
		prefix := "    $ "
		if i > 0 {
			prefix = "      "
		}
		fmt.Fprintln(n.w, prefix+l)
	}
}

// clock formats a wall-clock time as the frames are named.
func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

// rfc formats a time for --from/--to.
func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func dur(d time.Duration) string { return analysis.FormatDuration(d) }

// bar draws v against full as up to width block characters.
func bar(v, full time.Duration, width int) string {
	if full <= 0 || v <= 0 {
		return ""
	}
	eighths := int(float64(v) / float64(full) * float64(width*8))
	eighths = max(1, min(eighths, width*8))
	blocks := []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	return strings.Repeat("█", eighths/8) + blocks[eighths%8]
}
