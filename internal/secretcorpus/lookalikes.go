package secretcorpus

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// LookAlike is a text that holds no secret but looks like one to a
// careless rule: random, long, hex or base64, or a number that passes Luhn.
type LookAlike struct {
	// Kind names what it is ("uuid", "imei", "luhn-internal-id", …).
	Kind string
	// Text is the string a tool returns.
	Text string
}

var lookAlikes = sync.OnceValue(buildLookAlikes)

// LookAlikes returns the look-alikes, more than a thousand, the same on
// every call and each once: UUIDs, hashes and digests, git SHAs, IMEIs, parcel tracking
// numbers, order and internal ids (many that pass Luhn and start like a
// card), base64 of prose and of binary data, timestamps, and the words
// and URLs that sit near secrets (a token's type, a URL with no password,
// a masked or templated password, query parameters that hold no token).
// Each is alone or with the label a tool's output gives it.
func LookAlikes() []LookAlike { return slices.Clone(lookAlikes()) }

// lookAlikeKinds makes n look-alikes of each kind.
var lookAlikeKinds = []struct {
	kind string
	n    int
	make func(g *gen, i int) string
}{
	{"uuid", 80, func(g *gen, i int) string {
		return label(i, uuid(g), "request_id", `{"id":"%s"}`, "trace %s", "%s")
	}},
	{"md5", 40, func(g *gen, i int) string { return label(i, g.str(hexlow, 32), "md5", "checksum: %s", "%s") }},
	{"sha1", 40, func(g *gen, i int) string { return label(i, g.str(hexlow, 40), "sha1", "fingerprint %s", "%s") }},
	{"sha256", 60, func(g *gen, i int) string {
		return label(i, g.str(hexlow, 64), "sha256", "image digest sha256:%s", "%s", `{"etag":"%s"}`)
	}},
	{"sha512-integrity", 20, func(g *gen, i int) string {
		return `"integrity": "sha512-` + base64.StdEncoding.EncodeToString([]byte(g.str(hexlow+alnum, 64))) + `"`
	}},
	{"git-sha", 80, func(g *gen, i int) string {
		return label(i, g.str(hexlow, 40), "commit", "Merge %s into main", "HEAD is now at %s", "%s")
	}},
	{"git-short-sha", 30, func(g *gen, i int) string {
		return label(i, g.str(hexlow, 7+g.intn(6)), "commit", "fixed in %s (release 2.4)", "%s")
	}},
	{"imei", 80, func(g *gen, i int) string {
		n := g.luhnNumber(pick(g, "35", "86", "01", "99", "35"+g.str(digits, 2)), 15)
		return label(i, n, "imei", "IMEI %s", "device %s registered", "%s", group(n, " ", 2, 6, 6))
	}},
	{"imeisv", 30, func(g *gen, i int) string {
		return label(i, g.luhnNumber(pick(g, "35", "86", "3528", "3589"), 16), "imeisv", "IMEISV: %s", "%s")
	}},
	{"tracking-ups", 30, func(g *gen, i int) string {
		return label(i, "1Z"+g.str(upper32[:26]+digits, 16), "tracking_number", "UPS tracking %s", "%s")
	}},
	{"tracking-fedex", 40, func(g *gen, i int) string {
		n := pick(g, g.luhnNumber(pick(g, "37", "34", "4", "5", "6"), 15), g.str(digits, 12), g.luhnNumber("7", 12))
		return label(i, n, "tracking_number", "FedEx shipment %s is out for delivery", "tracking: %s", "%s")
	}},
	{"tracking-usps", 30, func(g *gen, i int) string {
		n := pick(g, "9400", "9205", "9361", "9270") + g.str(digits, 18)
		return label(i, n, "tracking", "USPS %s", group(n, " ", 4, 4, 4, 4, 4), "%s")
	}},
	{"tracking-dhl", 20, func(g *gen, i int) string {
		return label(i, g.str(digits, 10), "awb", "DHL waybill %s", "%s")
	}},
	{"order-id", 60, func(g *gen, i int) string {
		return pick(g,
			fmt.Sprintf("order ORD-2026-%06d shipped", g.intn(1e6)),
			fmt.Sprintf(`{"order_id":"%03d-%07d-%07d"}`, g.intn(1000), g.intn(1e7), g.intn(1e7)),
			fmt.Sprintf("Order #%d confirmed", 1000+g.intn(9e5)),
			fmt.Sprintf(`{"order_number": %s}`, g.nonLuhnNumber(pick(g, "4", "5", "37"), 16)),
			fmt.Sprintf("invoice INV-%d-%05d", 2020+g.intn(7), g.intn(1e5)),
		)
	}},
	{"luhn-internal-id", 120, func(g *gen, i int) string {
		// Numbers of a card's length and IIN that pass Luhn, without a
		// card's context: ids, accounts, references.
		n := g.luhnNumber(pick(g, "4", "51", "55", "2221", "34", "37", "6011", "65", "3530", "62"), pick(g, 13, 15, 16, 16, 19))
		return label(i, n, "id", `{"customer_id": %s}`, "account %s reconciled", "ref %s", `{"order_number":"%s"}`, "%s", "user %s logged in")
	}},
	{"ean-isbn", 40, func(g *gen, i int) string {
		return label(i, g.luhnNumber(pick(g, "40", "50", "978", "979", "54"), 13), "ean", "ISBN %s", "barcode %s", "%s")
	}},
	{"base64-prose", 100, func(g *gen, i int) string {
		p := prose[i%len(prose)]
		enc := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}[i%4]
		return label(i, enc.EncodeToString([]byte(p)), "content", "attachment (base64): %s", "%s")
	}},
	{"base64-binary", 40, func(g *gen, i int) string {
		b := make([]byte, 24+g.intn(200))
		for j := range b {
			b[j] = byte(g.intn(256))
		}
		return label(i, base64.StdEncoding.EncodeToString(b), "thumbnail", "data:image/png;base64,%s", "%s")
	}},
	{"timestamp", 100, func(g *gen, i int) string {
		t := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(g.intn(7*365*24*3600)) * time.Second).Add(time.Duration(g.intn(1e9)))
		return pick(g,
			fmt.Sprintf(`{"created_ms":%d}`, t.UnixMilli()),
			fmt.Sprintf("ts=%d", t.UnixNano()),
			fmt.Sprintf("%d", t.UnixMicro()),
			fmt.Sprintf("at %d", t.Unix()),
			t.Format(time.RFC3339Nano),
			t.Format(time.RFC1123),
			t.Format("2006-01-02 15:04:05.000000")+" INFO request served",
		)
	}},
	{"ulid-objectid-ksuid", 40, func(g *gen, i int) string {
		return pick(g,
			"01"+g.str("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24),
			`{"_id":{"$oid":"`+g.str(hexlow, 24)+`"}}`,
			"ksuid "+g.str(alnum, 27),
		)
	}},
	{"provider-object-id", 40, func(g *gen, i int) string {
		return pick(g, "ch_", "cus_", "in_", "sub_", "txn_", "prod_", "evt_") + g.str(alnum, 24)
	}},
	{"phone-iban-ip", 40, func(g *gen, i int) string {
		return pick(g,
			fmt.Sprintf("+1 415 555 %04d", g.intn(1e4)),
			"DE89 3704 0044 0532 0130 00",
			fmt.Sprintf("GB%02d NWBK 6016 1331 9268 %02d", g.intn(100), g.intn(100)),
			fmt.Sprintf("10.%d.%d.%d", g.intn(256), g.intn(256), g.intn(256)),
			fmt.Sprintf("2001:db8:%x:%x::%x", g.intn(65536), g.intn(65536), g.intn(65536)),
			fmt.Sprintf("mac %02x:%02x:%02x:%02x:%02x:%02x", g.intn(256), g.intn(256), g.intn(256), g.intn(256), g.intn(256), g.intn(256)),
		)
	}},
	{"url-no-secret", 60, func(g *gen, i int) string {
		return pick(g,
			fmt.Sprintf("https://support.example.com/api/v2/tickets.json?page=%d&per_page=50&sort=created_at", g.intn(100)),
			"https://shop.example.com/search?q=usb+c+cable&country_code=US&zip_code=94103",
			fmt.Sprintf("https://api.example.com/v1/items?key=name&order=asc&code=%d", 200+g.intn(300)),
			"https://ci.example.com/builds?token_type=bearer&signature_method=hmac-sha256",
			fmt.Sprintf("https://docs.example.com/guide#access_token-%s", g.str(lower, 6)),
			fmt.Sprintf("https://git.example.com/org/repo/commit/%s", g.str(hexlow, 40)),
			fmt.Sprintf("https://ops@git.example.com/org/repo.git#%d", g.intn(100)),
			fmt.Sprintf("https://cdn.example.com/assets/app.%s.js", g.str(hexlow, 20)),
			"https://example.com/login?code=&state=",
		)
	}},
	{"connection-url-no-password", 30, func(g *gen, i int) string {
		return pick(g,
			"postgres://app@db.internal.example:5432/orders",
			"postgres://app:${DB_PASSWORD}@db.internal.example:5432/orders",
			"mysql://root:****@localhost:3306/shop",
			"redis://:<password>@cache:6379/0",
			"amqp://guest:{{ .Password }}@mq:5672/",
			fmt.Sprintf("mongodb://svc:%%s@cluster%d.example.net/app", g.intn(9)),
			"ssh://git@github.com/org/repo.git",
		)
	}},
	{"auth-words", 40, func(g *gen, i int) string {
		return pick(g,
			`{"token_type":"Bearer","expires_in":3600}`,
			"Bearer authentication is required for this endpoint.",
			"Upgrade from the Basic plan to Pro for SSO.",
			"Authorization: Bearer <token>",
			"Authorization: Basic ${CREDENTIALS}",
			`WWW-Authenticate: Basic realm="admin", charset="UTF-8"`,
			"set the Authorization header to Bearer followed by your key",
			"The secret to a good API is consistency; the key is documentation.",
			fmt.Sprintf("password reset requested for user%d@example.com", g.intn(1000)),
			`{"api_key":"","password":null,"token":"REDACTED"}`,
		)
	}},
	{"semver-version", 20, func(g *gen, i int) string {
		return fmt.Sprintf("v%d.%d.%d-rc.%d+build.%s", g.intn(10), g.intn(30), g.intn(50), g.intn(5), g.str(hexlow, 8))
	}},
	{"prices-quantities", 20, func(g *gen, i int) string {
		return fmt.Sprintf(`{"amount":"%d.%02d","currency":"EUR","qty":%d}`, g.intn(1e5), g.intn(100), g.intn(1000))
	}},
}

