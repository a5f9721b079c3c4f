package accounts

// Helpers only the tests of this package use.

// Strategies lists the accepted names: fill-first, round-robin, p2c, random,
// least-used, strict-random. The caller owns the returned slice.
func Strategies() []string {
	return []string{FillFirst, RoundRobin, P2C, Random, LeastUsed, StrictRandom}
}
