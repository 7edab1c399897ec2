// Package netns gives tests throw-away network namespaces and veth pairs.
//
// Every namespace and interface it makes has a name unique to the test and
// the process (a hash of the test name, the pid and a counter, kept within
// the kernel's 15-byte IFNAMSIZ limit), so packages tested in parallel never
// collide, and every one is removed by t.Cleanup, even when the test fails.
// Tests that need it call RequireRoot first and are skipped, with a message
// saying why, when not run as root.
//
// Code runs inside a namespace through NS.Do, which switches a locked OS
// thread into the namespace and back. Sockets opened there stay in that
// namespace for their whole life, whichever goroutine uses them later, which
// is how a test opens a link "on the other side" of a veth pair. Netlink
// requests go through NS.Netlink, a handle bound to the namespace.
//
// Traffic is only ever sent inside namespaces made here (or on loopback).
package netns
