package redact

import "strings"

// CleanURL returns s with the user information (user:password@) removed
// from every URL in it: "proxy:http://svc:pw@10.0.0.5:8000/v1" becomes
// "proxy:http://10.0.0.5:8000/v1". It is what a configured URL (an
// upstream, a scrape target, a replay target) goes through before it is
// printed, logged or written to file metadata; it needs no key, so it also
// serves where no Redactor exists (--raw, inspect). Text without "://" is
// returned as is.
func CleanURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			break
		}
		i += len("://")
		authority := s[i:]
		if end := strings.IndexAny(authority, "/?#\\ \t\r\n"); end >= 0 {
			authority = authority[:end]
		}
		b.WriteString(s[:i])
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			b.WriteString(authority[at+1:])
		} else {
			b.WriteString(authority)
		}
		s = s[i+len(authority):]
	}
	b.WriteString(s)
	return b.String()
}