// prose is what base64 of prose encodes: sentences a tool's output holds,
// some of which name keys, tokens and cards.
var prose = []string{
	"Hello, since yesterday the token refresh fails with 401 and the access key page shows an error.",
	"Please rotate the API key after the password reset; the old one stops working on Friday.",
	"Your order has shipped and will arrive in 3 to 5 business days.",
	"The card on file expires next month; update it in the billing settings.",
	"Meeting notes: migrate the secrets to the vault, then remove the env files.",
	"The quick brown fox jumps over the lazy dog.",
	"Invoice INV-2025-000123 is due on 2026-02-01; amount 129.90 EUR.",
	"Build 4821 passed: 1203 tests, 0 failures, coverage 81.4%.",
	"To sign in, open the link we emailed you and enter the code shown on screen.",
	"Dear customer, your subscription renews automatically unless cancelled.",
	"kind: ConfigMap\ndata:\n  LOG_LEVEL: info\n  REGION: eu-west-1\n",
	"SELECT id, email FROM users WHERE created_at > now() - interval '1 day';",
	`{"user":"ada","roles":["admin","billing"],"mfa":true}`,
}

// label writes v in one of several ways, the i-th of which is picked:
// a JSON member named name, or one of the formats (each with one %s).
func label(i int, v, name string, formats ...string) string {
	all := append([]string{`{"` + name + `":"%s"}`}, formats...)
	f := all[i%len(all)]
	if !strings.Contains(f, "%s") {
		return f
	}
	return fmt.Sprintf(f, v)
}

func uuid(g *gen) string {
	s := g.str(hexlow, 32)
	return s[:8] + "-" + s[8:12] + "-4" + s[13:16] + "-" + string("89ab"[g.intn(4)]) + s[17:20] + "-" + s[20:]
}

func buildLookAlikes() []LookAlike {
	g := newGen(41)
	var out []LookAlike
	seen := map[string]bool{}
	for _, k := range lookAlikeKinds {
		for i := range k.n {
			if text := k.make(g, i); !seen[text] {
				seen[text] = true
				out = append(out, LookAlike{Kind: k.kind, Text: text})
			}
		}
	}
	return out
}
