// Package static owns the dashboard's browser assets: the vendored htmx 2 build, app.css,
// app.js, the icon sprite and the favicon. They are embedded in the binary and served under
// content-hashed URLs (/static/<hash>/<name>) that browsers may cache for a year, so a new
// build never meets a stale copy and nothing is ever fetched from another origin.
//
// Templates get every asset URL from [URL] and the names from this package's constants;
// the app mounts [Handler] for GET and HEAD on /static/*.
//
// It imports only the standard library and must not import any other package of this module.
package static
