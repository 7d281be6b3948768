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
	// Removing one user part can join what surrounds it into a new URL
	// ("x://a@://b:c@d"): clean until nothing changes; each pass that
	// changes anything removes bytes.
	for strings.Contains(s, "://") {
		out := cleanOnce(s)
		if out == s {
			break
		}
		s = out
	}
	return s
}

func cleanOnce(s string) string {
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
		at := strings.LastIndexByte(authority, '@')
		if at < 0 {
			s = s[i:] // the authority may end in the next URL's "://"
			continue
		}
		b.WriteString(authority[at+1:])
		s = s[i+len(authority):]
	}
	b.WriteString(s)
	return b.String()
}
