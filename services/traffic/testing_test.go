package traffic

// Helpers only the tests of this package use.

// String names an action in test failure messages.
func (a Action) String() string {
	switch a {
	case ActionDispatch:
		return "dispatch"
	case ActionWait:
		return "wait"
	case ActionReject:
		return "reject"
	}
	return "unknown"
}
