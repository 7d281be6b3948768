package redact

// Many strings pass the shared needsScan pre-filter without holding
// anything detectable (header values: dates, ids, versions, rate-limit
// figures), and then every detector's regexp would run over them. Before
// the regexps, detectAll takes a few features of the string in one pass and
// runs only the detectors whose regexp could match a string with those
// features; the conditions are necessary ones for each regexp, so the
// result is exactly that of running them all (FuzzPrefilter checks this).

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

func scanFeatures(s string) features {
	var f features
	run, sep := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
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
		case '.':
			f.dots++
		case '-':
			f.pem = f.pem || hasPrefixAt(s, i, "-----BEGIN")
		case 'e':
			f.jwt = f.jwt || hasPrefixAt(s, i, "eyJ")
		case 's':
			f.skKey = f.skKey || hasPrefixAt(s, i, "sk-")
		case 'y':
			f.gcpToken = f.gcpToken || hasPrefixAt(s, i, "ya29.")
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
		}
	}
	return f
}

// mayMatch reports whether detector typ's regexp can match a string with
// features f. Detectors it does not know always run.
func (f *features) mayMatch(typ string) bool {
	switch typ {
	case EntityPrivateKey:
		return f.pem
	case EntityJWT:
		return f.jwt
	case EntityBearer:
		return f.bearer
	case EntityAnthropic, EntityOpenAIKey:
		return f.skKey
	case EntityAWSKey:
		return f.awsKey
	case EntityAWSSecret:
		return f.awsSecret
	case EntityGCPKey:
		return f.gcpKey
	case EntityGCPToken:
		return f.gcpToken
	case EntityEmail:
		return f.at
	case EntityIBAN:
		return f.ibanStart
	case EntityCNID:
		return f.digitRun >= 17
	case EntityCard:
		return f.sepRun >= 13
	case EntitySSN:
		return f.sepRun >= 9
	case EntityPhone:
		return f.plus && f.digits >= 7
	case EntityCNMobile:
		return f.sepRun >= 11
	case EntityIPv6:
		return f.colons >= 2
	case EntityIPv4:
		return f.dots >= 3 && f.digits >= 4
	}
	return true
}
