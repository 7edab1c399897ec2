// Package rc tests reliable-connected transport through the public verbs
// API between two network namespaces joined by a veth pair: a device in
// each on the kernel UDP backend, every operation at the sizes where
// segmentation changes (0, 1, MTU-1, MTU, MTU+1, 64 KiB), data checked
// byte for byte on the far side.
package rc
