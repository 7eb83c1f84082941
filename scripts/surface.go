//go:build ignore

// surface prints the size of the library's surface and fails when one
// count goes past its bound, so that the house does not grow its corridors
// again unnoticed (issue 43). The library is every package of the core
// module and of the nested modules (integrations/*, secretscan) but the
// examples, the commands and the scripts; test files do not count.
// Exported identifiers are counted in the public packages, those a user
// may import (not internal/): that is the surface a user reads and a
// maintainer must keep compatible. The names internal packages export are
// printed too, for information, without a bound: they can change in any
// commit.
//
//	go run scripts/surface.go          # the counts, and what is past a bound
//	go run scripts/surface.go -v       # every counted name, by package
//
// What it counts:
//   - public packages of the core module (not internal);
//   - exported identifiers: exported top-level funcs, types, vars and
//     consts, and exported methods of exported types;
//   - type aliases, re-exported variables and constants (an exported var or
//     const whose value is another package's identifier), and forwarding
//     functions (an exported func whose body only returns another package's
//     function called with its own parameters);
//   - exported funcs and methods with more than five parameters;
//   - imports that run up the layers: the core's foundation (guard,
//     toolset, idem, host, durable and what they hold) imports no
//     adapter, agentloop or integration.
//
// It exits 1 when a count is past its bound.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The bounds of issue 43.
const (
	maxCorePackages   = 16
	maxExported       = 800
	maxAliases        = 0
	maxManyParamFuncs = 3
	manyParams        = 5
)

// foundation is the core's lowest layer: none of these packages (nor any
// below them) may import a package of a higher layer.
var foundation = []string{"guard", "toolset", "idem", "host", "durable"}

// higher are the layers the foundation must not import.
var higher = []string{"adapters/", "agentloop", "integrations/"}

const modulePath = "github.com/toolguard/toolguard"

type pkg struct {
	dir    string // relative to the root, slash-separated
	module string // the module's directory ("" for the core)
	files  []*ast.File
}

type finding struct{ pkg, what string }

func main() {
	verbose := flag.Bool("v", false, "print every counted name")
	flag.Parse()
	pkgs, err := load(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(2)
	}
	var (
		core, exported, internal, aliases, many, upward []finding
	)
	for _, p := range pkgs {
		if public(p.dir) && p.module == "" {
			core = append(core, finding{p.dir, ""})
		}
		for _, f := range p.files {
			if public(p.dir) {
				exported = append(exported, exportedNames(p, f)...)
			} else {
				internal = append(internal, exportedNames(p, f)...)
			}
			aliases = append(aliases, aliasNames(p, f)...)
			many = append(many, manyParamFuncs(p, f)...)
		}
	}
	for _, p := range pkgs {
		upward = append(upward, upwardImports(p)...)
	}
	ok := true
	report := func(name string, list []finding, bound int) {
		mark := ""
		if len(list) > bound {
			mark, ok = "  PAST THE BOUND", false
		}
		fmt.Printf("%-52s %5d (bound %d)%s\n", name, len(list), bound, mark)
		if *verbose || (mark != "" && bound == 0) || (mark != "" && len(list) < 50) {
			for _, f := range list {
				fmt.Printf("    %s %s\n", f.pkg, f.what)
			}
		}
	}
	report("public packages in the core module", core, maxCorePackages)
	report("exported identifiers in the public packages", exported, maxExported)
	fmt.Printf("%-52s %5d (no bound)\n", "exported identifiers in internal packages", len(internal))
	if *verbose {
		for _, f := range internal {
			fmt.Printf("    %s %s\n", f.pkg, f.what)
		}
	}
	report("type aliases, re-exports, forwarding functions", aliases, maxAliases)
	report(fmt.Sprintf("exported funcs with more than %d parameters", manyParams), many, maxManyParamFuncs)
	report("imports from the foundation to a higher layer", upward, 0)
	if !ok {
		os.Exit(1)
	}
}

