package services

import (
	"context"
	"fmt"
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
	Config      ComboConfig
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
	Config      map[string]any `json:"config"` // as sent; DecodeComboConfig types it
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
	store     ComboStore
	conns     ConnectionStore
	clock     Clock
	catalogue func() *Catalogue
	feed      ChangeFeed
}

// NewCombos builds the service; it publishes every change on feed (nil =
// nobody caches combos).
func NewCombos(store ComboStore, conns ConnectionStore, clock Clock, cat *CatalogueHolder, feed ChangeFeed) *Combos {
	return &Combos{store: store, conns: conns, clock: clock, catalogue: cat.Get, feed: feed}
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
	cat := s.catalogue()
	info := checkComboHead(fe, in, c.ID, all)
	conns, err := s.conns.ListConnections(ctx)
	if err != nil {
		return nil, err
	}
	tc := targetCheck{fe: fe, cat: cat, self: c.ID, connProvider: map[string]string{}, combos: map[string]Combo{},
		usedIDs: map[string]bool{}, seenModel: map[string]int{}, seenCombo: map[string]int{}, allZero: true}
	for _, cn := range conns {
		tc.connProvider[cn.ID] = cn.Provider
	}
	for _, o := range all {
		tc.combos[o.ID] = o
	}
	targets := make([]Target, len(in.Targets))
	for i, t := range in.Targets {
		targets[i] = tc.check(i, t)
	}
	cfg, cfgErrs := DecodeComboConfig(in.Config)
	for k, v := range cfgErrs {
		fe.add("config."+k, v)
	}
	if len(fe) == 0 {
		checkComboGraph(fe, *c, targets, tc.combos, cfg)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	warnings := comboWarnings(cat, in.Name, info.UsesWeights && tc.allZero)
	c.Name, c.Description, c.Strategy, c.Hidden = in.Name, in.Description, info.Name, in.Hidden
	c.Enabled = in.Enabled == nil || *in.Enabled
	c.Targets = targets
	c.Config = cfg
	return warnings, nil
}

// checkComboHead checks name, description, strategy and the target count.
func checkComboHead(fe fieldErrors, in ComboInput, selfID string, all []Combo) StrategyInfo {
	if msg := validateComboName(in.Name, selfID, all); msg != "" {
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
	return info
}

// targetCheck validates a combo's targets in order, remembering what the
// earlier ones used (ids, model and combo references) to refuse repeats.
type targetCheck struct {
	fe           fieldErrors
	cat          *Catalogue
	self         string
	connProvider map[string]string
	combos       map[string]Combo
	usedIDs      map[string]bool
	seenModel    map[string]int
	seenCombo    map[string]int
	allZero      bool
}

// check validates target i and returns it with defaults filled in; stable
// ids of existing targets are kept, missing ones generated.
func (tc *targetCheck) check(i int, t Target) Target {
	f := func(name string) string { return fmt.Sprintf("targets.%d.%s", i, name) }
	n := i + 1
	if t.ID == "" || tc.usedIDs[t.ID] {
		t.ID = NewTargetID()
	} else if len(t.ID) < 6 || len(t.ID) > 12 || !isBase62(t.ID) {
		tc.fe.add(f("id"), fmt.Sprintf("Target %d: id must be 6–12 letters or digits.", n))
	}
	tc.usedIDs[t.ID] = true
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
		tc.fe.add(f("weight"), fmt.Sprintf("Target %d: weight must be a whole number from 0 to 100.", n))
	} else if w != 0 {
		tc.allZero = false
	}
	if t.Label != nil && utf8.RuneCountInString(*t.Label) > 64 {
		tc.fe.add(f("label"), fmt.Sprintf("Target %d: use at most 64 characters for the label.", n))
	}
	if t.Enabled == nil {
		on := true
		t.Enabled = &on
	}
	if len(t.Prompt) > 32*1024 {
		tc.fe.add(f("prompt"), fmt.Sprintf("Target %d: the prompt may be at most 32 KiB.", n))
	}
	switch t.Kind {
	case KindModel:
		tc.checkModel(i, &t)
	case KindCombo:
		tc.checkComboRef(i, &t)
	default:
		tc.fe.add(f("kind"), fmt.Sprintf("Target %d: kind must be \"model\" or \"combo\".", n))
	}
	return t
}

func (tc *targetCheck) checkModel(i int, t *Target) {
	f := func(name string) string { return fmt.Sprintf("targets.%d.%s", i, name) }
	n := i + 1
	t.ComboID = ""
	p, ok := tc.cat.Lookup(t.Provider)
	if t.Provider == "" || !ok {
		tc.fe.add(f("provider"), fmt.Sprintf("Target %d: choose a provider.", n))
	} else {
		t.Provider = p.ID
	}
	if t.Model == "" || len(t.Model) > 256 || !utf8.ValidString(t.Model) || hasControl(t.Model) {
		tc.fe.add(f("model"), fmt.Sprintf("Target %d: enter a model name (1–256 characters).", n))
	}
	if t.ConnectionID != nil && *t.ConnectionID == "" {
		t.ConnectionID = nil
	}
	if t.ConnectionID != nil {
		if prov, ok := tc.connProvider[*t.ConnectionID]; !ok {
			tc.fe.add(f("connectionId"), fmt.Sprintf("Target %d: that connection no longer exists.", n))
		} else if prov != t.Provider {
			tc.fe.add(f("connectionId"), fmt.Sprintf("Target %d: that connection belongs to another provider.", n))
		}
	}
	key := t.Provider + "\x00" + t.Model + "\x00"
	if t.ConnectionID != nil {
		key += *t.ConnectionID
	}
	if j, dup := tc.seenModel[key]; dup {
		tc.fe.add(f("model"), fmt.Sprintf("Target %d repeats target %d (same provider, model and connection).", n, j+1))
	} else {
		tc.seenModel[key] = i
	}
}

func (tc *targetCheck) checkComboRef(i int, t *Target) {
	field, n := fmt.Sprintf("targets.%d.comboId", i), i+1
	t.Provider, t.Model, t.ConnectionID = "", "", nil
	ref, ok := tc.combos[t.ComboID]
	switch {
	case t.ComboID == "" || !ok:
		tc.fe.add(field, fmt.Sprintf("Target %d: choose an existing combo.", n))
	case t.ComboID == tc.self:
		tc.fe.add(field, fmt.Sprintf("Target %d: '%s' refers back to this combo.", n, ref.Name))
	}
	if j, dup := tc.seenCombo[t.ComboID]; dup {
		tc.fe.add(field, fmt.Sprintf("Target %d repeats target %d (same combo).", n, j+1))
	} else {
		tc.seenCombo[t.ComboID] = i
	}
}

// checkComboGraph refuses reference cycles and static nesting deeper than
// maxComboDepth (default 3).
func checkComboGraph(fe fieldErrors, c Combo, targets []Target, combosByID map[string]Combo, cfg ComboConfig) {
	c.Targets = targets
	combosByID[c.ID] = c
	maxDepth := 3
	if cfg.MaxComboDepth != nil {
		maxDepth = *cfg.MaxComboDepth
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

// comboWarnings are the non-blocking notes of a save.
func comboWarnings(cat *Catalogue, name string, allWeightsZero bool) []string {
	var warnings []string
	if allWeightsZero {
		warnings = append(warnings, "all weights are 0")
	}
	if i := strings.IndexByte(name, '/'); i > 0 {
		if _, ok := cat.Lookup(name[:i]); ok {
			warnings = append(warnings, fmt.Sprintf("name shadows model '%s'", name))
		}
	} else {
		for _, p := range cat.All() {
			if contains(p.Models, name) {
				warnings = append(warnings, fmt.Sprintf("name shadows model '%s'", name))
				break
			}
		}
	}
	return warnings
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
