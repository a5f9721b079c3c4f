package resilience

import "strings"

// Model keys of a lockout (20-resilience §7). A model is locked on a
// connection when any of its three keys is: the quota family it shares with
// sibling models, its base (the model without catalogue variant suffixes) and
// the exact id. Every key is trimmed and lower-cased, so "GPT-5 " and "gpt-5"
// share state.

// quotaFamilyRule maps models of one provider onto a shared quota family.
// The table is data: a provider whose models draw on one quota gets a row.
type quotaFamilyRule struct {
	provider string
	prefix   string // the base model starts with it ("" = any)
	contains string // and holds it ("" = anything)
	family   string
}

// quotaFamilies is checked in order; the first matching row wins.
// Codex meters every gpt-5* model of an account against one plan quota,
// except the Spark research preview, which has a quota of its own (the
// reference design's codex/spark scopes).
var quotaFamilies = []quotaFamilyRule{
	{provider: "codex", prefix: "gpt-5", contains: "spark", family: "codex-spark"},
	{provider: "codex", prefix: "gpt-5", family: "gpt-5"},
}

// QuotaFamily returns the quota-family lock key of model on provider (a
// canonical catalogue id): every gpt-5* model of a Codex connection shares
// the family "gpt-5"; a model of no family is its own family (ExactModel).
func QuotaFamily(provider, model string) string {
	base := BaseModel(model)
	for _, r := range quotaFamilies {
		if r.provider != provider {
			continue
		}
		if strings.HasPrefix(base, r.prefix) && strings.Contains(base, r.contains) {
			return r.family
		}
	}
	return ExactModel(model)
}

// BaseModel returns the base lock key of model: trimmed, lower-cased, with
// catalogue variant suffixes in brackets removed ("claude-x[1m]" → "claude-x").
func BaseModel(model string) string {
	m := ExactModel(model)
	for strings.HasSuffix(m, "]") {
		i := strings.LastIndexByte(m, '[')
		if i <= 0 {
			break
		}
		m = strings.TrimSpace(m[:i])
	}
	return m
}

// ExactModel returns the exact lock key of model: trimmed and lower-cased.
func ExactModel(model string) string {
	return strings.ToLower(strings.TrimSpace(model))
}

// ModelLockKey returns the lock key of model for one shape.
func ModelLockKey(shape LockShape, provider, model string) string {
	switch shape {
	case ShapeFamily:
		return QuotaFamily(provider, model)
	case ShapeBase:
		return BaseModel(model)
	default:
		return ExactModel(model)
	}
}

// LockKeysFor returns the three keys (family, base, exact) that lock model on
// one connection.
// ModelKeys are a model's three lock keys (family, base, exact), computed
// once per request rather than once per connection checked.
type ModelKeys struct{ Family, Base, Exact string }

// KeysForModel computes the lock keys of a model of provider.
func KeysForModel(provider, model string) ModelKeys {
	return ModelKeys{Family: QuotaFamily(provider, model), Base: BaseModel(model), Exact: ExactModel(model)}
}

// lockKeys are the three keys of ModelKeys on one connection.
func (m ModelKeys) lockKeys(provider, connectionID string) [3]LockKey {
	return [3]LockKey{
		{Provider: provider, ConnectionID: connectionID, Shape: ShapeFamily, Key: m.Family},
		{Provider: provider, ConnectionID: connectionID, Shape: ShapeBase, Key: m.Base},
		{Provider: provider, ConnectionID: connectionID, Shape: ShapeExact, Key: m.Exact},
	}
}

func LockKeysFor(provider, connectionID, model string) [3]LockKey {
	return [3]LockKey{
		{Provider: provider, ConnectionID: connectionID, Shape: ShapeFamily, Key: QuotaFamily(provider, model)},
		{Provider: provider, ConnectionID: connectionID, Shape: ShapeBase, Key: BaseModel(model)},
		{Provider: provider, ConnectionID: connectionID, Shape: ShapeExact, Key: ExactModel(model)},
	}
}

// LockShapeForStatus is the shape a status locks when no rule set one:
// 429, 403 and 402 lock the quota family, 404 the base model, anything else
// (5xx, a synthetic 502) the exact model.
func LockShapeForStatus(status int) LockShape {
	switch status {
	case 429, 403, 402:
		return ShapeFamily
	case 404:
		return ShapeBase
	default:
		return ShapeExact
	}
}
