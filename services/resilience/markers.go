package resilience

// Text markers of the classification pipeline (20-resilience §1.1–§1.3).
//
// Every marker is lower case and matched as a substring of the lower-cased
// haystack of its stage: message + " " + body for restatements and rules,
// code + type + message + body for the built-in classifier. Each constant has
// one test row; adding a marker is adding a constant, a slice entry and a row.

// Ban markers (classifier row 2): 4xx → forbidden, terminal banned.
const (
	markerAccountDeactivatedCode = "account_deactivated"
	markerAccountDeactivated     = "account has been deactivated"
	markerAccountDisabled        = "account has been disabled"
	markerAccountSuspended       = "account has been suspended"
	markerAccountBanned          = "your account has been banned"
	markerOrganizationDisabled   = "organization has been disabled"
)

// Credit markers (classifier row 3): credits_exhausted.
const (
	markerInsufficientQuotaCode = "insufficient_quota"
	markerBillingHardLimitCode  = "billing_hard_limit_reached"
	markerInsufficientBalance   = "insufficient balance"
	markerInsufficientCredits   = "insufficient credits"
	markerCreditBalanceTooLow   = "credit balance is too low"
	markerOutOfCredits          = "out of credits"
	markerPaymentRequired       = "payment required"
)

// Retired-model markers (classifier row 4): 404/410 → not_found, retired_model.
const (
	markerNoLongerAvailable = "no longer available"
	markerHasBeenDeprecated = "has been deprecated"
	markerEndOfLife         = "end of life"
	markerRetired           = "retired"
)

// Context markers (classifier row 5): 4xx → caller_error, context_length.
const (
	markerContextLengthExceededCode = "context_length_exceeded"
	markerMaximumContextLength      = "maximum context length"
	markerPromptTooLong             = "prompt is too long"
	markerTooManyTokens             = "too many tokens"
	markerContextWindow             = "context window"
)

// Tool-limit markers (classifier row 6): 400/413/422 → caller_error, tool_limit.
// markerArrayAboveMaxLengthCode counts only when the error's param is tools;
// "maximum of N tools" is matched by toolsMaximumOfRe.
const (
	markerArrayAboveMaxLengthCode = "array_above_max_length"
	markerTooManyTools            = "too many tools"
	markerToolsArrayTooLong       = "tools: array too long"
	// markerToolsArrayTooLongQuoted is OpenAI's spelling: "Invalid 'tools': array too long".
	markerToolsArrayTooLongQuoted = "'tools': array too long"
	markerMaximumOfNTools         = `maximum of \d+ tools`
)

// Model-access markers (classifier row 7): 400/403/404/422 → not_found.
const (
	markerModelNotFoundCode      = "model_not_found"
	markerDeploymentNotFoundCode = "deployment_not_found"
	markerNotFoundErrorType      = "not_found_error"
	markerDoesNotExist           = "does not exist"
	markerModelNotAvailable      = "model is not available"
	markerNoAccessToModel        = "do not have access to the model"
)

// Daily-quota markers (classifier row 8): 400/403/429 → quota_exhausted, daily_quota.
const (
	markerTryAgainTomorrow = "try again tomorrow"
	markerDailyQuota       = "daily quota"
	markerTodaysQuota      = "today's quota"
	markerPerDay           = "per day"
	markerTPD              = "tpd"
)

// Quota markers (classifier row 9): 400/403/429 → quota_exhausted.
const (
	markerQuotaExceeded         = "quota exceeded"
	markerQuotaExhausted        = "quota exhausted"
	markerUsageLimit            = "usage limit"
	markerLimitReached          = "limit reached"
	markerExhaustedYourCapacity = "exhausted your capacity"
	markerFreeTier              = "free tier"
	markerWeeklyLimit           = "weekly limit"
)

// Overload markers (classifier row 10): 429/500/502/503 → model_capacity.
const (
	markerOverloaded     = "overloaded"
	markerOverCapacity   = "over capacity"
	markerCapacity       = "capacity"
	markerModelIsLoading = "model is loading"
)

// Rate markers (classifier row 12): 400/422 → rate_limit.
const (
	markerRateLimit       = "rate limit"
	markerTooManyRequests = "too many requests"
	markerHighFrequency   = "high frequency"
	markerFrequentCN      = "频繁" // "too frequent"
	markerFrequencyCN     = "频率" // "frequency"
)

// Rejection markers (classifier row 14): 403 → request_rejected.
const (
	markerRequestNotAllowed   = "request not allowed"
	markerNotAllowedToRequest = "not allowed to make this request"
)

// Restatement markers (§1.1) of the new-api family.
const (
	markerQuotaInsufficientCN = "额度不足" // "insufficient quota"
	markerNoAccessCN          = "无权访问" // "no access"
)

// Built-in rule markers (§1.2).
const (
	markerEndpointUnavailable    = "endpoint is unavailable"
	markerMonthlyUsageLimit      = "monthly usage limit reached"
	markerOrganizationQuotaCode  = "organization_quota_exceeded"
	markerAccountQuotaCode       = "account_quota_exceeded"
	markerPlanLimitReachedCode   = "plan_limit_reached"
	markerUpstreamModelUnavail   = "upstream request failed: model is unavailable."
	markerDailyFreeAllocation    = "daily free allocation"
	markerNoAccessToModelCN      = "无权访问模型" // "no access to this model"
	markerModelQuotaRemainingEq0 = "=0"
)

// Marker groups in the order the classifier checks them.
var (
	banMarkers = []string{markerAccountDeactivatedCode, markerAccountDeactivated,
		markerAccountDisabled, markerAccountSuspended, markerAccountBanned, markerOrganizationDisabled}
	creditMarkers = []string{markerInsufficientQuotaCode, markerBillingHardLimitCode,
		markerInsufficientBalance, markerInsufficientCredits, markerCreditBalanceTooLow,
		markerOutOfCredits, markerPaymentRequired}
	retiredMarkers = []string{markerNoLongerAvailable, markerHasBeenDeprecated, markerEndOfLife,
		markerRetired}
	contextMarkers = []string{markerContextLengthExceededCode, markerMaximumContextLength,
		markerPromptTooLong, markerTooManyTokens, markerContextWindow}
	toolLimitMarkers = []string{markerTooManyTools, markerToolsArrayTooLong,
		markerToolsArrayTooLongQuoted}
	modelAccessMarkers = []string{markerModelNotFoundCode, markerDeploymentNotFoundCode,
		markerNotFoundErrorType, markerDoesNotExist, markerModelNotAvailable, markerNoAccessToModel}
	dailyMarkers = []string{markerTryAgainTomorrow, markerDailyQuota, markerTodaysQuota,
		markerPerDay, markerTPD}
	quotaMarkers = []string{markerQuotaExceeded, markerQuotaExhausted, markerUsageLimit,
		markerLimitReached, markerExhaustedYourCapacity, markerFreeTier, markerWeeklyLimit}
	overloadMarkers = []string{markerOverloaded, markerOverCapacity, markerCapacity,
		markerModelIsLoading}
	rateMarkers = []string{markerRateLimit, markerTooManyRequests, markerHighFrequency,
		markerFrequentCN, markerFrequencyCN}
	rejectionMarkers = []string{markerRequestNotAllowed, markerNotAllowedToRequest}
)
