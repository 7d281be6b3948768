package redact

import "strings"

// Many strings pass the shared needsScan pre-filter without holding
// anything detectable (header values: dates, ids, versions, rate-limit
// figures), and then every detector's regexp would run over them. Before
// the regexps, detectAll takes a few features of the string in one pass and
// runs only the detectors whose regexp could match a string with those
// features (each detector's may, beside its regexp in detect.go); the
// conditions are necessary ones for each regexp, so the result is exactly
// that of running them all (FuzzPrefilter checks this).

// features are the cheap facts about a string that the detectors' regexps
// need before they can match.
type features struct {
	at, plus     bool // '@', '+'
	colons, dots int
	digits       int
	digitRun     int  // longest run of consecutive digits
	sepRun       int  // most digits in a run where one ' ' or '-' may separate two digits
	pem          bool // "-----BEGIN"
	jwt          bool // "eyJ"
	bearer       bool // "bearer", any case
	skKey        bool // "sk-"
	awsKey       bool // an AWS access key id prefix
	awsSecret    bool // "aws", any case
	gcpKey       bool // "AIza"
	gcpToken     bool // "ya29."
	ibanStart    bool // two capital letters followed by two digits
	scheme       bool // "://"
	doubleColon  bool // "::"
	nanpEnd      bool // three digits, '-' or '.', four digits: how a North American number ends
	password     bool // "passw" or "pwd", any case
	github       bool // "gh?_" or "github_pat_"
	gitlab       bool // a GitLab token prefix
	slack        bool // "xox", "xapp-" or "hooks.slack.com/"
	stripe       bool // "sk_", "rk_" or "whsec_"
	huggingFace  bool // "hf_" or "api_org_"
	sendGrid     bool // "SG."
	base64       bool // a run that may be base64 (base64Run)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func lowerByte(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}

// hasFold reports whether s[i:] starts with the lower-case ASCII word w, in
// any case.
func hasFold(s string, i int, w string) bool {
	if len(s)-i < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		if lowerByte(s[i+j]) != w[j] {
			return false
		}
	}
	return true
}

func hasPrefixAt(s string, i int, w string) bool {
	return len(s)-i >= len(w) && s[i:i+len(w)] == w
}

// digitsAround reports whether s[i] has three digits before it and four
// after it.
func digitsAround(s string, i int) bool {
	if i < 3 || i+4 >= len(s) {
		return false
	}
	for _, j := range [...]int{i - 3, i - 2, i - 1, i + 1, i + 2, i + 3, i + 4} {
		if !isDigit(s[j]) {
			return false
		}
	}
	return true
}

func scanFeatures(s string) features {
	var f features
	var b64 base64Run
	run, sep := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		f.base64 = b64.add(c) || f.base64
		if isDigit(c) {
			f.digits++
			run++
			if i > 0 && isDigit(s[i-1]) || i > 1 && (s[i-1] == ' ' || s[i-1] == '-') && isDigit(s[i-2]) {
				sep++
			} else {
				sep = 1
			}
			f.digitRun, f.sepRun = max(f.digitRun, run), max(f.sepRun, sep)
			if i >= 3 && isDigit(s[i-1]) && isUpper(s[i-2]) && isUpper(s[i-3]) {
				f.ibanStart = true
			}
			continue
		}
		run = 0
		if c != ' ' && c != '-' {
			sep = 0
		}
		switch c {
		case '@':
			f.at = true
		case '+':
			f.plus = true
		case ':':
			f.colons++
			f.scheme = f.scheme || hasPrefixAt(s, i, "://")
			f.doubleColon = f.doubleColon || hasPrefixAt(s, i, "::")
		case '.':
			f.dots++
			f.nanpEnd = f.nanpEnd || digitsAround(s, i)
		case '-':
			f.pem = f.pem || hasPrefixAt(s, i, "-----BEGIN")
			f.nanpEnd = f.nanpEnd || digitsAround(s, i)
		case 'e':
			f.jwt = f.jwt || hasPrefixAt(s, i, "eyJ")
		case 's':
			f.skKey = f.skKey || hasPrefixAt(s, i, "sk-")
			f.stripe = f.stripe || hasPrefixAt(s, i, "sk_")
		case 'r':
			f.stripe = f.stripe || hasPrefixAt(s, i, "rk_")
		case 'w':
			f.stripe = f.stripe || hasPrefixAt(s, i, "whsec_")
		case 'y':
			f.gcpToken = f.gcpToken || hasPrefixAt(s, i, "ya29.")
		case 'g':
			f.github = f.github || i+3 < len(s) && s[i+1] == 'h' && s[i+3] == '_' || hasPrefixAt(s, i, "github_pat_")
			f.gitlab = f.gitlab || hasPrefixAt(s, i, "gl") && strings.IndexByte(s[i:min(len(s), i+7)], '-') > 0
		case 'x':
			f.slack = f.slack || hasPrefixAt(s, i, "xox") || hasPrefixAt(s, i, "xapp-")
		case 'h':
			f.huggingFace = f.huggingFace || hasPrefixAt(s, i, "hf_")
			f.slack = f.slack || hasPrefixAt(s, i, "hooks.slack.com/")
		case 'S':
			f.sendGrid = f.sendGrid || hasPrefixAt(s, i, "SG.")
		case 'A':
			if i+3 < len(s) {
				switch s[i : i+4] {
				case "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA":
					f.awsKey = true
				case "AIza":
					f.gcpKey = true
				}
			}
		}
		switch c {
		case 'b', 'B':
			f.bearer = f.bearer || hasFold(s, i, "bearer")
		case 'a', 'A':
			f.awsSecret = f.awsSecret || hasFold(s, i, "aws")
			f.huggingFace = f.huggingFace || hasPrefixAt(s, i, "api_org_")
		case 'p', 'P':
			f.password = f.password || hasFold(s, i, "passw") || hasFold(s, i, "pwd")
		}
	}
	return f
}
