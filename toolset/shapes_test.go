package toolset_test

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// Shapes whose invopop schema OpenAI's strict mode rejects or that would
// not mean the Go type: each is either translated (formatsIn, intsIn) or
// refused at declaration (the *Refused types, in TestSchemaForRejects).

type formatsIn struct {
	At      string   `json:"at" jsonschema:"format=date-time"`
	Day     string   `json:"day" jsonschema:"format=date"`
	Clock   string   `json:"clock" jsonschema:"format=time"`
	Span    string   `json:"span" jsonschema:"format=duration"`
	Email   string   `json:"email" jsonschema:"format=email"`
	Host    string   `json:"host" jsonschema:"format=hostname"`
	V4      string   `json:"v4" jsonschema:"format=ipv4"`
	V6      string   `json:"v6" jsonschema:"format=ipv6"`
	ID      string   `json:"id" jsonschema:"format=uuid"`
	Code    string   `json:"code" jsonschema:"pattern=^[A-Z]{3}$"`
	IP      net.IP   `json:"ip"`
	IPs     []net.IP `json:"ips"`
	MaybeIP net.IP   `json:"maybe_ip,omitempty"`
	Blob    []byte   `json:"blob"`
}

type intsIn struct {
	I   int      `json:"i"`
	I8  int8     `json:"i8"`
	I16 int16    `json:"i16" jsonschema:"maximum=10"`
	I32 int32    `json:"i32"`
	I64 int64    `json:"i64"`
	U   uint     `json:"u"`
	U8  uint8    `json:"u8" jsonschema:"minimum=1"`
	U16 uint16   `json:"u16"`
	U32 uint32   `json:"u32"`
	U64 uint64   `json:"u64"`
	Qty []uint16 `json:"qty"`
	Str uint8    `json:"str,string"`
}

type (
	uriTagRefused struct {
		URL string `json:"url" jsonschema:"format=uri"`
	}
	urlRefused struct {
		URL *url.URL `json:"url,omitempty"`
	}
	otherFormatRefused struct {
		Items []struct {
			Ref string `json:"ref" jsonschema:"format=uri-reference"`
		} `json:"items"`
	}
	minLengthRefused struct {
		Name string `json:"name" jsonschema:"minLength=1"`
	}
	maxLengthRefused struct {
		Name string `json:"name" jsonschema:"maxLength=64"`
	}
	defaultRefused struct {
		Mode string `json:"mode,omitempty" jsonschema:"default=fast"`
	}
	exampleRefused struct {
		Mode string `json:"mode" jsonschema:"example=fast"`
	}
	uniqueItemsRefused struct {
		Tags []string `json:"tags" jsonschema:"uniqueItems=true"`
	}
	readOnlyRefused struct {
		ID string `json:"id" jsonschema:"readOnly=true"`
	}
	extrasRefused struct {
		Name string `json:"name" jsonschema_extras:"minLength=3"`
	}
	durationRefused struct {
		Timeout time.Duration `json:"timeout"`
	}
	nullableTagRefused struct {
		Note string `json:"note" jsonschema:"nullable"`
	}
	oneofTypeRefused struct {
		V string `json:"v" jsonschema:"oneof_type=string;integer"`
	}
	anyofTypeRefused struct {
		V string `json:"v" jsonschema:"anyof_type=string;integer"`
	}
	typeTagRefused struct {
		N int `json:"n" jsonschema:"type=string"`
	}
	// A description cut by a comma: the rest would be dropped.
	commaCutRefused struct {
		Ref string `json:"ref" jsonschema:"description=The order reference, e.g. ORDER-7."`
	}
	unknownTagRefused struct {
		N int `json:"n" jsonschema:"descripton=typo"`
	}
	uintptrRefused struct {
		P uintptr `json:"p"`
	}
)

