// Package sock is the part of a link over one kernel socket that the udp
// and afpacket backends share: the buffer pool, a recvmmsg batch whose
// slots hold posted buffers, a sendmmsg batch and its retry loop, the
// counters, and the Waiter that fences Close against the owner.
//
// A backend embeds a Conn (as a named field, so none of it leaks into its
// API) and supplies the two things that differ: stage, which writes a
// packet's lower headers and ICRC and points a transmit slot at it, and
// accept, which checks a received datagram and fills its Packet. Dst
// makes the checks every stage starts with, and returns their errors
// built once with the backend's name.
//
// Send. Packets go in runs of one batch. Each is staged or dropped (its
// error kept if first); the staged ones go out with sendmmsg. A message
// the kernel refuses (EMSGSIZE, ENETUNREACH) is dropped and the rest
// retried; when the socket buffer is full the owner waits briefly for room
// and drops the rest if none comes.
//
// Recv. A buffer is posted in every slot that lacks one, recvmmsg fills as
// many as have arrived, and each accepted datagram's buffer leaves its slot
// for the caller; a rejected one stays posted for the next call. How many
// messages a call asks for follows the traffic (one for a ping-pong, the
// whole batch under a backlog), since asking for more than are queued
// costs the kernel one more try per call.
package sock
