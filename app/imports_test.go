package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// listedPackage is the part of `go list -json` output the import rules read.
type listedPackage struct {
	ImportPath string
	Imports    []string // direct imports of the non-test files
	Deps       []string // every package the non-test files depend on, transitively
}

// importRule forbids the packages under Pattern, except those under one of
// Except, to depend (directly or transitively) on any import path starting
// with one of Banned.
type importRule struct {
	Pattern string // "switchyard/services" covers the package and everything below it
	Except  []string
	Why     string
	Banned  []string
}

// importRules is the import graph of STYLE §1 and docs/ARCHITECTURE.md: the
// domain (services) is the root and knows no framework; handlers reach the
// database only through services; views render view models; models implement
// the services' store interfaces and know nothing of HTTP.
var importRules = []importRule{
	{
		Pattern: "switchyard/services",
		Why:     "services is the domain: no web framework, ORM, template engine or database driver",
		Banned: []string{
			"github.com/labstack/echo", "gorm.io/", "github.com/a-h/templ", "github.com/glebarez/",
			"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/redis/go-redis",
			"github.com/gorilla/", "github.com/prometheus/",
			"switchyard/app", "switchyard/handlers", "switchyard/views", "switchyard/models",
			"switchyard/internal/testkit",
		},
	},
	{
		Pattern: "switchyard/handlers",
		Why:     "handlers are thin adapters: they call services, never the store",
		Banned:  []string{"switchyard/models", "gorm.io/", "github.com/glebarez/", "switchyard/app", "switchyard/internal/testkit"},
	},
	{
		Pattern: "switchyard/views",
		Why:     "views render view models: no request context, no store",
		Banned:  []string{"github.com/labstack/echo", "gorm.io/", "switchyard/models", "switchyard/handlers", "switchyard/app", "switchyard/internal/testkit"},
	},
	{
		Pattern: "switchyard/models",
		Why:     "models implement the services' store interfaces and know nothing of HTTP or pages",
		Banned:  []string{"github.com/labstack/echo", "github.com/a-h/templ", "switchyard/handlers", "switchyard/views", "switchyard/app", "switchyard/internal/testkit"},
	},
	{
		Pattern: "switchyard/migrations",
		Why:     "migrations are embedded SQL applied through database/sql",
		Banned:  []string{"gorm.io/", "switchyard/"},
	},
	{
		// The binary, bench and cmd/ link internal/fakeupstream (the --demo
		// upstream), never the test kit: it exists for _test.go files.
		Pattern: "switchyard",
		Except:  []string{"switchyard/internal/testkit"},
		Why:     "the test kit is for tests: production code never links it",
		Banned:  []string{"switchyard/internal/testkit"},
	},
	{
		Pattern: "switchyard/internal/fakeupstream",
		Why:     "the fake upstream shares no code with the gateway it stands in for: standard library only",
		Banned:  []string{"switchyard/"},
	},
}

// appImporters may import switchyard/app or switchyard/handlers from their
// non-test files: the binary itself, the benchmark harness (a separate binary
// that runs the gateway in-process) and the test kit (used only by tests).
var appImporters = map[string]bool{
	"switchyard":                  true,
	"switchyard/app":              true,
	"switchyard/bench":            true,
	"switchyard/internal/testkit": true,
}

// TestImportGraph fails when a package's non-test code depends on something
// the layering forbids. Test files are free to import anything.
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the whole module; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: the import graph cannot be listed")
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = ".." // the module root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs, err := decodePackages(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for _, problem := range importViolations(pkgs, importRules, appImporters) {
		t.Error(problem)
	}
}

// TestImportGraphReportsViolations proves the checker is not vacuous: a
// module with each forbidden edge yields one finding per edge, and the
// allowed edges none.
func TestImportGraphReportsViolations(t *testing.T) {
	pkgs := []listedPackage{
		{ImportPath: "switchyard", Imports: []string{"switchyard/app"}, Deps: []string{"switchyard/app"}},
		{ImportPath: "switchyard/services/gateway", Imports: []string{"net/http", "switchyard/services"},
			Deps: []string{"net/http", "switchyard/services", "gorm.io/gorm"}},
		{ImportPath: "switchyard/services", Imports: []string{"errors"}, Deps: []string{"errors"}},
		{ImportPath: "switchyard/handlers", Imports: []string{"switchyard/models"}, Deps: []string{"switchyard/models"}},
		{ImportPath: "switchyard/views", Imports: []string{"github.com/a-h/templ"}, Deps: []string{"github.com/a-h/templ"}},
		{ImportPath: "switchyard/services/leases", Imports: []string{"switchyard/app"}, Deps: []string{"switchyard/app"}},
		{ImportPath: "switchyard/servicesextra", Imports: []string{"gorm.io/gorm"}, Deps: []string{"gorm.io/gorm"}},
		{ImportPath: "switchyard/app", Imports: []string{"switchyard/internal/testkit/fakeupstream"},
			Deps: []string{"switchyard/internal/testkit/fakeupstream"}},
		{ImportPath: "switchyard/cmd/fakeupstream", Imports: []string{"switchyard/internal/fakeupstream"},
			Deps: []string{"switchyard/internal/fakeupstream"}},
		{ImportPath: "switchyard/internal/testkit/cluster", Imports: []string{"switchyard/internal/testkit"},
			Deps: []string{"switchyard/internal/testkit", "switchyard/app"}},
		{ImportPath: "switchyard/internal/fakeupstream", Imports: []string{"switchyard/services"}, Deps: []string{"switchyard/services"}},
	}
	got := importViolations(pkgs, importRules, appImporters)
	want := []string{
		"switchyard/app depends on switchyard/internal/testkit/fakeupstream (the test kit is for tests: production code never links it)",
		"switchyard/handlers depends on switchyard/models (handlers are thin adapters: they call services, never the store)",
		"switchyard/internal/fakeupstream depends on switchyard/services (the fake upstream shares no code with the gateway it stands in for: standard library only)",
		"switchyard/services/gateway depends on gorm.io/gorm (services is the domain: no web framework, ORM, template engine or database driver)",
		"switchyard/services/leases depends on switchyard/app (services is the domain: no web framework, ORM, template engine or database driver)",
		"switchyard/services/leases imports switchyard/app (only the binary, bench and the test kit may)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func decodePackages(out []byte) ([]listedPackage, error) {
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// importViolations lists, sorted, every forbidden dependency of pkgs.
func importViolations(pkgs []listedPackage, rules []importRule, mayImportApp map[string]bool) []string {
	var problems []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !within(p.ImportPath, r.Pattern) || slices.ContainsFunc(r.Except, func(e string) bool { return within(p.ImportPath, e) }) {
				continue
			}
			for _, dep := range p.Deps {
				for _, banned := range r.Banned {
					if within(dep, banned) {
						problems = append(problems, fmt.Sprintf("%s depends on %s (%s)", p.ImportPath, dep, r.Why))
						break
					}
				}
			}
		}
		if mayImportApp[p.ImportPath] {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "switchyard/app" || imp == "switchyard/handlers" {
				problems = append(problems, fmt.Sprintf("%s imports %s (only the binary, bench and the test kit may)", p.ImportPath, imp))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// within reports whether path is prefix itself or below it: "gorm.io/" and
// "gorm.io" both cover "gorm.io/gorm"; "github.com/labstack/echo" covers
// "github.com/labstack/echo/v4" but not "github.com/labstack/echofoo".
func within(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
