// Package xdp is an AF_XDP socket: a UMEM and its four rings, written
// directly over golang.org/x/sys/unix.
//
// # How data moves
//
// The UMEM is one mmap'd region shared with the kernel, cut into frames
// ("chunks") of FrameSize bytes. Frames are named by their byte offset in
// the UMEM. Four single-producer single-consumer rings, each mmap'd from the
// socket, pass those offsets between the process and the kernel:
//
//   - Fill (process → kernel): empty frames the kernel may receive into.
//   - RX (kernel → process): descriptors {addr, len, options} of received
//     frames; the frame is the process's until it goes back on Fill.
//   - TX (process → kernel): descriptors of frames to transmit.
//   - Completion (kernel → process): offsets of transmitted frames, which
//     are the process's again.
//
// Each ring has a producer and a consumer index in shared memory. The
// producer writes entries and then stores its index; the consumer loads the
// producer index and then reads entries (sync/atomic loads and stores give
// the acquire/release order the kernel's smp_load_acquire and
// smp_store_release pair with). Both sides keep cached copies of the other
// side's index and only touch shared memory when the cache runs dry, as
// libxdp and gVisor do. Sizes are powers of two; indexes wrap freely and are
// masked.
//
// A frame larger than one chunk (multi-buffer, bound with XDP_USE_SG) is a
// chain of descriptors, every one but the last carrying XDP_PKT_CONTD in its
// options, on RX and on TX alike. Without XDP_USE_SG the kernel silently
// drops received frames that do not fit one chunk.
//
// With XDP_USE_NEED_WAKEUP the kernel sets a flag in a ring when it needs a
// system call to make progress (sendto for TX, recvfrom or poll for Fill);
// NeedWakeup reports it so callers only make the call when it is required.
// In copy mode TX always needs one: the kernel transmits in the sendto call.
//
// # Modes
//
// Bind tries zero-copy (the driver DMAs into the UMEM) and falls back to
// copy mode (the kernel copies between its buffers and the UMEM), and says
// which one it got. veth supports native XDP in copy mode only. Busy polling
// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET) is enabled when
// asked and the kernel accepts it; the socket then drives the device's NAPI
// from recvfrom/sendto instead of waiting for softirqs.
//
// # Concurrency
//
// Rings and sockets are not thread-safe: one owner (one goroutine at a time)
// drives a socket, as the ring protocol has one producer and one consumer.
//
// Why this package rather than an existing AF_XDP library: docs/links.md.
package xdp
