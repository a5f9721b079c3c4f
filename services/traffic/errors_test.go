package traffic_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"switchyard/services/traffic"
)

// localLimitError is the classifier's view (services/resilience.LocalLimitError).
type localLimitError interface {
	error
	LocalLimit() string
}

func TestLimitError(t *testing.T) {
	tests := []struct {
		err        *traffic.LimitError
		status     int
		retryAfter int
	}{
		{&traffic.LimitError{Code: traffic.CodeQueueFull}, 429, 1},
		{&traffic.LimitError{Code: traffic.CodeSlotsBusy, RetryAfter: time.Second}, 429, 1},
		{&traffic.LimitError{Code: traffic.CodeQueueTimeout, RetryAfter: 1500 * time.Millisecond}, 503, 2},
		{&traffic.LimitError{Code: traffic.CodeExecutionTimeout, RetryAfter: 90 * time.Second}, 504, 60},
		{&traffic.LimitError{Code: traffic.CodeQueueFull, Status: 503, RetryAfter: -time.Second}, 503, 1},
	}
	for _, tc := range tests {
		t.Run(tc.err.Code, func(t *testing.T) {
			if got := tc.err.HTTPStatus(); got != tc.status {
				t.Errorf("HTTPStatus = %d, want %d", got, tc.status)
			}
			if got := tc.err.RetryAfterSeconds(); got != tc.retryAfter {
				t.Errorf("RetryAfterSeconds = %d, want %d", got, tc.retryAfter)
			}
			var le localLimitError
			if !errors.As(fmt.Errorf("wrapped: %w", tc.err), &le) || le.LocalLimit() != tc.err.Code {
				t.Errorf("wrapped error not recognised as a local limit %q", tc.err.Code)
			}
		})
	}
}

func TestQueueKey(t *testing.T) {
	if got := traffic.QueueKey("openai", "c_7", ""); got != "openai:c_7" {
		t.Errorf("QueueKey = %q", got)
	}
	if got := traffic.QueueKey("ollama", "c_1", "llama3:8b"); got != "ollama:c_1:llama3:8b" {
		t.Errorf("QueueKey with model = %q", got)
	}
}
