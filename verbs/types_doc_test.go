package verbs_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/uroce/uroce/verbs"
)

// TestAliasDocs keeps go doc ./verbs complete for the types verbs takes
// from package qp (issue 14): go doc shows an alias without the fields
// of the type it names, so each alias's doc comment lists them, and
// names every constant of its type, which go doc shows only as the first
// of each block. A field or constant added in qp without a word here
// fails this test.
func TestAliasDocs(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/uroce/uroce/verbs")
	if err != nil {
		t.Fatal(err)
	}
	structs := map[string]reflect.Type{
		"SGE":         reflect.TypeFor[verbs.SGE](),
		"SendWR":      reflect.TypeFor[verbs.SendWR](),
		"RecvWR":      reflect.TypeFor[verbs.RecvWR](),
		"WC":          reflect.TypeFor[verbs.WC](),
		"QPAttr":      reflect.TypeFor[verbs.QPAttr](),
		"AH":          reflect.TypeFor[verbs.AH](),
		"QPCounters":  reflect.TypeFor[verbs.QPCounters](),
		"Counters":    reflect.TypeFor[verbs.Counters](),
		"SRQAttr":     reflect.TypeFor[verbs.SRQAttr](),
		"SRQCounters": reflect.TypeFor[verbs.SRQCounters](),
	}
	word := func(doc, name string) bool {
		return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(doc)
	}
	seen := 0
	for _, typ := range pkg.Types {
		spec := typ.Decl.Specs[0].(*ast.TypeSpec)
		if !spec.Assign.IsValid() || !ast.IsExported(typ.Name) {
			continue
		}
		if typ.Doc == "" {
			t.Errorf("alias %s has no doc comment", typ.Name)
			continue
		}
		for _, c := range typ.Consts {
			for _, name := range c.Names {
				if ast.IsExported(name) && !word(typ.Doc, name) {
					t.Errorf("%s's doc does not name its constant %s", typ.Name, name)
				}
			}
		}
		if rt, ok := structs[typ.Name]; ok {
			seen++
			for f := range rt.Fields() {
				if f.IsExported() && !word(typ.Doc, f.Name) {
					t.Errorf("%s's doc does not show its field %s", typ.Name, f.Name)
				}
			}
		}
	}
	if seen != len(structs) {
		t.Errorf("found %d of the %d struct aliases", seen, len(structs))
	}
}
