package models

// Rows of the resilience state tables (20-resilience §15). They are exported
// so the repositories that give them behaviour can live beside them; until
// then the drift test keeps them in step with the schema.

// BreakerRow is one provider circuit breaker (domain_circuit_breakers).
type BreakerRow struct {
	Name              string `gorm:"primaryKey"`
	Profile           string
	State             string
	FailureCount      int
	OpenCycleCount    int
	OpenedAt          *int64
	LastFailureAt     *int64
	LastFailureReason string
	Generation        int64
	UpdatedAt         int64 `gorm:"autoUpdateTime:false"`
	HalfOpenInFlight  int
	ProbeUntil        *int64
}

func (BreakerRow) TableName() string { return "domain_circuit_breakers" }

// ModelLockoutRow is one model lockout and its escalation memory.
type ModelLockoutRow struct {
	Provider       string `gorm:"primaryKey"`
	ConnectionID   string `gorm:"primaryKey"`
	KeyShape       string `gorm:"primaryKey"`
	LockKey        string `gorm:"primaryKey"`
	Model          string
	Reason         string
	LastStatus     int
	FailureCount   int
	LockedAt       int64
	Until          int64
	LastFailureAt  int64
	LastCooldownMs int64
	Version        int64
}

func (ModelLockoutRow) TableName() string { return "model_lockouts" }

// AffinityPinRow pins a client session to a connection.
type AffinityPinRow struct {
	PinID        string `gorm:"primaryKey"`
	APIKeyID     string `gorm:"column:api_key_id"`
	Provider     string
	ConnectionID string
	CreatedAt    int64 `gorm:"autoCreateTime:false"`
	LastUsedAt   int64
	ExpiresAt    int64
}

func (AffinityPinRow) TableName() string { return "session_affinity_pins" }

// LeaseRow is an exclusive session lease.
type LeaseRow struct {
	ID           string `gorm:"primaryKey"`
	OwnerHash    string
	APIKeyID     string `gorm:"column:api_key_id"`
	Provider     string
	ConnectionID string
	Generation   int64
	State        string
	AcquiredAt   int64
	RenewedAt    int64
	ExpiresAt    int64
	EndedAt      *int64
	EndReason    *string
}

func (LeaseRow) TableName() string { return "exclusive_leases" }

// LearnedRateLimitRow is a limit learned from upstream x-ratelimit-* headers.
type LearnedRateLimitRow struct {
	LimiterKey    string `gorm:"primaryKey"`
	LimitRequests *int64
	Remaining     *int64
	ResetAt       *int64
	MinTimeMs     *int64
	UpdatedAt     int64 `gorm:"autoUpdateTime:false"`
}

func (LearnedRateLimitRow) TableName() string { return "learned_rate_limits" }

// LearnedToolLimitRow is a tool-count limit learned from an upstream rejection.
type LearnedToolLimitRow struct {
	Provider  string `gorm:"primaryKey"`
	Model     string `gorm:"primaryKey"`
	MaxTools  int
	Source    string
	LearnedAt int64
	ExpiresAt int64
}

func (LearnedToolLimitRow) TableName() string { return "learned_tool_limits" }

// QuotaWindowRow is the latest snapshot of one quota window of a connection.
type QuotaWindowRow struct {
	ConnectionID string `gorm:"primaryKey"`
	Window       string `gorm:"primaryKey"`
	UsedPercent  *float64
	Remaining    *int64
	LimitValue   *int64
	ResetAt      *int64
	Source       string
	ObservedAt   int64
}

func (QuotaWindowRow) TableName() string { return "quota_windows" }