func TestIntegerBounds(t *testing.T) {
	m := mustSchema[intsIn](t)
	bounds := map[string][2]any{ // minimum, maximum; nil when not stated
		"i":   {nil, nil},
		"i64": {nil, nil},
		"u64": {0.0, nil},
		"u":   {0.0, nil},
		"i8":  {-128.0, 127.0},
		"i16": {-32768.0, 10.0}, // the tag's narrower maximum stays
		"i32": {-2147483648.0, 2147483647.0},
		"u8":  {1.0, 255.0}, // the tag's narrower minimum stays
		"u16": {0.0, 65535.0},
		"u32": {0.0, 4294967295.0},
	}
	for name, b := range bounds {
		p := prop(t, m, name)
		if p["minimum"] != b[0] || p["maximum"] != b[1] {
			t.Errorf("%s: minimum %v maximum %v, want %v %v", name, p["minimum"], p["maximum"], b[0], b[1])
		}
	}
	if q := prop(t, m, "qty", "[]"); q["minimum"] != 0.0 || q["maximum"] != 65535.0 {
		t.Errorf("[]uint16 items: %v", q)
	}
	// ",string" makes it a JSON string: no numeric bounds on a string.
	if s := prop(t, m, "str"); s["type"] != "string" || s["minimum"] != nil {
		t.Errorf("uint8 with ,string: %v", s)
	}

	tool := readTool[intsIn]()
	valid := map[string]string{"i": "-1", "i8": "-128", "i16": "10", "i32": "0", "i64": "-5", "u": "0", "u8": "255",
		"u16": "0", "u32": "4294967295", "u64": "18446744073709551615", "qty": "[0,65535]", "str": `"7"`}
	v, err := decode(t, tool, object(valid, "", ""))
	if err != nil {
		t.Fatalf("in range: %v", err)
	}
	if in := v.(intsIn); in.U64 != 18446744073709551615 || in.U8 != 255 || in.Str != 7 {
		t.Errorf("decoded %+v", in)
	}
	for field, bad := range map[string]string{"u": "-1", "u64": "-1", "u8": "256", "i8": "-129", "i16": "11", "u32": "4294967296", "qty": "[65536]"} {
		v, err := decode(t, tool, object(valid, field, bad))
		assertInvalidArguments(t, v, err)
		if err != nil && !strings.Contains(err.Error(), "/"+field) {
			t.Errorf("%s=%s: message %q does not point at it", field, bad, err)
		}
	}
}

