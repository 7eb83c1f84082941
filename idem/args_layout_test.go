package idem

import (
	"encoding/binary"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestArgsLayout checks that the Go side and the Lua prelude agree on the
// scripts' positional arguments: the order argv packs scriptArgs' fields
// in, the position and name each field's comment gives (args.go), and the
// names lua/prelude.lua unpacks them into (FP, CODE, …). A field added,
// removed or moved on one side only fails here, not as a wrong value in a
// script.
func TestArgsLayout(t *testing.T) {
	lua := luaArgNames(t)
	fields := goArgFields(t)
	packed := packedOrder(t)

	if len(lua) != len(fields) || len(lua) != len(packed) {
		t.Fatalf("the prelude unpacks %d arguments, scriptArgs has %d fields, argv packs %d", len(lua), len(fields), len(packed))
	}
	for i, name := range lua {
		f := fields[i]
		if f.pos != i+1 || f.name != name {
			t.Errorf("argument %d: the prelude names it %s; scriptArgs' field %d (%s) says it is %d %s", i+1, name, i+1, f.field, f.pos, f.name)
		}
		if packed[i] != f.field {
			t.Errorf("argument %d (%s): argv packs the field %s there, not %s", i+1, name, packed[i], f.field)
		}
	}
}

// luaArgNames returns the names the prelude unpacks the packed arguments
// into, in order: the assignment "FP, CODE, … = ARGS(packed)".
func luaArgNames(t *testing.T) []string {
	t.Helper()
	m := regexp.MustCompile(`(?s)\n\s*([A-Z_][A-Z_0-9]*(?:\s*,\s*[A-Z_][A-Z_0-9]*)*)\s*=\s*ARGS\(packed\)`).FindStringSubmatch(prelude)
	if m == nil {
		t.Fatal("lua/prelude.lua: no assignment of ARGS(packed) found")
	}
	var names []string
	for _, n := range strings.Split(m[1], ",") {
		names = append(names, strings.TrimSpace(n))
	}
	return names
}

type argField struct {
	field string // the Go field
	pos   int    // the position its comment gives
	name  string // the Lua name its comment gives
}

// goArgFields returns scriptArgs' fields in declaration order, with the
// position and the Lua name of each field's comment ("// 5  NOW: …").
func goArgFields(t *testing.T) []argField {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "args.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	comment := regexp.MustCompile(`^//\s*(\d+)\s+([A-Z_][A-Z_0-9]*)\b`)
	var out []argField
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "scriptArgs" {
			return true
		}
		for _, fl := range ts.Type.(*ast.StructType).Fields.List {
			if fl.Comment == nil || len(fl.Comment.List) == 0 {
				t.Fatalf("scriptArgs.%s has no comment naming its position", fl.Names[0].Name)
			}
			m := comment.FindStringSubmatch(fl.Comment.List[0].Text)
			if m == nil {
				t.Fatalf("scriptArgs.%s: comment %q does not start with a position and a name", fl.Names[0].Name, fl.Comment.List[0].Text)
			}
			pos, _ := strconv.Atoi(m[1])
			for _, id := range fl.Names {
				out = append(out, argField{field: id.Name, pos: pos, name: m[2]})
			}
		}
		return false
	})
	return out
}

// packedOrder returns the names of scriptArgs' fields in the order argv
// packs them: each field is given a value of its own, and argv's packed
// argument is read back field by field.
func packedOrder(t *testing.T) []string {
	t.Helper()
	var a scriptArgs
	v := reflect.ValueOf(&a).Elem()
	owner := map[string]string{}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		f := reflect.NewAt(v.Field(i).Type(), v.Field(i).Addr().UnsafePointer()).Elem()
		switch f.Kind() {
		case reflect.String:
			f.SetString("v" + strconv.Itoa(i))
			owner["v"+strconv.Itoa(i)] = name
		case reflect.Int64:
			f.SetInt(int64(1000 + i))
			owner[fmt.Sprint(1000+i)] = name
		default:
			t.Fatalf("scriptArgs.%s: a %s, neither a string nor an int64", name, f.Kind())
		}
	}
	b := a.argv()[0].([]byte)
	var out []string
	for len(b) > 0 {
		var val string
		switch c := b[0]; {
		case c == 0xcf || c == 0xd3:
			if len(b) < 9 {
				t.Fatal("argv: a truncated integer")
			}
			val, b = fmt.Sprint(int64(binary.BigEndian.Uint64(b[1:9]))), b[9:]
		case c >= 0xa0 && c <= 0xbf:
			n := int(c & 0x1f)
			if len(b) < 1+n {
				t.Fatal("argv: a truncated string")
			}
			val, b = string(b[1:1+n]), b[1+n:]
		default:
			t.Fatalf("argv: unexpected header %#x", c)
		}
		name, ok := owner[val]
		if !ok {
			t.Fatalf("argv packs %q, which no field holds", val)
		}
		out = append(out, name)
	}
	return out
}
