package settings_test

import (
	"encoding/json"
	"errors"
	"testing"

	"switchyard/services/settings"
)

func TestSettingsPatchDecoding(t *testing.T) {
	if _, err := settings.DecodePatch([]byte(`{}`)); !errors.Is(err, settings.ErrEmptyPatch) {
		t.Errorf("{}: %v", err)
	}
	for _, b := range []string{``, `{`, `[]`, `"x"`, `{} x`} {
		var jerr *settings.JSONError
		if _, err := settings.DecodePatch([]byte(b)); !errors.As(err, &jerr) {
			t.Errorf("%q: %v", b, err)
		}
	}
	m, err := settings.DecodePatch([]byte(`{"a": 12345678901234567}`))
	if err != nil || m["a"].(json.Number).String() != "12345678901234567" {
		t.Errorf("numbers must stay exact: %v %v", m, err)
	}
}

func TestRevisionMatches(t *testing.T) {
	for _, c := range []struct {
		h    string
		rev  int64
		want bool
	}{{"", 3, true}, {"*", 3, true}, {`"r3"`, 3, true}, {`W/"r3"`, 3, true}, {`"r1", "r3"`, 3, true},
		{`"r2"`, 3, false}, {`"3"`, 3, false}, {`garbage`, 0, false}, {`"r0"`, 0, true}} {
		if got := settings.RevisionMatches(c.h, c.rev); got != c.want {
			t.Errorf("RevisionMatches(%q, %d) = %v", c.h, c.rev, got)
		}
	}
}

// One spelling of the entity tag, in the header and in If-Match.
func TestETag(t *testing.T) {
	if got := settings.ETag(12); got != `"r12"` {
		t.Fatalf("ETag(12) = %s", got)
	}
	if !settings.RevisionMatches(settings.ETag(7), 7) || settings.RevisionMatches(settings.ETag(7), 8) {
		t.Fatal("ETag and RevisionMatches disagree")
	}
}
