package views

import (
	"sort"
	"time"

	"switchyard/services"
)

// Settings → Account (50-dashboard §6.11).

// AccountPageVM is the account page.
type AccountPageVM struct {
	Password PasswordFormVM
	Sessions SessionsListVM
}

// PasswordFormVM is the change-password form; values are never echoed.
type PasswordFormVM struct {
	Errors FieldErrors
}

// Focus is the first invalid field.
func (vm PasswordFormVM) Focus() string {
	return firstInvalid([]string{"current", "new", "confirm"}, vm.Errors)
}

// SessionsListVM is the sessions table.
type SessionsListVM struct {
	Rows    []SessionRowVM
	Confirm *ConfirmVM
	OOB     bool
}

// Others counts the sessions besides this one.
func (vm SessionsListVM) Others() int {
	n := 0
	for _, r := range vm.Rows {
		if !r.Current {
			n++
		}
	}
	return n
}

// SessionRowVM is one admin session.
type SessionRowVM struct {
	IDHash    string
	Created   *TimeVM
	LastSeen  *TimeVM
	IP        string
	UserAgent string
	Current   bool
}

// NewSessionsListVM lists sessions, this one (currentHash) first, then the
// most recently seen.
func NewSessionsListVM(sessions []services.AdminSession, currentHash string, now time.Time) SessionsListVM {
	vm := SessionsListVM{}
	lastSeen := map[string]int64{}
	for _, s := range sessions {
		created, seen := s.CreatedAt, s.LastSeenAt
		vm.Rows = append(vm.Rows, SessionRowVM{IDHash: s.IDHash, Created: NewTimeVM(&created, now), LastSeen: NewTimeVM(&seen, now),
			IP: s.ClientIP, UserAgent: s.UserAgent, Current: s.IDHash == currentHash})
		lastSeen[s.IDHash] = seen.UnixMilli()
	}
	sortSessions(vm.Rows, lastSeen)
	return vm
}

// SessionsEndOthersConfirm is the confirmation of "Sign out all other sessions".
func SessionsEndOthersConfirm(others int) *ConfirmVM {
	line := "Every other browser signed in to this dashboard is signed out at once."
	if others == 1 {
		line = "The one other browser signed in to this dashboard is signed out at once."
	}
	return &ConfirmVM{RowKind: "sessions", ID: "others", Title: "Sign out all other sessions?",
		Lines: []string{line, "Management API keys are not affected."}, Action: "Sign out other sessions",
		Method: "post", URL: "/settings/account/sessions/end-others", Target: "#" + SessionsListID,
		Cancel: "/settings/account", Colspan: 5}
}

// sortSessions puts the current session first, then the most recently seen.
func sortSessions(rows []SessionRowVM, lastSeen map[string]int64) {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Current != rows[j].Current {
			return rows[i].Current
		}
		return lastSeen[rows[i].IDHash] > lastSeen[rows[j].IDHash]
	})
}
