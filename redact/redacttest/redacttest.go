// Package redacttest holds a PII leak corpus and scanners for tests that
// must prove no original value survives redaction: seed Corpus values into
// traffic, run it through the code under test, and scan what it wrote with
// Find, AssertNoLeak or ScanDir (which also decompresses zstd frames and
// gzip files, so Parquet pages and compressed spools are searched too).
package redacttest

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Entity is one seeded value and the byte strings whose presence in output
// means it leaked.
type Entity struct {
	Type    string   // detector entity type (redact.Entity* names)
	Value   string   // the value as seeded
	Needles []string // Value plus normalized forms (digits only, no spaces, long segments)
}

// values lists every detector's entity type in several formats. Every
// checksum-bearing value is valid (Luhn, mod 97, CN ID check digit).
var values = map[string][]string{
	"email": {
		"john.smith@example.com", "Li.Wei+test@mail.company.cn", "alice_99@sub.example.org", "MARY.JONES@EXAMPLE.CO.UK",
		"opsadmin@localhost",
	},
	"phone": {
		"+14155552671", "+1 415 555 2671", "+44 20 7946 0958", "+49-30-9018-2077", "+8613911112222",
		"(650) 253-0000", "650-253-0000", "415.555.2671",
	},
	"cn_mobile": {
		"13800138000", "139 1234 5678", "186-0000-1111", "15912345678",
	},
	"credit_card": {
		"4111111111111111", "4539000000001026", "4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005", "6011000990139424", "4012 8888 8888 1881",
	},
	"iban": {
		"DE89370400440532013000", "DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "GB82 WEST 1234 5698 7654 32", "FR1420041010050500013M02606", "NL91ABNA0417164300",
	},
	"ipv4": {
		"192.168.1.20", "8.8.4.4", "203.0.113.77",
	},
	"ipv6": {
		"2001:db8:85a3::8a2e:370:7334", "fe80::1ff:fe23:4567:890a", "2001:0db8:0000:0000:0000:ff00:0042:8329",
	},
	"us_ssn": {
		"536-22-8147", "078-05-1120", "219 09 9999",
	},
	"cn_resident_id": {
		"11010519491231002X", "440301198503072614", "310104199012153480", "510107200002291232",
	},
	"jwt": {
		"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
	},
	"openai_key": {
		"sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUvWxYz", "sk-abcdefghijklmnopqrstuvwxyz012345",
	},
	"anthropic_key": {
		"sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdEFGH",
	},
	"aws_access_key": {
		"AKIAIOSFODNN7EXAMPLE", "ASIAJEXAMPLEXEG2JICE",
	},
	"aws_secret_key": {
		"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	},
	"gcp_api_key": {
		"AIzaSyB-x9Zq2Lm4Np6Rt8Vw0Yb3Df5Hj7Kl9MnQ", "AIzaSyDr0-HK3mT_Ua6pP1wqfOVb7cLxN2ie9sY",
	},
	"gcp_oauth_token": {
		"ya29.a0AfH6SMBx1234567890abcdefghij",
	},
	"bearer_token": {
		"Bearer abcdef123456.ghijklmnop", "bearer ZXhhbXBsZXRva2VuMTIz",
	},
	"github_token": {
		"ghp_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4b",
		"ghs_Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8B", "ghu_Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2M", "ghr_1a2b3c4d5e6f7g8h9i0jKLMNOPQRSTUVWXYZab",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01234",
	},
	"gitlab_token": {
		"glpat-xR7tY9uW2qZ4vB6nM8kL",
	},
	"slack_token": {
		"xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxp-2345678901-2345678901234-AbCdEf123456",
		"xoxa-2-Ab12Cd34Ef56Gh78", "xoxr-98765432101-AbCdEfGhIj",
	},
	"stripe_key": {
		"sk_live_51H8abcdefghijklmnopqrstuvwxyz0123456789ABC", "rk_live_51H8ZyXwVuTsRqPoNmLkJiHg", "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
	},
	"huggingface_token": {
		"hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
	},
	"sendgrid_key": {
		"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",
	},
	// PEM blocks without real line breaks, so that they fit in a header or
	// a path as well: flattened with spaces, with escaped "\n", and cut off
	// before the END line.
	"private_key": {
		"-----BEGIN RSA PRIVATE KEY----- MIIEowIBAAKCAQEA7bq98exampleKeyBody0123456789abcd -----END RSA PRIVATE KEY-----",
		`-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIB\n-----END PRIVATE KEY-----`,
		"-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz",
	},
	"url_password": {
		"postgres://admin:hunter2pw@db.internal:5432/app", "https://svcuser:s3cr3tP4ss@gateway.example.com/v1",
		"redis://:r3d1sPassw0rd@cache:6379/0",
	},
	"password": {
		"host=db user=app password=Tr0ub4dor3x dbname=app",
	},
	// base64 of text holding a secret, in a field otherwise kept verbatim.
	"base64": {
		"Y29udGFjdCBqb2huLnNtaXRoQGV4YW1wbGUuY29tIG9yIHNrLWFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1",
	},
}

// Corpus returns every seeded entity, in a stable order.
func Corpus() []Entity {
	types := []string{"email", "phone", "cn_mobile", "credit_card", "iban", "ipv4", "ipv6", "us_ssn",
		"cn_resident_id", "jwt", "openai_key", "anthropic_key", "aws_access_key", "aws_secret_key",
		"gcp_api_key", "gcp_oauth_token", "bearer_token", "github_token", "gitlab_token", "slack_token",
		"stripe_key", "huggingface_token", "sendgrid_key", "private_key", "url_password", "password", "base64"}
	var out []Entity
	for _, t := range types {
		for _, v := range values[t] {
			out = append(out, Entity{Type: t, Value: v, Needles: needles(t, v)})
		}
	}
	return out
}

// Values returns the seeded values of one entity type.
func Values(typ string) []string { return append([]string(nil), values[typ]...) }

// needles derives the strings to search for: the value, its compact form
// (no spaces or dashes) for numbers, the secret part of key=value shapes,
// and each long segment of tokens.
func needles(typ, v string) []string {
	n := []string{v}
	switch typ {
	case "phone", "cn_mobile", "credit_card", "iban", "us_ssn":
		c := strings.NewReplacer(" ", "", "-", "").Replace(v)
		if c != v {
			n = append(n, c)
		}
		if d := digitsOnly(v); typ == "phone" && d != c {
			n = append(n, d)
		}
	case "aws_secret_key":
		n = append(n, v[strings.LastIndexByte(v, ' ')+1:])
	case "jwt":
		for _, seg := range strings.Split(v, ".") {
			if len(seg) >= 16 {
				n = append(n, seg)
			}
		}
	case "bearer_token":
		n = append(n, v[strings.IndexByte(v, ' ')+1:])
	case "private_key":
		for _, seg := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '\\' }) {
			if len(seg) >= 16 && !strings.Contains(seg, "-----") {
				n = append(n, strings.TrimPrefix(seg, "n"))
			}
		}
	case "url_password":
		userinfo := v[strings.Index(v, "://")+3 : strings.LastIndexByte(v, '@')]
		n = append(n, userinfo[strings.IndexByte(userinfo, ':')+1:])
	case "password":
		n = append(n, "Tr0ub4dor3x")
	}
	return n
}

func digitsOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Glued returns v as it is found glued to neighbouring text: after and
// before '_' for every type ("card_4539…", "AKIA…_prod", "tok_sk-proj-…"),
// and between letters too for types whose format holds no letters (cards,
// phones, IDs, IP addresses), as in "user4539…x".
func Glued(e Entity) []string {
	out := []string{"tok_" + e.Value, e.Value + "_prod", "fn_" + e.Value + "_x"}
	switch e.Type {
	case "phone", "cn_mobile", "credit_card", "us_ssn", "cn_resident_id", "ipv4":
		out = append(out, "user"+e.Value+"x")
	}
	return out
}

// Leak is an original value found in output.
type Leak struct {
	Type, Value, Needle, Where string // the corpus entity's type and value, the needle found, and where (Find's where)
}

// Find reports every corpus needle present in data; where names data.
func Find(data []byte, where string) []Leak {
	var leaks []Leak
	for _, e := range Corpus() {
		for _, nd := range e.Needles {
			if bytes.Contains(data, []byte(nd)) {
				leaks = append(leaks, Leak{Type: e.Type, Value: e.Value, Needle: nd, Where: where})
				break
			}
		}
	}
	return leaks
}

// AssertNoLeak fails tb for every corpus value found in data.
func AssertNoLeak(tb testing.TB, where string, data []byte) {
	tb.Helper()
	for _, l := range Find(data, where) {
		tb.Errorf("leak in %s: %s %q (found %q)", l.Where, l.Type, l.Value, l.Needle)
	}
}

// ScanDir scans every regular file under dir: its raw bytes and every zstd
// frame and gzip stream found inside it, decompressed, two levels deep (a
// gzip request body inside a zstd Parquet page is searched too). It returns
// the leaks and how many bytes it searched.
func ScanDir(tb testing.TB, dir string) (leaks []Leak, scanned int64) {
	tb.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, part := range Expand(data) {
			where := path
			if i > 0 {
				where += " (decompressed stream)"
			}
			leaks = append(leaks, Find(part, where)...)
			scanned += int64(len(part))
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("scan %s: %v", dir, err)
	}
	return leaks, scanned
}

// Expand returns data followed by every zstd frame and gzip stream that
// starts anywhere inside it, decompressed, and what those hold in turn (two
// levels). Decoding stops at the first error; partial output is kept.
func Expand(data []byte) [][]byte {
	out := [][]byte{data}
	level := [][]byte{data}
	for range 2 {
		var next [][]byte
		for _, b := range level {
			next = append(next, streams(b)...)
		}
		out = append(out, next...)
		level = next
	}
	return out
}

const maxExpand = 1 << 28

func streams(data []byte) [][]byte {
	var found [][]byte
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxExpand), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil
	}
	defer dec.Close()
	zstdMagic := []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic := []byte{0x1f, 0x8b, 0x08}
	for off := 0; off < len(data); {
		kz := bytes.Index(data[off:], zstdMagic)
		kg := bytes.Index(data[off:], gzipMagic)
		if kz < 0 && kg < 0 {
			break
		}
		var plain []byte
		start := 0
		if kg < 0 || kz >= 0 && kz < kg {
			start = off + kz
			if dec.Reset(bytes.NewReader(data[start:])) == nil {
				plain, _ = io.ReadAll(io.LimitReader(dec, maxExpand))
			}
		} else {
			start = off + kg
			if zr, err := gzip.NewReader(bytes.NewReader(data[start:])); err == nil {
				plain, _ = io.ReadAll(io.LimitReader(zr, maxExpand))
			}
		}
		if len(plain) > 0 {
			found = append(found, plain)
		}
		off = start + 3
	}
	return found
}
