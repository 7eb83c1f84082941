package secretcorpus

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"net/url"
	"slices"
	"strings"
)

// Context names how a text holds a secret: the twelve.
type Context string

// The contexts. Those that nest an encoding alternate between its common
// variants from one shape to the next (the quote, base64's alphabet and
// padding, one or two layers of percent-encoding, a PEM armour or a MIME
// part), so that the corpus holds each variant several times.
const (
	// Plain is a sentence of prose.
	Plain Context = "plain"
	// Quoted is a config file's name = "value" lines, quoted with ", ' or `.
	Quoted Context = "quoted"
	// JSONInString is a JSON document whose member is a string that holds a
	// JSON document: the secret is closed by \".
	JSONInString Context = "json-in-string"
	// JSONTwice is a JSON document whose member holds a JSON document
	// escaped twice (\\\" around the secret); every other shape also
	// escapes '/' as \/, as PHP's json_encode does.
	JSONTwice Context = "json-escaped-twice"
	// URLQuery is a URL whose query holds the fields, each value
	// query-escaped and followed by '&'.
	URLQuery Context = "url-query"
	// PercentEncoded is a URL query-escaped into another URL's query
	// (?next=…), once or, every other shape, twice (%253D).
	PercentEncoded Context = "percent-encoded"
	// Base64 is the fields as name=value lines, base64-encoded (standard or
	// URL alphabet, padded or not), alone or after a label.
	Base64 Context = "base64"
	// XML is an XML document with an element per field.
	XML Context = "xml"
	// CSV is a header row and a data row of comma-separated cells.
	CSV Context = "csv"
	// MapKey is a string used as the key of a member of an object
	// (Where is AsMapKey).
	MapKey Context = "map-key"
	// PEMSplit is the fields' lines base64-encoded and split across line
	// breaks as a PEM body (64 columns between -----BEGIN/END----- lines)
	// or a MIME part (76 columns, CRLF) is; a private key is written with
	// its line breaks escaped (\n), as a one-line environment variable
	// holds it.
	PEMSplit Context = "pem-split"
	// ErrorMessage is the message of a tool's typed error that quotes the
	// request it failed on (Where is AsError).
	ErrorMessage Context = "error-message"
)

var contexts = []Context{Plain, Quoted, JSONInString, JSONTwice, URLQuery, PercentEncoded, Base64, XML, CSV, MapKey, PEMSplit, ErrorMessage}

// Contexts returns the contexts, in the order Cases uses.
func Contexts() []Context { return slices.Clone(contexts) }

// render puts s in ctx.
func (s shape) render(ctx Context) Case {
	c := Case{Shape: s.name, Context: ctx, Where: InValue, Secrets: slices.Clone(s.secrets)}
	var tokens []string // encoded runs that hold a secret whole (base64)
	odd := s.index%2 == 1
	switch ctx {
	case Plain:
		c.Text = s.prose
	case Quoted:
		q := []string{`"`, `'`, "`"}[s.index%3]
		var b strings.Builder
		b.WriteString("# settings\n")
		for _, f := range s.fields {
			b.WriteString(f.name + " = " + q + f.value + q + "\n")
		}
		c.Text = b.String()
	case JSONInString:
		c.Text = `{"status":"ok","body":` + jsonString(s.jsonObject()) + `}`
	case JSONTwice:
		inner := s.jsonObject()
		if odd {
			inner = strings.ReplaceAll(inner, "/", `\/`)
		}
		c.Text = `{"event":"config.sync","payload":` + jsonString(jsonString(inner)) + `}`
	case URLQuery:
		c.Text = "https://api.example.com/v1/export?format=csv&" + s.query() + "&page=2"
	case PercentEncoded:
		inner := "https://app.example.com/settings?" + s.query() + "&tab=keys"
		if odd {
			inner = "https://sso.example.com/authorize?return_to=" + url.QueryEscape(inner)
		}
		c.Text = "https://login.example.com/continue?next=" + url.QueryEscape(inner)
	case Base64:
		enc := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}[s.index%4]
		tok := enc.EncodeToString([]byte(s.env()))
		tokens = append(tokens, tok)
		c.Text = tok
		if odd {
			c.Text = "attachment settings.env (base64): " + tok
		}
	case XML:
		var b bytes.Buffer
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<config>")
		for _, f := range s.fields {
			b.WriteString("<" + f.name + ">")
			_ = xml.EscapeText(&b, []byte(f.value))
			b.WriteString("</" + f.name + ">")
		}
		b.WriteString("</config>")
		c.Text = b.String()
	case CSV:
		head, row := []string{"id"}, []string{"1042"}
		for _, f := range s.fields {
			head, row = append(head, f.name), append(row, f.value)
		}
		head, row = append(head, "created_at"), append(row, "2026-01-05T09:12:44Z")
		var b strings.Builder
		w := csv.NewWriter(&b)
		_ = w.WriteAll([][]string{head, row})
		c.Text = b.String()
	case MapKey:
		c.Text, c.Where = s.bare, AsMapKey
	case PEMSplit:
		if strings.HasPrefix(s.fields[0].value, "-----BEGIN") {
			c.Text = `PRIVATE_KEY="` + strings.ReplaceAll(s.fields[0].value, "\n", `\n`) + `"`
			break
		}
		width, nl, head, tail := 64, "\n", "-----BEGIN SETTINGS-----\n", "\n-----END SETTINGS-----\n"
		if odd {
			width, nl, head, tail = 76, "\r\n", "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n", "\r\n"
		}
		lines := wrap(base64.StdEncoding.EncodeToString([]byte(padLastLine(s.env(), width))), width)
		tokens = append(tokens, lines...)
		c.Text = head + strings.Join(lines, nl) + tail
	case ErrorMessage:
		var kv []string
		for _, f := range s.fields {
			kv = append(kv, f.name+"="+f.value)
		}
		c.Text = "sync failed: POST https://api.vendor.example/v1/sync: 401 Unauthorized: request had " + strings.Join(kv, ", ")
		c.Where = AsError
	}
	c.Forms = forms(c.Text, c.Secrets, tokens)
	return c
}

// jsonObject is the fields as a JSON object, in order.
func (s shape) jsonObject() string {
	var b strings.Builder
	b.WriteString("{")
	for i, f := range s.fields {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(jsonString(f.name) + ":" + jsonString(f.value))
	}
	b.WriteString("}")
	return b.String()
}

// query is the fields as a URL query, in order.
func (s shape) query() string {
	var kv []string
	for _, f := range s.fields {
		kv = append(kv, url.QueryEscape(f.name)+"="+url.QueryEscape(f.value))
	}
	return strings.Join(kv, "&")
}

// env is the fields as name=value lines.
func (s shape) env() string {
	var b strings.Builder
	for _, f := range s.fields {
		b.WriteString(f.name + "=" + f.value + "\n")
	}
	return b.String()
}

// jsonString is s as a JSON string, as encoding/json writes it.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// wrap cuts s into lines of width characters.
func wrap(s string, width int) []string {
	var out []string
	for len(s) > width {
		out = append(out, s[:width])
		s = s[width:]
	}
	return append(out, s)
}

// padLastLine appends a comment to text so that the last line of its
// base64, wrapped at width, is at least Fragment characters long: every
// line of the body is then a form Leak can find.
func padLastLine(text string, width int) string {
	for n := base64.StdEncoding.EncodedLen(len(text)) % width; n != 0 && n < Fragment; n = base64.StdEncoding.EncodedLen(len(text)) % width {
		text += "#"
	}
	return text
}
