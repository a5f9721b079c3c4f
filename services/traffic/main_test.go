package traffic_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every waiter goroutine and timer must end with its request.
	goleak.VerifyTestMain(m)
}
