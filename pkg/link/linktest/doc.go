// Package linktest helps test link backends: it writes valid RoCE packets
// (RC SEND ONLY, with a payload derived from the PSN) into link buffers,
// checks them on arrival, and runs a send/receive exchange between two
// links. It is shared by the backends' own tests and the cross-backend
// suite in tests/link.
package linktest
