// Package layers checks the import rules of docs/architecture.md over the
// whole module, so that an import from a lower layer to a higher one, or
// a program reaching past verbs into qp, fails the tests instead of
// waiting for a reader to notice.
package layers
