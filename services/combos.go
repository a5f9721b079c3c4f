package services

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Target kinds.
const (
	KindModel = "model"
	KindCombo = "combo"
)

// Target is one entry of a combo: a model on a provider (optionally pinned
// to a connection) or a reference to another combo.
type Target struct {
	ID           string  `json:"id"`
	Kind         string  `json:"kind"`
	Provider     string  `json:"provider,omitempty"`
	Model        string  `json:"model,omitempty"`
	ConnectionID *string `json:"connectionId,omitempty"`
	ComboID      string  `json:"comboId,omitempty"`
	Weight       *int    `json:"weight"`
	Label        *string `json:"label"`
	Enabled      *bool   `json:"enabled"`
	Prompt       string  `json:"prompt,omitempty"`
}

// IsEnabled reads the enabled flag (default true).
func (t Target) IsEnabled() bool { return t.Enabled == nil || *t.Enabled }

// WeightOr0 reads the weight (default 1 when absent).
func (t Target) WeightValue() int {
	if t.Weight == nil {
		return 1
	}
	return *t.Weight
}

// Name renders "provider/model" or "combo:<id>" for display and logs.
func (t Target) Name() string {
	if t.Kind == KindCombo {
		return "combo:" + t.ComboID
	}
	return t.Provider + "/" + t.Model
}

// Combo is a named, ordered set of targets with a routing strategy.
type Combo struct {
	ID          string
	Name        string
	Description string
	Strategy    string
	Enabled     bool
	Hidden      bool
	Order       int
	Targets     []Target
	Config      map[string]any
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ComboStore persists combos; models implements it.
type ComboStore interface {
	ListCombos(ctx context.Context) ([]Combo, error) // in list order
	FindComboByID(ctx context.Context, id string) (Combo, error)
	CreateCombo(ctx context.Context, c Combo) error
	UpdateCombo(ctx context.Context, c Combo) error
	DeleteCombo(ctx context.Context, id string) error
	// ReorderCombos sets order = position of each id.
	ReorderCombos(ctx context.Context, ids []string) error
}

// ComboInput is a full combo as created or replaced (PUT).
type ComboInput struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Strategy    string         `json:"strategy"`
	Enabled     *bool          `json:"enabled"`
	Hidden      bool           `json:"hidden"`
	Targets     []Target       `json:"targets"`
	Config      map[string]any `json:"config"`
	Order       *int           `json:"order"`
}

// ComboPatch edits the light fields (PATCH).
type ComboPatch struct {
	Name        Opt[string] `json:"name"`
	Description Opt[string] `json:"description"`
	Enabled     Opt[bool]   `json:"enabled"`
	Hidden      Opt[bool]   `json:"hidden"`
}

var comboNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`)

// ComboNameRule is the sentence shown for an invalid name.
const ComboNameRule = "Use 1–100 letters, digits and . _ : / -, starting with a letter or digit; no '//', no trailing '/', and not starting with 'combo/'."

// Combos is the service behind the Combos page and /api/combos.
type Combos struct {
	store   ComboStore
	conns   ConnectionStore
	clock   Clock
	catalog func() *Catalogue
	feed    ChangeFeed
}

// NewCombos builds the service; it publishes every change on feed (nil =
// nobody caches combos).
func NewCombos(store ComboStore, conns ConnectionStore, clock Clock, cat *CatalogueHolder, feed ChangeFeed) *Combos {
	return &Combos{store: store, conns: conns, clock: clock, catalog: cat.Get, feed: feed}
}

// changed publishes a committed write: id "" when it touched several combos.
// The caches' errors come back wrapped.
func (s *Combos) changed(ctx context.Context, id, payload string) error {
	return publish(ctx, s.feed, Change{Kind: ChangeCombo, Key: id, Payload: payload})
}

// List returns combos in list order.
func (s *Combos) List(ctx context.Context) ([]Combo, error) { return s.store.ListCombos(ctx) }

// Get returns one combo.
func (s *Combos) Get(ctx context.Context, id string) (Combo, error) {
	return s.store.FindComboByID(ctx, id)
}

// Create validates and stores a new combo; warnings are non-blocking notes.
func (s *Combos) Create(ctx context.Context, in ComboInput) (Combo, []string, error) {
	all, err := s.store.ListCombos(ctx)
	if err != nil {
		return Combo{}, nil, err
	}
	now := s.clock.Now().UTC()
	c := Combo{ID: NewID("cb_"), CreatedAt: now, UpdatedAt: now, Order: len(all)}
	if len(all) > 0 {
		c.Order = all[len(all)-1].Order + 1
	}
	warnings, err := s.fill(ctx, &c, in, all)
	if err != nil {
		return Combo{}, nil, err
	}
	if err := s.store.CreateCombo(ctx, c); err != nil {
		return Combo{}, nil, fmt.Errorf("services: create combo: %w", err)
	}
	return c, warnings, s.changed(ctx, c.ID, "")
}

// Replace validates and replaces a combo (PUT); target ids are kept.
func (s *Combos) Replace(ctx context.Context, id string, in ComboInput) (Combo, []string, error) {
	c, err := s.store.FindComboByID(ctx, id)
	if err != nil {
		return Combo{}, nil, err
	}
	all, err := s.store.ListCombos(ctx)
	if err != nil {
		return Combo{}, nil, err
	}
	warnings, err := s.fill(ctx, &c, in, all)
	if err != nil {
		return Combo{}, nil, err
	}
	c.UpdatedAt = s.clock.Now().UTC()
	if err := s.store.UpdateCombo(ctx, c); err != nil {
		return Combo{}, nil, fmt.Errorf("services: update combo %s: %w", id, err)
	}
	return c, warnings, s.changed(ctx, id, "")
}

// Patch edits name, description, enabled and hidden.
func (s *Combos) Patch(ctx context.Context, id string, p ComboPatch) (Combo, error) {
	c, err := s.store.FindComboByID(ctx, id)
	if err != nil {
		return Combo{}, err
	}
	fe := fieldErrors{}
	if p.Name.Set && p.Name.Null {
		fe.add("name", "Enter a name.")
	} else if p.Name.Set {
		all, err := s.store.ListCombos(ctx)
		if err != nil {
			return Combo{}, err
		}
		if msg := validateComboName(p.Name.V, c.ID, all); msg != "" {
			fe.add("name", msg)
		} else {
			c.Name = p.Name.V
		}
	}
	if p.Description.Set {
		if p.Description.Null {
			fe.add("description", "must be a string")
		} else if utf8.RuneCountInString(p.Description.V) > 500 {
			fe.add("description", "Use at most 500 characters.")
		} else {
			c.Description = p.Description.V
		}
	}
	if p.Enabled.Set {
		if p.Enabled.Null {
			fe.add("enabled", "must be true or false")
		}
		c.Enabled = p.Enabled.V
	}
	if p.Hidden.Set {
		if p.Hidden.Null {
			fe.add("hidden", "must be true or false")
		}
		c.Hidden = p.Hidden.V
	}
	if err := fe.Err(); err != nil {
		return Combo{}, err
	}
	c.UpdatedAt = s.clock.Now().UTC()
	if err := s.store.UpdateCombo(ctx, c); err != nil {
		return Combo{}, err
	}
	return c, s.changed(ctx, id, "")
}

// SetEnabled switches a combo on or off.
func (s *Combos) SetEnabled(ctx context.Context, id string, on bool) (Combo, error) {
	return s.Patch(ctx, id, ComboPatch{Enabled: Some(on)})
}

// ReferencedBy lists the combos whose targets reference id.
func (s *Combos) ReferencedBy(ctx context.Context, id string) ([]Combo, error) {
	all, err := s.store.ListCombos(ctx)
	if err != nil {
		return nil, err
	}
	var out []Combo
	for _, c := range all {
		for _, t := range c.Targets {
			if t.Kind == KindCombo && t.ComboID == id {
				out = append(out, c)
				break
			}
		}
	}
	return out, nil
}

// Delete removes a combo; while others reference it, only with force (which
// also removes those references).
func (s *Combos) Delete(ctx context.Context, id string, force bool) error {
	if _, err := s.store.FindComboByID(ctx, id); err != nil {
		return err
	}
	refs, err := s.ReferencedBy(ctx, id)
	if err != nil {
		return err
	}
	if len(refs) > 0 && !force {
		names := make([]string, len(refs))
		for i, r := range refs {
			names[i] = r.Name
		}
		return &ConflictError{Msg: "Combo is referenced by " + strings.Join(names, ", ") + "; remove those references first or delete with force."}
	}
	for _, r := range refs {
		kept := r.Targets[:0]
		for _, t := range r.Targets {
			if !(t.Kind == KindCombo && t.ComboID == id) {
				kept = append(kept, t)
			}
		}
		r.Targets = kept
		if err := s.store.UpdateCombo(ctx, r); err != nil {
			return err
		}
	}
	if err := s.store.DeleteCombo(ctx, id); err != nil {
		return fmt.Errorf("services: delete combo %s: %w", id, err)
	}
	for _, r := range refs {
		if err := s.changed(ctx, r.ID, ""); err != nil {
			return err
		}
	}
	return s.changed(ctx, id, ChangeDeleted)
}

// Reorder sets the list order; ids must be a permutation of all combo ids.
func (s *Combos) Reorder(ctx context.Context, ids []string) error {
	all, err := s.store.ListCombos(ctx)
	if err != nil {
		return err
	}
	if len(ids) != len(all) {
		return Invalid("ids", "List every combo id exactly once.")
	}
	seen := map[string]bool{}
	for _, c := range all {
		seen[c.ID] = false
	}
	for _, id := range ids {
		v, ok := seen[id]
		if !ok || v {
			return Invalid("ids", "List every combo id exactly once.")
		}
		seen[id] = true
	}
	if err := s.store.ReorderCombos(ctx, ids); err != nil {
		return err
	}
	return s.changed(ctx, "", "")
}

// Duplicate copies a combo as "<name>-copy", disabled, at the end of the list.
func (s *Combos) Duplicate(ctx context.Context, id string) (Combo, error) {
	c, err := s.store.FindComboByID(ctx, id)
	if err != nil {
		return Combo{}, err
	}
	all, err := s.store.ListCombos(ctx)
	if err != nil {
		return Combo{}, err
	}
	name := c.Name + "-copy"
	for i := 2; validateComboName(name, "", all) != ""; i++ {
		name = fmt.Sprintf("%s-copy-%d", c.Name, i)
		if i > 1000 {
			return Combo{}, &ConflictError{Msg: "Could not find a free name for the copy."}
		}
	}
	now := s.clock.Now().UTC()
	c.ID, c.Name, c.Enabled, c.CreatedAt, c.UpdatedAt = NewID("cb_"), name, false, now, now
	c.Order = all[len(all)-1].Order + 1
	c.Targets = append([]Target(nil), c.Targets...)
	if err := s.store.CreateCombo(ctx, c); err != nil {
		return Combo{}, err
	}
	return c, s.changed(ctx, c.ID, "")
}

func validateComboName(name, selfID string, all []Combo) string {
	switch {
	case name == "":
		return "Enter a name."
	case len(name) > 100 || !comboNameRe.MatchString(name) || strings.Contains(name, "//") ||
		strings.HasSuffix(name, "/") || strings.HasPrefix(strings.ToLower(name), "combo/"):
		return ComboNameRule
	}
	for _, o := range all {
		if o.ID != selfID && strings.EqualFold(o.Name, name) {
			return fmt.Sprintf("A combo named '%s' already exists.", name)
		}
	}
	return ""
}

// fill validates in against the rules of 30-routing §2 and writes it into c.
func (s *Combos) fill(ctx context.Context, c *Combo, in ComboInput, all []Combo) ([]string, error) {
	fe := fieldErrors{}
	var warnings []string
	cat := s.catalog()
	if msg := validateComboName(in.Name, c.ID, all); msg != "" {
		fe.add("name", msg)
	}
	if utf8.RuneCountInString(in.Description) > 500 {
		fe.add("description", "Use at most 500 characters.")
	}
	strategy := in.Strategy
	if strategy == "" {
		strategy = "priority"
	}
	info, ok := LookupStrategy(strategy)
	if !ok {
		fe.add("strategy", fmt.Sprintf("Unknown strategy %q.", in.Strategy))
	}
	if len(in.Targets) == 0 {
		fe.add("targets", "Add at least one target.")
	} else if info.Name == "pipeline" && len(in.Targets) < 2 {
		fe.add("targets", "A pipeline needs at least two steps.")
	}
	conns, err := s.conns.ListConnections(ctx)
	if err != nil {
		return nil, err
	}
	connProvider := map[string]string{}
	for _, cn := range conns {
		connProvider[cn.ID] = cn.Provider
	}
	combosByID := map[string]Combo{}
	for _, o := range all {
		combosByID[o.ID] = o
	}
	// Keep ids of existing targets stable; generate missing ones.
	usedIDs := map[string]bool{}
	targets := make([]Target, len(in.Targets))
	seenModel := map[string]int{}
	seenCombo := map[string]int{}
	allZero := true
	for i, t := range in.Targets {
		f := func(name string) string { return fmt.Sprintf("targets.%d.%s", i, name) }
		n := i + 1
		if t.ID == "" || usedIDs[t.ID] {
			t.ID = NewTargetID()
		} else if len(t.ID) < 6 || len(t.ID) > 12 || !isBase62(t.ID) {
			fe.add(f("id"), fmt.Sprintf("Target %d: id must be 6–12 letters or digits.", n))
		}
		usedIDs[t.ID] = true
		if t.Kind == "" {
			t.Kind = KindModel
			if t.ComboID != "" {
				t.Kind = KindCombo
			}
		}
		if t.Weight == nil {
			w := 1
			t.Weight = &w
		}
		if w := *t.Weight; w < 0 || w > 100 {
			fe.add(f("weight"), fmt.Sprintf("Target %d: weight must be a whole number from 0 to 100.", n))
		} else if w != 0 {
			allZero = false
		}
		if t.Label != nil && utf8.RuneCountInString(*t.Label) > 64 {
			fe.add(f("label"), fmt.Sprintf("Target %d: use at most 64 characters for the label.", n))
		}
		if t.Enabled == nil {
			on := true
			t.Enabled = &on
		}
		if len(t.Prompt) > 32*1024 {
			fe.add(f("prompt"), fmt.Sprintf("Target %d: the prompt may be at most 32 KiB.", n))
		}
		switch t.Kind {
		case KindModel:
			t.ComboID = ""
			p, ok := cat.Lookup(t.Provider)
			if t.Provider == "" || !ok {
				fe.add(f("provider"), fmt.Sprintf("Target %d: choose a provider.", n))
			} else {
				t.Provider = p.ID
			}
			if t.Model == "" || len(t.Model) > 256 || !utf8.ValidString(t.Model) || hasControl(t.Model) {
				fe.add(f("model"), fmt.Sprintf("Target %d: enter a model name (1–256 characters).", n))
			}
			if t.ConnectionID != nil && *t.ConnectionID == "" {
				t.ConnectionID = nil
			}
			if t.ConnectionID != nil {
				if prov, ok := connProvider[*t.ConnectionID]; !ok {
					fe.add(f("connectionId"), fmt.Sprintf("Target %d: that connection no longer exists.", n))
				} else if prov != t.Provider {
					fe.add(f("connectionId"), fmt.Sprintf("Target %d: that connection belongs to another provider.", n))
				}
			}
			key := t.Provider + "\x00" + t.Model + "\x00"
			if t.ConnectionID != nil {
				key += *t.ConnectionID
			}
			if j, dup := seenModel[key]; dup {
				fe.add(f("model"), fmt.Sprintf("Target %d repeats target %d (same provider, model and connection).", n, j+1))
			} else {
				seenModel[key] = i
			}
		case KindCombo:
			t.Provider, t.Model, t.ConnectionID = "", "", nil
			ref, ok := combosByID[t.ComboID]
			switch {
			case t.ComboID == "" || !ok:
				fe.add(f("comboId"), fmt.Sprintf("Target %d: choose an existing combo.", n))
			case t.ComboID == c.ID:
				fe.add(f("comboId"), fmt.Sprintf("Target %d: '%s' refers back to this combo.", n, ref.Name))
			}
			if j, dup := seenCombo[t.ComboID]; dup {
				fe.add(f("comboId"), fmt.Sprintf("Target %d repeats target %d (same combo).", n, j+1))
			} else {
				seenCombo[t.ComboID] = i
			}
		default:
			fe.add(f("kind"), fmt.Sprintf("Target %d: kind must be \"model\" or \"combo\".", n))
		}
		targets[i] = t
	}
	cfg, cfgErrs := ValidateComboConfig(in.Config)
	for k, v := range cfgErrs {
		fe.add("config."+k, v)
	}
	if len(fe) == 0 {
		// Reference graph: no cycles, static depth within maxComboDepth.
		trial := *c
		trial.Targets = targets
		combosByID[c.ID] = trial
		maxDepth := 3
		if v, ok := cfg["maxComboDepth"].(float64); ok {
			maxDepth = int(v)
		}
		for i, t := range targets {
			if t.Kind != KindCombo {
				continue
			}
			if name, cyc := reachesCombo(combosByID, t.ComboID, c.ID, map[string]bool{}); cyc {
				fe.add(fmt.Sprintf("targets.%d.comboId", i), fmt.Sprintf("Target %d: '%s' refers back to this combo.", i+1, name))
			}
		}
		if len(fe) == 0 {
			if d := comboDepth(combosByID, c.ID, map[string]bool{}); d > maxDepth {
				fe.add("targets", fmt.Sprintf("Nesting is deeper than the allowed %d levels.", maxDepth))
			}
		}
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if info.UsesWeights && allZero {
		warnings = append(warnings, "all weights are 0")
	}
	if i := strings.IndexByte(in.Name, '/'); i > 0 {
		if _, ok := cat.Lookup(in.Name[:i]); ok {
			warnings = append(warnings, fmt.Sprintf("name shadows model '%s'", in.Name))
		}
	} else {
		for _, p := range cat.All() {
			if contains(p.Models, in.Name) {
				warnings = append(warnings, fmt.Sprintf("name shadows model '%s'", in.Name))
				break
			}
		}
	}
	c.Name, c.Description, c.Strategy, c.Hidden = in.Name, in.Description, info.Name, in.Hidden
	c.Enabled = in.Enabled == nil || *in.Enabled
	c.Targets = targets
	c.Config = cfg
	return warnings, nil
}

// reachesCombo reports whether walking references from id leads to target.
func reachesCombo(byID map[string]Combo, id, target string, seen map[string]bool) (string, bool) {
	if id == target {
		return byID[id].Name, true
	}
	if seen[id] {
		return "", false
	}
	seen[id] = true
	for _, t := range byID[id].Targets {
		if t.Kind == KindCombo {
			if _, hit := reachesCombo(byID, t.ComboID, target, seen); hit {
				return byID[id].Name, true
			}
		}
	}
	return "", false
}

// comboDepth is the static nesting depth (a combo without references is 1).
func comboDepth(byID map[string]Combo, id string, path map[string]bool) int {
	if path[id] {
		return 0
	}
	path[id] = true
	defer delete(path, id)
	best := 0
	for _, t := range byID[id].Targets {
		if t.Kind == KindCombo {
			if d := comboDepth(byID, t.ComboID, path); d > best {
				best = d
			}
		}
	}
	return best + 1
}

func isBase62(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(base62, rune(s[i])) {
			return false
		}
	}
	return true
}

// configRule describes one combo config key (30-routing §3).
type configRule struct {
	kind   string // "int", "float", "bool", "floatPair", "windows", "string", "any", "stringList"
	lo, hi float64
}

var comboConfigSchema = map[string]configRule{
	"maxRetries": {"int", 0, 5}, "retryDelayMs": {"int", 0, 60000}, "targetTimeoutMs": {"int", 1000, 900000},
	"maxComboDepth": {"int", 1, 10}, "sessionSticky": {kind: "bool"},
	"stickyRoundRobinLimit": {"int", 1, 1000}, "stickyWeightedLimit": {"int", 1, 1000},
	"queue.concurrencyPerTarget": {"int", 0, 10000}, "queue.depth": {"int", 0, 100}, "queue.timeoutMs": {"int", 0, 300000},
	"resetAware.fiveHourWeight": {"float", 0, 1}, "resetAware.weeklyWeight": {"float", 0, 1},
	"resetAware.fiveHourMix": {"floatPair", 0, 1}, "resetAware.weeklyMix": {"floatPair", 0, 1},
	"resetAware.guardRemaining": {"float", 0, 0.5}, "resetAware.tieBand": {"float", 0, 0.5},
	"resetWindow.windows": {kind: "windows"}, "resetWindow.tieBandMs": {"int", 0, 86400000},
	"auto.weights": {kind: "weights"}, "auto.modePack": {kind: "modePack"},
	"auto.explorationRate": {"float", 0, 0.5}, "auto.tieBand": {"float", 0, 0.5},
	"cache.minPrefixBytes":          {"int", 0, 1048576},
	"contextRelay.handoffThreshold": {"float", 0.5, 0.95}, "contextRelay.handoffModel": {kind: "string"},
	"contextRelay.handoffProviders": {kind: "stringList"}, "contextRelay.maxMessagesForSummary": {"int", 4, 200},
	"contextRelay.handoffTtlMs": {"int", 60000, 86400000},
	"fusion.judge":              {kind: "judge"}, "fusion.minPanel": {"int", 1, 10},
	"fusion.stragglerGraceMs": {"int", 0, 120000}, "fusion.panelHardTimeoutMs": {"int", 1000, 600000},
}

var configGroups = map[string]bool{"queue": true, "resetAware": true, "resetWindow": true, "auto": true, "cache": true, "contextRelay": true, "fusion": true}

// AutoFactors are the auto strategy's factor names (30-routing §10.14);
// routing.AutoFactors returns the same list (a test keeps them equal).
var AutoFactors = []string{"quota", "health", "costInv", "latencyInv", "taskFit", "stability", "tierPriority",
	"contextAffinity", "connectionDensity", "resetWindowAffinity", "cacheAffinity"}

// ModePacks are the auto strategy's named weight presets.
var ModePacks = []string{"ship-fast", "cost-saver", "quality-first", "offline-friendly", "reliability-first"}

// ValidateComboConfig checks a combo config against the schema; unknown keys
// and out-of-range values are errors (never clamped). null values are
// dropped (they fall through to the defaults).
func ValidateComboConfig(cfg map[string]any) (map[string]any, map[string]string) {
	out := map[string]any{}
	errs := map[string]string{}
	for k, v := range cfg {
		if v == nil {
			continue
		}
		if configGroups[k] {
			sub, ok := v.(map[string]any)
			if !ok {
				errs[k] = "must be an object"
				continue
			}
			clean := map[string]any{}
			for sk, sv := range sub {
				if sv == nil {
					continue
				}
				path := k + "." + sk
				if msg := checkConfigValue(path, sv); msg != "" {
					errs[path] = msg
				} else {
					clean[sk] = sv
				}
			}
			if len(clean) > 0 {
				out[k] = clean
			}
			continue
		}
		if msg := checkConfigValue(k, v); msg != "" {
			errs[k] = msg
		} else {
			out[k] = v
		}
	}
	return out, errs
}

func checkConfigValue(path string, v any) string {
	rule, ok := comboConfigSchema[path]
	if !ok {
		return "unknown field"
	}
	rangeMsg := func() string {
		if rule.kind == "int" {
			return fmt.Sprintf("must be a whole number between %d and %d", int(rule.lo), int(rule.hi))
		}
		return fmt.Sprintf("must be a number between %g and %g", rule.lo, rule.hi)
	}
	num := func(x any) (float64, bool) { f, ok := x.(float64); return f, ok }
	switch rule.kind {
	case "int":
		f, ok := num(v)
		if !ok || f != math.Trunc(f) || f < rule.lo || f > rule.hi {
			return rangeMsg()
		}
	case "float":
		f, ok := num(v)
		if !ok || f < rule.lo || f > rule.hi {
			return rangeMsg()
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case "floatPair":
		arr, ok := v.([]any)
		if !ok || len(arr) != 2 {
			return "must be a pair of numbers between 0 and 1"
		}
		for _, x := range arr {
			if f, ok := num(x); !ok || f < 0 || f > 1 {
				return "must be a pair of numbers between 0 and 1"
			}
		}
	case "windows":
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			return "must be a non-empty list of 5h, daily, weekly, monthly"
		}
		for _, x := range arr {
			s, _ := x.(string)
			if !contains([]string{"5h", "daily", "weekly", "monthly"}, s) {
				return "must be a non-empty list of 5h, daily, weekly, monthly"
			}
		}
	case "weights":
		m, ok := v.(map[string]any)
		if !ok {
			return "must be an object of factor → number ≥ 0"
		}
		for k, x := range m {
			if !contains(AutoFactors, k) {
				return "unknown factor '" + k + "'; factors: " + strings.Join(AutoFactors, ", ")
			}
			if f, ok := num(x); !ok || f < 0 {
				return "must be an object of factor → number ≥ 0"
			}
		}
	case "modePack":
		s, _ := v.(string)
		if !contains(ModePacks, s) {
			return "must be one of " + strings.Join(ModePacks, ", ")
		}
	case "string":
		s, ok := v.(string)
		if !ok || s == "" || len(s) > 256 {
			return "must be a model name"
		}
	case "stringList":
		arr, ok := v.([]any)
		if !ok {
			return "must be a list of provider ids"
		}
		for _, x := range arr {
			if _, ok := x.(string); !ok {
				return "must be a list of provider ids"
			}
		}
	case "judge":
		m, ok := v.(map[string]any)
		if !ok {
			return `must be {"provider", "model"} or {"comboId"}`
		}
		_, hasCombo := m["comboId"].(string)
		_, hasProv := m["provider"].(string)
		_, hasModel := m["model"].(string)
		if !(hasCombo && len(m) == 1) && !(hasProv && hasModel && len(m) == 2) {
			return `must be {"provider", "model"} or {"comboId"}`
		}
	}
	return ""
}

// ConfigJSON encodes a combo config for storage.
func ConfigJSON(cfg map[string]any) string {
	if len(cfg) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(cfg)
	return string(b)
}
