package services

// ModelMeta is what routing knows about one (provider, model) beyond its
// name (30-routing §8.2): list prices in USD per 1M tokens and the context
// window in tokens. Zero values mean unknown.
type ModelMeta struct {
	InputPerMTok  float64
	OutputPerMTok float64
	ContextTokens int
}

// modelMeta is the built-in pricing and context table for the catalogue's
// well-known models, from the providers' public list prices. It feeds
// cost-optimized and context-optimized routing; a model missing here has
// unknown price and window and is ordered after the known ones, as the
// spec requires. Custom providers and passthrough models are unknown.
var modelMeta = map[string]ModelMeta{
	"openai/gpt-4o":                     {2.50, 10.00, 128000},
	"openai/gpt-4o-mini":                {0.15, 0.60, 128000},
	"openai/gpt-4.1":                    {2.00, 8.00, 1047576},
	"openai/gpt-4.1-mini":               {0.40, 1.60, 1047576},
	"openai/o3":                         {2.00, 8.00, 200000},
	"openai/o4-mini":                    {1.10, 4.40, 200000},
	"openai/gpt-5":                      {1.25, 10.00, 400000},
	"openai/gpt-5-mini":                 {0.25, 2.00, 400000},
	"anthropic/claude-sonnet-4":         {3.00, 15.00, 200000},
	"anthropic/claude-sonnet-4-5":       {3.00, 15.00, 200000},
	"anthropic/claude-opus-4":           {15.00, 75.00, 200000},
	"anthropic/claude-3-5-haiku-latest": {0.80, 4.00, 200000},
	"gemini/gemini-2.5-pro":             {1.25, 10.00, 1048576},
	"gemini/gemini-2.5-flash":           {0.30, 2.50, 1048576},
	"gemini/gemini-2.0-flash":           {0.10, 0.40, 1048576},
	"deepseek/deepseek-chat":            {0.27, 1.10, 128000},
	"deepseek/deepseek-reasoner":        {0.55, 2.19, 128000},
	"groq/llama-3.3-70b-versatile":      {0.59, 0.79, 131072},
	"groq/llama-3.1-8b-instant":         {0.05, 0.08, 131072},
	"mistral/mistral-large-latest":      {2.00, 6.00, 131072},
	"mistral/mistral-small-latest":      {0.20, 0.60, 131072},
	"mistral/codestral-latest":          {0.30, 0.90, 256000},
	"glm/glm-4.6":                       {0.60, 2.20, 200000},
	"glm/glm-4.5":                       {0.60, 2.20, 128000},
	"glm/glm-4.5-air":                   {0.20, 1.10, 128000},
}

// LookupModelMeta returns the built-in metadata of (provider, model).
func LookupModelMeta(provider, model string) (ModelMeta, bool) {
	m, ok := modelMeta[provider+"/"+model]
	return m, ok
}