// object writes a JSON object of members (name to JSON text), with name's
// value replaced by value when name is not "".
func object(members map[string]string, name, value string) string {
	var parts []string
	for k, v := range members {
		if k == name {
			v = value
		}
		parts = append(parts, fmt.Sprintf("%q:%s", k, v))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func TestFormats(t *testing.T) {
	m := mustSchema[formatsIn](t)
	for name, format := range map[string]string{"at": "date-time", "day": "date", "clock": "time", "span": "duration",
		"email": "email", "host": "hostname", "v4": "ipv4", "v6": "ipv6", "id": "uuid"} {
		if got := prop(t, m, name)["format"]; got != format {
			t.Errorf("%s: format %v, want %s", name, got, format)
		}
	}
	// net.IP reads either family: anyOf ipv4/ipv6, plus null when optional.
	ipFormats := func(s map[string]any) []any {
		var out []any
		for _, b := range s["anyOf"].([]any) {
			out = append(out, b.(map[string]any)["format"])
		}
		return out
	}
	if got := ipFormats(prop(t, m, "ip")); !slices.Equal(got, []any{"ipv4", "ipv6"}) {
		t.Errorf("net.IP: %v", got)
	}
	if got := ipFormats(prop(t, m, "ips", "[]")); !slices.Equal(got, []any{"ipv4", "ipv6"}) {
		t.Errorf("[]net.IP items: %v", got)
	}
	if got := ipFormats(prop(t, m, "maybe_ip")); !slices.Equal(got, []any{"ipv4", "ipv6", nil}) {
		t.Errorf("optional net.IP: %v", prop(t, m, "maybe_ip"))
	}
	// []byte is base64 to encoding/json: a pattern, not contentEncoding.
	if b := prop(t, m, "blob"); b["type"] != "string" || b["pattern"] == nil || b["contentEncoding"] != nil {
		t.Errorf("[]byte: %v", b)
	}

	tool := readTool[formatsIn]()
	base := `"at":"2024-05-01T10:00:00Z","day":"2024-05-01","clock":"10:00:00Z","span":"P1DT2H","email":"a@example.com",` +
		`"host":"example.com","v4":"10.0.0.1","v6":"::1","id":"123e4567-e89b-12d3-a456-426614174000","code":"ABC"`
	v, err := decode(t, tool, `{`+base+`,"ip":"2001:db8::1","ips":["10.0.0.1","::1"],"maybe_ip":null,"blob":"aGk="}`)
	if err != nil {
		t.Fatalf("valid formats: %v", err)
	}
	in := v.(formatsIn)
	if !in.IP.Equal(net.ParseIP("2001:db8::1")) || len(in.IPs) != 2 || in.MaybeIP != nil || string(in.Blob) != "hi" {
		t.Errorf("decoded %+v", in)
	}
	for _, bad := range []string{
		`"ip":"10.0.0.256","ips":[],"maybe_ip":null,"blob":""`,
		`"ip":"::1","ips":["nope"],"maybe_ip":null,"blob":""`,
		`"ip":"::1","ips":[],"maybe_ip":null,"blob":"aGk"`,
		`"ip":"::1","ips":[],"maybe_ip":null,"blob":"not base64!"`,
	} {
		v, err := decode(t, tool, `{`+base+`,`+bad+`}`)
		assertInvalidArguments(t, v, err)
	}
}

type nullPtrIn struct {
	Note  *string `json:"note"`
	Items []*int  `json:"items"`
}

// A pointer, omitempty or not, is anyOf [T, null], still required, and
// null decodes to nil (golden: pointer.json, slices.json).
func TestPointerIsNullable(t *testing.T) {
	tool := readTool[nullPtrIn]()
	v, err := decode(t, tool, `{"note":null,"items":[1,null]}`)
	if err != nil {
		t.Fatal(err)
	}
	if in := v.(nullPtrIn); in.Note != nil || len(in.Items) != 2 || *in.Items[0] != 1 || in.Items[1] != nil {
		t.Errorf("decoded %+v", in)
	}
	v, err = decode(t, tool, `{"note":"x","items":[]}`)
	if err != nil {
		t.Fatal(err)
	}
	if in := v.(nullPtrIn); in.Note == nil || *in.Note != "x" {
		t.Errorf("decoded %+v", in)
	}
	v, err = decode(t, tool, `{"items":[]}`)
	assertInvalidArguments(t, v, err)
}

// An empty struct is a closed object with an empty required list (golden:
// empty.json).
func TestEmptyStruct(t *testing.T) {
	m := mustSchema[struct{}](t)
	if req, ok := m["required"].([]any); !ok || len(req) != 0 || m["additionalProperties"] != false {
		t.Errorf("empty struct schema %v", m)
	}
	tool := readTool[struct{}]()
	if _, err := decode(t, tool, `{}`); err != nil {
		t.Errorf("{}: %v", err)
	}
	v, err := decode(t, tool, `{"x":1}`)
	assertInvalidArguments(t, v, err)
}

// Recursive types refer to themselves with $ref: "#" for the input type,
// "#/$defs/Name" for a nested one (golden: recursive_*.json); the
// validator follows the refs at any depth.
func TestRecursiveTypes(t *testing.T) {
	if got := prop(t, mustSchema[node](t), "next", "?")["$ref"]; got != "#" {
		t.Errorf("node.next: $ref %v, want #", got)
	}
	if got := prop(t, mustSchema[tree](t), "kids", "[]")["$ref"]; got != "#" {
		t.Errorf("tree.kids items: $ref %v, want #", got)
	}
	m := mustSchema[wrapsRecursive](t)
	if got := prop(t, m, "head")["$ref"]; got != "#/$defs/node" {
		t.Errorf("head: $ref %v", got)
	}
	def, _ := m["$defs"].(map[string]any)["node"].(map[string]any)
	if got := prop(t, def, "next", "?")["$ref"]; got != "#/$defs/node" {
		t.Errorf("$defs.node.next: $ref %v", got)
	}

	list := readTool[node]()
	v, err := decode(t, list, `{"value":"a","next":{"value":"b","next":{"value":"c","next":null}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if in := v.(node); in.Next == nil || in.Next.Next == nil || in.Next.Next.Value != "c" || in.Next.Next.Next != nil {
		t.Errorf("decoded %+v", in)
	}
	v, err = decode(t, list, `{"value":"a","next":{"value":"b","next":{"value":3,"next":null}}}`)
	assertInvalidArguments(t, v, err)
	wrapped := readTool[wrapsRecursive]()
	if _, err := decode(t, wrapped, `{"head":{"value":"a","next":{"value":"b","next":null}}}`); err != nil {
		t.Error(err)
	}
	v, err = decode(t, wrapped, `{"head":{"value":"a","next":{"value":"b","extra":1,"next":null}}}`)
	assertInvalidArguments(t, v, err)
	mutual := readTool[mutualA]()
	if _, err := decode(t, mutual, `{"b":{"a":[{"b":null},{"b":{"a":[]}}]}}`); err != nil {
		t.Error(err)
	}
	v, err = decode(t, mutual, `{"b":{"a":[{"b":{"a":[{}]}}]}}`)
	assertInvalidArguments(t, v, err)
}
