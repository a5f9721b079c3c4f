// Package human writes numbers for people: durations, counted nouns and
// thousands separators, in the wording of 50-dashboard.md §4. It is the one
// home of these formatters: the dashboard views, the handlers' toasts and the
// services' own messages (a sign-in throttle's "Try again in 4 min 10 s.")
// all call it, so a duration reads the same wherever it appears.
//
// The package is a leaf: it imports only the standard library, so every
// layer may import it (services, views, handlers) without bending the import
// graph of app/imports_test.go.
package human
