package secretcorpus

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
)

// shape is one fake secret and how a tool's output states it.
type shape struct {
	name  string
	index int
	// fields are name = value pairs as a config, a record or a request
	// holds them (a key, a URL, a header), in order.
	fields []field
	// secrets are what must not leak, raw.
	secrets []string
	// prose is a sentence that holds the fields' values.
	prose string
	// bare is what a map key holds: the value alone where its shape says
	// what it is, else the value with its name.
	bare string
}

type field struct{ name, value string }

// shapeMakers are the shapes, in the corpus's order.
var shapeMakers = []struct {
	name string
	make func(*gen) shape
}{
	{"openai-project-key", func(g *gen) shape {
		return key("OPENAI_API_KEY", "sk-proj-"+g.mixed(urlsafe, 74)+"T3BlbkFJ"+g.mixed(urlsafe, 74),
			"Your new OpenAI key is %s and it replaces the old one.")
	}},
	{"anthropic-key", func(g *gen) shape {
		return key("ANTHROPIC_API_KEY", "sk-ant-api03-"+g.mixed(urlsafe, 93)+"AA",
			"Use %s for the summarizer; the previous key was revoked.")
	}},
	{"google-api-key", func(g *gen) shape {
		return key("GOOGLE_API_KEY", "AIza"+g.mixed(urlsafe, 35), "The Maps integration uses %s since Monday.")
	}},
	{"stripe-secret-key", func(g *gen) shape {
		return key("STRIPE_SECRET_KEY", "sk_live_"+g.mixed(alnum, 99), "Webhook signing failed with %s in the header.")
	}},
	{"github-pat", func(g *gen) shape {
		return key("GITHUB_TOKEN", "ghp_"+g.mixed(alnum, 36), "The CI job cloned the repo with %s and pushed a tag.")
	}},
	{"github-fine-grained-pat", func(g *gen) shape {
		return key("GH_FINE_GRAINED_TOKEN", "github_pat_"+g.mixed(alnum, 22)+"_"+g.mixed(alnum, 59),
			"Token %s expires in 30 days.")
	}},
	{"gitlab-pat", func(g *gen) shape {
		return key("GITLAB_TOKEN", "glpat-"+g.mixed(urlsafe, 20), "Runner registered using %s for group infra.")
	}},
	{"slack-bot-token", func(g *gen) shape {
		return key("SLACK_BOT_TOKEN", "xoxb-"+g.str(digits, 12)+"-"+g.str(digits, 13)+"-"+g.mixed(alnum, 24),
			"The bot posts to #ops with %s.")
	}},
	{"sendgrid-key", func(g *gen) shape {
		return key("SENDGRID_API_KEY", "SG."+g.mixed(urlsafe, 22)+"."+g.mixed(urlsafe, 43),
			"Mail is sent through %s (account ops@example.com).")
	}},
	{"npm-token", func(g *gen) shape {
		return key("NPM_TOKEN", "npm_"+g.mixed(alnum, 36), "Publish with %s from the release job.")
	}},
	{"jwt", func(g *gen) shape {
		jwt := b64url(`{"alg":"HS256","typ":"JWT"}`) + "." +
			b64url(fmt.Sprintf(`{"sub":"user-%s","iat":1767225600,"exp":1767229200}`, g.str(digits, 6))) + "." + g.str(urlsafe, 43)
		return key("id_token", jwt, "Session restored from %s after the redirect.")
	}},
	{"pem-private-key", func(g *gen) shape {
		var body []string
		body = append(body, "MIIEpAIBAAKCAQEA"+g.str(b64std, 48))
		for range 6 {
			body = append(body, g.str(b64std, 64))
		}
		body = append(body, g.str(b64std, 36)+"==")
		b := strings.Join(body, "\n")
		pem := "-----BEGIN RSA PRIVATE KEY-----\n" + b + "\n-----END RSA PRIVATE KEY-----\n"
		s := key("private_key", pem, "Deploy key follows:\n%s\nStore it in the vault.")
		s.secrets = []string{b}
		return s
	}},
	{"aws-key-pair", func(g *gen) shape {
		id := "AKIA" + g.str(upper32, 16)
		secret := awsSecret(g)
		return shape{
			fields:  []field{{"access_key", id}, {"secret", secret}},
			secrets: []string{id, secret},
			prose:   fmt.Sprintf("Created credentials %s / %s for the deploy user.", id, secret),
			bare:    id + ":" + secret,
		}
	}},
	{"aws-secret-assignment", func(g *gen) shape {
		secret := awsSecret(g)
		return shape{
			fields:  []field{{"aws_secret_access_key", secret}},
			secrets: []string{secret},
			prose:   fmt.Sprintf("Then set aws_secret_access_key to %s in the profile.", secret),
			bare:    "aws_secret_access_key=" + secret,
		}
	}},
	{"postgres-url-password", func(g *gen) shape {
		pw := g.mixed(alnum, 14) + "@" + g.mixed(alnum, 6) // '@' is written %40 in the URL
		u := url.URL{Scheme: "postgres", User: url.UserPassword("app", pw), Host: "db.internal.example:5432", Path: "/orders", RawQuery: "sslmode=require"}
		return urlShape("DATABASE_URL", u.String(), pw, "The migration connected to %s and applied 3 changes.")
	}},
	{"redis-url-password", func(g *gen) shape {
		pw := g.mixed(alnum, 32)
		return urlShape("REDIS_URL", "rediss://default:"+pw+"@cache.internal.example:6380/0", pw, "Cache at %s is nearly full.")
	}},
	{"mongodb-url-password", func(g *gen) shape {
		pw := g.mixed(alnum, 24)
		return urlShape("MONGODB_URI", "mongodb+srv://svc-orders:"+pw+"@cluster0.ab1cd.mongodb.example/app?retryWrites=true", pw,
			"Replica set reachable via %s.")
	}},
	{"url-query-token", func(g *gen) shape {
		v := g.mixed(urlsafe, 32)
		return urlShape("download_url", "https://files.example.com/download/report.pdf?token="+v+"&expires=1767229200", v,
			"Your export is ready: %s (valid for one hour).")
	}},
	{"url-query-key", func(g *gen) shape {
		v := g.mixed(urlsafe, 39)
		return urlShape("geocode_url", "https://maps.example.com/maps/api/geocode/json?address=Berlin&key="+v, v,
			"Geocoding request %s returned 2 results.")
	}},
	{"url-query-secret", func(g *gen) shape {
		v := g.mixed(alnum, 32)
		return urlShape("webhook_url", "https://hooks.example.com/ingest?source=crm&secret="+v+"&v=2", v,
			"Deliveries go to %s every minute.")
	}},
	{"url-query-signature", func(g *gen) shape {
		v := g.str(hexlow, 64)
		return urlShape("video_url", "https://cdn.example.com/v/clip.mp4?expires=1767229200&signature="+v, v,
			"Stream it from %s before it expires.")
	}},
	{"url-query-code", func(g *gen) shape {
		v := g.mixed(urlsafe, 40)
		return urlShape("callback_url", "https://app.example.com/oauth/callback?code="+v+"&state=af0ifjsldkj", v,
			"The browser was redirected to %s and the login finished.")
	}},
	{"url-query-access-token", func(g *gen) shape {
		v := g.mixed(alnum, 48)
		return urlShape("profile_url", "https://graph.example.com/v19.0/me?fields=id,name&access_token="+v, v,
			"Fetched the profile from %s in 120 ms.")
	}},
	{"authorization-bearer", func(g *gen) shape {
		v := g.mixed(urlsafe, 40)
		return shape{
			fields:  []field{{"Authorization", "Bearer " + v}},
			secrets: []string{v},
			prose:   fmt.Sprintf("The request carried Authorization: Bearer %s and was refused with 403.", v),
			bare:    "Bearer " + v,
		}
	}},
	{"authorization-basic", func(g *gen) shape {
		v := base64.StdEncoding.EncodeToString([]byte("deploy:" + g.mixed(alnum, 20)))
		return shape{
			fields:  []field{{"Authorization", "Basic " + v}},
			secrets: []string{v},
			prose:   fmt.Sprintf("Proxy log: GET /admin Authorization: Basic %s -> 401", v),
			bare:    "Basic " + v,
		}
	}},
	{"card-visa-grouped", func(g *gen) shape {
		c := group(g.luhnNumber("4", 16), " ", 4, 4, 4)
		return card("card", c, "Charged %s for the renewal.", c)
	}},
	{"card-mastercard-2-series", func(g *gen) shape {
		c := g.luhnNumber(fmt.Sprint(2221+g.intn(500)), 16)
		return card("card_number", c, "Refund issued to card number %s today.", "card_number "+c)
	}},
	{"card-amex", func(g *gen) shape {
		c := g.luhnNumber(pick(g, "34", "37"), 15)
		return card("amex_pan", c, "Customer paid with Amex %s; receipt sent.", "amex "+c)
	}},
	{"card-discover-dashes", func(g *gen) shape {
		c := group(g.luhnNumber("6011", 16), "-", 4, 4, 4)
		return card("cc", c, "Payment method: Discover %s (exp 04/29).", c)
	}},
}

// key is a shape whose value says what it is (a provider's key format).
func key(name, value, prose string) shape {
	return shape{fields: []field{{name, value}}, secrets: []string{value}, prose: fmt.Sprintf(prose, value), bare: value}
}

// urlShape is a URL that holds a secret (a password, a query token).
func urlShape(name, u, secret, prose string) shape {
	return shape{fields: []field{{name, u}}, secrets: []string{secret}, prose: fmt.Sprintf(prose, u), bare: u}
}

// card is a card number under a card-like name.
func card(name, number, prose, bare string) shape {
	return shape{fields: []field{{name, number}}, secrets: []string{number}, prose: fmt.Sprintf(prose, number), bare: bare}
}

// awsSecret is an AWS secret access key: 40 characters of base64's
// alphabet, with a '/' and a '+' so that every encoding changes it.
func awsSecret(g *gen) string {
	for {
		s := g.mixed(b64std, 40)
		if strings.ContainsRune(s, '/') && strings.ContainsRune(s, '+') {
			return s
		}
	}
}
