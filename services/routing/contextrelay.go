package routing

// NameContextRelay is the name of ContextRelay.
const NameContextRelay = "context-relay"

// ContextRelay orders like Priority (30-routing §10.4); its behaviour, the
// summary carried from a connection near the end of its quota to the next
// one, lives in the gateway's attempt loop.
type ContextRelay struct{}

var _ Strategy = ContextRelay{}

// Name returns "context-relay".
func (ContextRelay) Name() string { return NameContextRelay }

// Describe returns the builder line.
func (ContextRelay) Describe() string { return describe(NameContextRelay) }

// Order returns the configured order, unavailable entries last.
func (ContextRelay) Order(_ Request, entries []Entry) []Entry { return configured(entries) }
