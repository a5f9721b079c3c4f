package models

// RequestLogRow is one /v1 request (10-gateway-api §11).
type RequestLogRow struct {
	ID                string `gorm:"primaryKey"`
	CreatedAt         int64  `gorm:"autoCreateTime:false"`
	ClientRequestID   string
	APIKeyID          string `gorm:"column:api_key_id"`
	APIKeyName        string `gorm:"column:api_key_name"`
	APIKeyPrefix      string `gorm:"column:api_key_prefix"`
	Method            string
	Endpoint          string
	InboundFormat     string
	Stream            bool
	StreamOutcome     string
	RequestedModel    string
	ResolvedKind      string
	ComboName         string
	ComboPath         string
	Strategy          string
	Provider          string
	Model             string
	ConnectionID      string
	UpstreamFormat    string
	Status            int
	Outcome           string
	ErrorCode         string
	Attempts          int
	AttemptLog        string
	PromptTokens      int64
	CachedTokens      int64
	CacheWriteTokens  int64
	CompletionTokens  int64
	ReasoningTokens   int64
	LatencyMs         int64
	TtftMs            *int64 `gorm:"column:ttft_ms"`
	UpstreamLatencyMs int64
	Warnings          string
	AffinityHit       bool
	LeaseManaged      bool
	EmergencyFallback bool
	BodiesCaptured    bool
	Bodies            *string
	// EstimatedCostNanoUSD is nil when no price was known (migration 0007).
	EstimatedCostNanoUSD *int64 `gorm:"column:estimated_cost_nano_usd"`
	// AttemptedConnections and AttemptedProviders are ",a,b," lists of what
	// the attempts were dispatched to (the connection and provider filters).
	AttemptedConnections string
	AttemptedProviders   string
	// Waits is the JSON array of the request's waits (migration 0008); nil
	// on rows written before the timeline was recorded.
	Waits *string
	// Skips is the JSON array of the targets the request passed over
	// (migration 0009); nil when it skipped none.
	Skips *string
	// EndedAt is when the request ended, CreatedAt + LatencyMs in Unix
	// milliseconds: the live tail's order (migration 0010); nil on rows
	// written before.
	EndedAt *int64 `gorm:"column:ended_at"`
}

func (RequestLogRow) TableName() string { return "request_logs" }
