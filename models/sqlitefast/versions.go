package sqlitefast

import (
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
)

// Verified lists the driver modules whose internals Exec relies on, at the
// versions it was checked against: glebarez/go-sqlite's conn fields db and
// tls (handles), and the C API and allocator of modernc.org/sqlite and
// modernc.org/libc it calls. Before raising any of them in go.mod, re-check
// handles and the SQLITE_STATIC binding against the new sources, then update
// this list (TestDriverVersions fails until then).
var Verified = map[string]string{
	"github.com/glebarez/go-sqlite": "v1.21.2",
	"modernc.org/sqlite":            "v1.23.1",
	"modernc.org/libc":              "v1.22.5",
}

var supported = sync.OnceValue(func() error {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return checkModules(info.Deps)
})

// Supported reports why the fast path must not run in this binary: a
// Verified module is linked at another version (or replaced). nil when they
// match, and when the binary carries no module list (test binaries), where
// the shape check of every connection still applies.
func Supported() error { return supported() }

// checkModules compares the linked modules with Verified; modules not
// linked are not checked.
func checkModules(deps []*debug.Module) error {
	var bad []string
	for _, m := range deps {
		want, ok := Verified[m.Path]
		if !ok {
			continue
		}
		got := m.Version
		if m.Replace != nil {
			got = m.Replace.Path + "@" + m.Replace.Version
		}
		if got != want {
			bad = append(bad, fmt.Sprintf("%s %s (verified %s)", m.Path, got, want))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%w: driver modules changed: %s", ErrUnsupported, strings.Join(bad, ", "))
}
