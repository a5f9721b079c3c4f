// Package accounts chooses one connection (account) inside one provider:
// step 4 of 30-routing §11, the provider's fallback strategy. It owns the
// per-provider selection state that spec lists as in-memory and unpersisted —
// the account round-robin {lastId, consecutive} and the strict-random decks.
//
// Gates, lease-managed keys, session pins and LKGP preferences (§11 steps 1–3)
// are decided by the caller before a Selector is consulted; lastUsedAt is
// recorded by the caller when a dispatch starts and passed back in through
// Candidate.
//
// The package is standalone: it imports only the standard library and must
// not import switchyard/services, models, handlers or app.
package accounts
