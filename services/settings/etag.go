package settings

import (
	"strconv"
	"strings"
)

// ETag is the entity tag of a document revision, `"r<revision>"` — the
// only spelling clients see (40-admin-api §2.1), in the ETag header and as
// the If-Match a dashboard card sends.
func ETag(revision int64) string { return `"r` + strconv.FormatInt(revision, 10) + `"` }

// RevisionMatches reports whether an If-Match header value names rev
// (`"r12"`, also W/"r12", r12, a list, or *). "" matches.
func RevisionMatches(ifMatch string, rev int64) bool {
	ifMatch = strings.TrimSpace(ifMatch)
	if ifMatch == "" || ifMatch == "*" {
		return true
	}
	want := strings.Trim(ETag(rev), `"`)
	for _, tag := range strings.Split(ifMatch, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if strings.Trim(tag, `"`) == want {
			return true
		}
	}
	return false
}
