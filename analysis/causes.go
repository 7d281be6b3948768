package analysis

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/reelkit/reel/formats"
)

// maxCauses bounds the distinct causes a Causes keeps; later new causes
// count under "(other)".
const maxCauses = 64

// Cause is one reason requests failed: a status class with, for HTTP
// errors, the status code, and for transport errors the error's shape
// (numbers and addresses blanked), counted, with the first message seen.
type Cause struct {
	Name    string `json:"name"`    // "HTTP 500", "connection: read response: …", "(other)"
	Class   string `json:"class"`   // status class (see the Class* constants)
	Count   int64  `json:"count"`   // failed requests with this cause
	Example string `json:"example"` // one error message (or status line) of it
}

// Causes tallies failed requests by cause in bounded memory, so a run that
// measured nothing can say why. The zero value is ready to use; it is not
// safe for concurrent use.
type Causes struct {
	byName map[string]*Cause
	failed int64
}

// AddResult counts r when it failed (not a 2xx/3xx response).
func (c *Causes) AddResult(r *formats.Result) {
	class := classify(r.Status, r.Error, true)
	if isOK(class) {
		return
	}
	c.failed++
	name, example := "HTTP "+strconv.Itoa(int(r.Status)), "status "+strconv.Itoa(int(r.Status))
	switch {
	case r.Error != "":
		name, example = class+": "+errorShape(r.Error), r.Error
	case r.Status == 0:
		name, example = class, "no response"
	}
	if c.byName == nil {
		c.byName = map[string]*Cause{}
	}
	k, ok := c.byName[name]
	if !ok {
		if len(c.byName) >= maxCauses {
			name = "(other)"
			if k, ok = c.byName[name]; !ok {
				k = &Cause{Name: name, Class: "mixed", Example: example}
				c.byName[name] = k
			}
		} else {
			k = &Cause{Name: name, Class: class, Example: example}
			c.byName[name] = k
		}
	}
	k.Count++
}

// Failed is the number of failed requests counted.
func (c *Causes) Failed() int64 { return c.failed }

// Top returns the n most frequent causes, most frequent first (ties by name).
func (c *Causes) Top(n int) []Cause {
	out := make([]Cause, 0, len(c.byName))
	for _, k := range c.byName {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// String is "connection 30 (e.g. "…"), HTTP 500 2 (e.g. "status 500")" for
// the top three causes.
func (c *Causes) String() string {
	var parts []string
	for _, k := range c.Top(3) {
		parts = append(parts, fmt.Sprintf("%s ×%d (e.g. %q)", k.Name, k.Count, k.Example))
	}
	return strings.Join(parts, "; ")
}

// errorShape blanks what varies between errors of one cause — numbers
// (ports, addresses, sizes) — and keeps at most 80 bytes, so that
// "connect 127.0.0.1:40123: refused" and "…:40124: refused" are one cause.
func errorShape(s string) string {
	var b strings.Builder
	digits := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
		if b.Len() >= 80 {
			b.WriteString("…")
			break
		}
	}
	return b.String()
}

// Clone returns an independent copy of the tally.
func (c *Causes) Clone() Causes {
	out := Causes{failed: c.failed, byName: make(map[string]*Cause, len(c.byName))}
	for k, v := range c.byName {
		cp := *v
		out.byName[k] = &cp
	}
	return out
}