// load parses the non-test Go files of every package under root, skipping
// testdata, node_modules, hidden directories, examples, commands and
// scripts.
func load(root string) ([]*pkg, error) {
	byDir := map[string]*pkg{}
	modules := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(path)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "node_modules" ||
				base == "examples" || base == "cmd" || base == "scripts") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				modules[rel] = true
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ignored(f) {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		p := byDir[dir]
		if p == nil {
			p = &pkg{dir: dir}
			byDir[dir] = p
		}
		p.files = append(p.files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []*pkg
	for dir, p := range byDir {
		for m := range modules {
			if dir == m || strings.HasPrefix(dir, m+"/") {
				p.module = m
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out, nil
}

// ignored reports whether a file is excluded from every build (a
// //go:build ignore file is a program of its own).
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

func public(dir string) bool {
	for _, part := range strings.Split(dir, "/") {
		if part == "internal" {
			return false
		}
	}
	return dir != "."
}

// exportedNames lists the exported top-level names of a file and the
// exported methods of its exported types.
func exportedNames(p *pkg, f *ast.File) []finding {
	var out []finding
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv != nil {
				if recv := recvType(d); recv == "" || !ast.IsExported(recv) {
					continue
				}
				out = append(out, finding{p.dir, recvType(d) + "." + d.Name.Name})
				continue
			}
			out = append(out, finding{p.dir, d.Name.Name})
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, finding{p.dir, s.Name.Name})
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							out = append(out, finding{p.dir, n.Name})
						}
					}
				}
			}
		}
	}
	return out
}

func recvType(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// aliasNames lists exported type aliases, exported vars and consts whose
// value is another package's identifier, and exported forwarding funcs.
func aliasNames(p *pkg, f *ast.File) []finding {
	var out []finding
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Assign.IsValid() && s.Name.IsExported() {
						out = append(out, finding{p.dir, "type alias " + s.Name.Name})
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if n.IsExported() && i < len(s.Values) && ownPackageIdent(f, s.Values[i]) {
							out = append(out, finding{p.dir, "re-exported " + n.Name})
						}
					}
				}
			}
		case *ast.FuncDecl:
			if d.Name.IsExported() && forwards(f, d) {
				out = append(out, finding{p.dir, "forwarding func " + d.Name.Name})
			}
		}
	}
	return out
}

// ownPackageIdent reports whether e is pkg.Name (possibly generic,
// pkg.Name[T]) of another package of this repository: a name the library
// gives twice.
func ownPackageIdent(f *ast.File, e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.IndexExpr:
		return ownPackageIdent(f, x.X)
	case *ast.IndexListExpr:
		return ownPackageIdent(f, x.X)
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		if !ok {
			return false
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == id.Name {
				return strings.HasPrefix(path, modulePath+"/")
			}
		}
	}
	return false
}

// forwards reports whether a function's body is one return of another
// package's function called with the function's own parameters, in order.
func forwards(f *ast.File, d *ast.FuncDecl) bool {
	if d.Recv != nil || d.Body == nil || len(d.Body.List) != 1 {
		return false
	}
	ret, ok := d.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	call, ok := ret.Results[0].(*ast.CallExpr)
	if !ok || !ownPackageIdent(f, call.Fun) {
		return false
	}
	var params []string
	for _, field := range d.Type.Params.List {
		for _, n := range field.Names {
			params = append(params, n.Name)
		}
	}
	if len(params) != len(call.Args) {
		return false
	}
	for i, a := range call.Args {
		id, ok := a.(*ast.Ident)
		if !ok || id.Name != params[i] {
			return false
		}
	}
	return true
}

// manyParamFuncs lists exported funcs and methods of exported types with
// more than manyParams parameters.
func manyParamFuncs(p *pkg, f *ast.File) []finding {
	var out []finding
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.FuncDecl)
		if !ok || !d.Name.IsExported() {
			continue
		}
		name := d.Name.Name
		if d.Recv != nil {
			recv := recvType(d)
			if !ast.IsExported(recv) {
				continue
			}
			name = recv + "." + name
		}
		n := 0
		for _, field := range d.Type.Params.List {
			n += max(len(field.Names), 1)
		}
		if n > manyParams {
			out = append(out, finding{p.dir, name + " (" + strconv.Itoa(n) + " parameters)"})
		}
	}
	return out
}

// upwardImports lists the imports of a foundation package that reach a
// higher layer.
func upwardImports(p *pkg) []finding {
	if p.module != "" || !inFoundation(p.dir) {
		return nil
	}
	var out []finding
	seen := map[string]bool{}
	for _, f := range p.files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rel, ok := strings.CutPrefix(path, modulePath+"/")
			if !ok || seen[rel] {
				continue
			}
			for _, h := range higher {
				if strings.HasPrefix(rel, h) {
					seen[rel] = true
					out = append(out, finding{p.dir, "imports " + rel})
				}
			}
		}
	}
	return out
}

func inFoundation(dir string) bool {
	for _, f := range foundation {
		if dir == f || strings.HasPrefix(dir, f+"/") {
			return true
		}
	}
	return false
}
