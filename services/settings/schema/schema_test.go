package schema_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/services/settings/schema"
)

func TestParseEnvBool(t *testing.T) {
	for s, want := range map[string]bool{"true": true, "1": true, "on": true, "yes": true, " Yes ": true, "TRUE": true,
		"false": false, "0": false, "off": false, "no": false} {
		if v, ok := schema.ParseEnvBool(s); !ok || v != want {
			t.Errorf("%q → %v %v", s, v, ok)
		}
	}
	for _, s := range []string{"", "2", "y", "enabled"} {
		if _, ok := schema.ParseEnvBool(s); ok {
			t.Errorf("%q accepted", s)
		}
	}
}

// decode runs a JSON object through a schema as a Record is decoded.
func decode(t *testing.T, s *schema.Schema, body string) (schema.Values, map[string]string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return s.Decode(m, true)
}

// Problem replaces the kind's own words for the value; Required names an
// absent or null field; OneOf words the choices; Float and FloatList hold
// their bounds.
func TestFieldWording(t *testing.T) {
	s := schema.New([]schema.Field{
		{Path: "n", Kind: schema.Int, Min: 1, Max: 5},
		{Path: "m", Kind: schema.Int, Min: 1, Max: 5, Problem: "must be a whole number between 1 and 5"},
		{Path: "who", Kind: schema.String, Required: "is required", OneOf: []string{"a", "b"}},
		{Path: "x", Kind: schema.Float, MinFloat: 0, MaxFloat: 0.5},
		{Path: "pair", Kind: schema.FloatList, MinItems: 2, MaxItems: 2, MinFloat: 0, MaxFloat: 1},
		{Path: "g.k", Kind: schema.Bool},
	})
	_, errs := decode(t, s, `{"n": 2.5, "m": "x", "x": 0.7, "pair": [0.1, 2], "g": 1, "zz": 1}`)
	want := map[string]string{
		"n": "must be a whole number", "m": "must be a whole number between 1 and 5", "who": "is required",
		"x": "must be a number between 0 and 0.5", "pair.1": "must be a number between 0 and 1", "g": "must be an object",
		"zz": "unknown field",
	}
	if !reflect.DeepEqual(errs, want) {
		t.Fatalf("problems\n got %v\nwant %v", errs, want)
	}
	if _, errs := decode(t, s, `{"who": "c"}`); errs["who"] != "must be one of a, b" {
		t.Fatalf("OneOf: %v", errs)
	}
	if _, errs := decode(t, s, `{"who": null}`); errs["who"] != "is required" {
		t.Fatalf("null required: %v", errs)
	}
	vals, errs := decode(t, s, `{"who": "a", "x": 0.25, "pair": [0, 1], "g": {"k": true}, "n": null}`)
	if len(errs) > 0 || vals["x"] != 0.25 || !reflect.DeepEqual(vals["pair"], []float64{0, 1}) || vals["g.k"] != true {
		t.Fatalf("values %v, problems %v", vals, errs)
	}
	if _, ok := vals["n"]; ok {
		t.Fatal("null kept")
	}
}

// Records: each item is decoded against the Item schema, items keep the
// fields that passed, and Check sees them all (a non-object item as nil)
// even when some items have problems, so rules across items are reported
// together with each item's own problems.
func TestRecordsCheckSeesPartialItems(t *testing.T) {
	item := schema.New([]schema.Field{
		{Path: "id", Kind: schema.String},
		{Path: "n", Kind: schema.Int, Min: 0, Max: 9, Required: "is required"},
		{Path: "h", Kind: schema.Record, Problem: "must be {\"name\"} or null",
			Item: schema.New([]schema.Field{{Path: "name", Kind: schema.String, Required: "needs a name"}})},
	})
	var seen []any
	s := schema.New([]schema.Field{{Path: "list", Kind: schema.Records, MaxItems: 3, Item: item,
		Check: func(v any, _ bool) (any, map[string]string) {
			seen = v.([]any)
			return v, map[string]string{".1.id": "check's own problem", ".0.n": "must not override the item's"}
		}}})
	_, _, errs := s.Apply(nil, nil, map[string]any{"list": []any{
		map[string]any{"id": "a", "n": 12.0},
		map[string]any{"id": "b", "n": 1.0, "h": map[string]any{}},
		"not a rule",
	}}, true)
	want := map[string]string{"list.0.n": "must be between 0 and 9", "list.1.id": "check's own problem",
		"list.1.h.name": "needs a name", "list.2": "must be an object"}
	if !reflect.DeepEqual(errs, want) {
		t.Fatalf("problems\n got %v\nwant %v", errs, want)
	}
	wantSeen := []any{map[string]any{"id": "a"}, map[string]any{"id": "b", "n": int64(1)}, nil}
	if !reflect.DeepEqual(seen, wantSeen) {
		t.Fatalf("Check saw %#v, want %#v", seen, wantSeen)
	}
	_, _, errs = s.Apply(nil, nil, map[string]any{"list": []any{map[string]any{"n": 1.0, "h": "x"}}}, true)
	if errs["list.0.h"] != `must be {"name"} or null` {
		t.Fatalf("Record Problem: %v", errs)
	}
	_, _, errs = s.Apply(nil, nil, map[string]any{"list": []any{1.0, 2.0, 3.0, 4.0}}, true)
	if errs["list"] != "must have at most 3 items" {
		t.Fatalf("MaxItems: %v", errs)
	}
}

// Build decodes flat values into a typed struct through the nested JSON.
func TestBuildAndPaths(t *testing.T) {
	s := schema.New([]schema.Field{
		{Path: "a.b", Kind: schema.Int, Default: 3},
		{Path: "a.c", Kind: schema.StringList, Default: []string{"x"}},
		{Path: "d", Kind: schema.Bool},
	})
	type doc struct {
		A struct {
			B int      `json:"b"`
			C []string `json:"c"`
		} `json:"a"`
		D bool `json:"d"`
	}
	got, err := schema.Build[doc](s, s.Defaults())
	if err != nil || got.A.B != 3 || len(got.A.C) != 1 || got.A.C[0] != "x" || got.D {
		t.Fatalf("Build: %+v %v", got, err)
	}
	m := map[string]any{}
	schema.SetPath(m, "a.b.c", 1)
	schema.SetPath(m, "a.d", 2)
	if !reflect.DeepEqual(m, map[string]any{"a": map[string]any{"b": map[string]any{"c": 1}, "d": 2}}) {
		t.Fatalf("SetPath: %v", m)
	}
	if schema.Join("", "a") != "a" || schema.Join("a", "b") != "a.b" || schema.Last("a.b.c") != "c" || schema.Last("a") != "a" {
		t.Fatal("Join/Last")
	}
}
