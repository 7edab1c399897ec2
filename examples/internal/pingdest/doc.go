// Package pingdest is the out-of-band exchange of rdma-core's pingpong
// programs (ibv_rc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong): each side
// sends its QP's LID, QPN, first PSN and GID over TCP as one 52-byte
// string, and the client ends with "done". The examples pingpong and
// udpingpong share it, as rdma-core's programs share
// libibverbs/examples/pingpong.c (gid_to_wire_gid, wire_gid_to_gid).
package pingdest
