// Package netdev finds the local address an example program's device
// binds and opens it with the kernel UDP backend, as rdma-core's programs
// let the kernel pick the RDMA device from an address (rdma_bind_addr,
// rdma_resolve_addr) or take a named one.
package netdev
