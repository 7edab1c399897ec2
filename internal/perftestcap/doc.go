// Package perftestcap extracts perftest's out-of-band TCP exchange from the
// reference captures of rxe (testdata/rxe-captures), so that tests can
// replay a real perftest peer byte for byte: pkg/perftest's message
// encoders and cmd/uroce-perf's per-test sequence of messages.
package perftestcap
