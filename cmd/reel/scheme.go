package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
)

// maxSchemeFiles bounds how many files' metadata noteRedactionSchemes reads:
// a recording is written by one redactor version per recorder run, so the
// first files tell.
const maxSchemeFiles = 256

// noteRedactionSchemes tells, once per scheme, when a dataset was redacted
// under an older synthesis scheme (reel.redaction metadata): it still
// replays, but what it keeps of prefix sharing differs.
func noteRedactionSchemes(cmd string, paths []string, stderr io.Writer) {
	files, err := formats.ListFiles(paths)
	if err != nil {
		return // the reader reports it
	}
	seen := map[string]int{}
	for i, f := range files {
		if i == maxSchemeFiles {
			break
		}
		fi, err := formats.StatFile(f)
		if err != nil {
			continue
		}
		seen[redact.SchemeOf(fi.Meta[formats.MetaRedaction])]++
	}
	schemes := make([]string, 0, len(seen))
	for s := range seen {
		schemes = append(schemes, s)
	}
	sort.Strings(schemes)
	for _, s := range schemes {
		if note := redact.SchemeNote(s); note != "" {
			fmt.Fprintf(stderr, "%s: note: %d file(s) %s\n", cmd, seen[s], note)
		}
	}
}
