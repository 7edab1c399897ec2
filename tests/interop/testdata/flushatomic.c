// flushatomic: RDMA FLUSH and ATOMIC WRITE (IBA 1.5) on rxe, facing the
// uroce program of tests/interop/internal/flushatomic over one RC QP.
//
// It listens on a TCP port; the peer connects and the two swap one line
// each, "QPN PSN GID ADDR RKEY" in hex (the GID as 32 hex digits of its
// 16 bytes), then both move their QP to RTS and say "rts". As the
// requester it posts, for each of ROUNDS rounds, N signaled ATOMIC
// WRITEs of value(round, k) to the peer's ADDR + 8k and, with -flush, a
// FLUSH of that range and a FLUSH of the whole region; it checks every
// completion (status, opcode, order) and sends "done". With -neg it then
// posts an ATOMIC WRITE to ADDR + 4 (misaligned: an invalid request, as
// rxe's RESPST_ERR_MISALIGNED_ATOMIC), prints its status and sends
// "neg"; it leaves once the peer says "bye". As the responder it waits
// for "done", prints its region's first 8N bytes, with -neg waits for
// "neg" and prints its QP's state, then says "bye".
//
// Built on the host against Debian 13's libibverbs-dev (rdma-core 56):
// ibv_wr_flush and ibv_wr_atomic_write are inline wrappers over
// ibv_qp_ex's function pointers, which rdma-core 56's rxe provider fills.
//
// -t SECONDS ends it with status 3 after that long.
//
// Usage: flushatomic [-p PORT] [-d DEV] [-g GIDX] [-r ROUNDS] [-n N]
//                    [-flush] [-neg] [-t SECONDS] requester|responder
#include "labverbs.h"

#define MR_SIZE 65536
#define MAX_N 1024

// value is what round r writes to slot k; the uroce program has the same.
static uint64_t value(int r, int k)
{
	return 0x0123456789abcdefULL ^ ((uint64_t)r << 56) ^ ((uint64_t)(k + 1) * 0x9e3779b97f4a7c15ULL);
}

int main(int argc, char **argv)
{
	prog = "flushatomic";
	int port = 18515, gidx = 1, rounds = 1, n = 64, neg = 0, flush = 0, timeout = 0, requester = -1;
	const char *devname = "rxe0";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-p") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			devname = argv[++i];
		else if (!strcmp(argv[i], "-g") && i + 1 < argc)
			gidx = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-neg"))
			neg = 1;
		else if (!strcmp(argv[i], "-flush"))
			flush = 1;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!strcmp(argv[i], "requester"))
			requester = 1;
		else if (!strcmp(argv[i], "responder"))
			requester = 0;
		else
			die("usage: flushatomic [-p PORT] [-d DEV] [-g GIDX] [-r ROUNDS] [-n N] [-flush] [-neg] [-t SECONDS] requester|responder");
	}
	if (requester < 0 || n < 1 || n > MAX_N || rounds < 1 || timeout < 0)
		die("bad arguments");
	if (timeout > 0) {
		signal(SIGALRM, timed_out);
		alarm(timeout);
	}

	struct ibv_context *ctx = open_device(devname);
	struct ibv_device_attr_ex dattr;
	memset(&dattr, 0, sizeof dattr);
	if (ibv_query_device_ex(ctx, NULL, &dattr))
		die("ibv_query_device_ex: %s", strerror(errno));
	// The kernel's IB_DEVICE_FLUSH_GLOBAL and IB_DEVICE_ATOMIC_WRITE
	// (include/rdma/ib_verbs.h), which verbs.h does not name.
	printf("device %s: flush global %s, atomic write %s\n", devname,
	       dattr.device_cap_flags_ex & (1ULL << 38) ? "yes" : "no",
	       dattr.device_cap_flags_ex & (1ULL << 40) ? "yes" : "no");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	uint8_t *buf = aligned_alloc(4096, MR_SIZE);
	memset(buf, 0, MR_SIZE);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_FLUSH_GLOBAL;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, MR_SIZE, access);
	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * MAX_N + 8, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = MAX_N + 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
	if (!qp)
		die("ibv_create_qp_ex (FLUSH, ATOMIC WRITE): %s", strerror(errno));
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = access | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT: %s", strerror(errno));
	struct peer peer = connect_peer(ctx, qp, gidx, port, buf, mr->rkey);

	if (requester) {
		uint64_t id = 0;
		for (int r = 0; r < rounds; r++) {
			uint64_t first = id;
			ibv_wr_start(qpx);
			for (int k = 0; k < n; k++) {
				uint64_t v = value(r, k);
				qpx->wr_id = id++;
				qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_atomic_write(qpx, peer.rkey, peer.addr + 8 * k, &v);
			}
			if (flush) {
				qpx->wr_id = id++;
				qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_flush(qpx, peer.rkey, peer.addr, 8 * n, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
				qpx->wr_id = id++;
				qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_flush(qpx, peer.rkey, peer.addr, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
			}
			int err = ibv_wr_complete(qpx);
			if (err)
				die("ibv_wr_complete: %s", strerror(err));
			for (int k = 0; k < n; k++)
				poll1(cq, first + k, IBV_WC_ATOMIC_WRITE, 1);
			if (flush) {
				poll1(cq, first + n, IBV_WC_FLUSH, 1);
				poll1(cq, first + n + 1, IBV_WC_FLUSH, 1);
			}
		}
		printf("requester: %d rounds: %d atomic writes (IBV_WC_ATOMIC_WRITE), %d flushes (IBV_WC_FLUSH), all IBV_WC_SUCCESS\n",
		       rounds, rounds * n, flush ? 2 * rounds : 0);
		fflush(stdout);
		sendline("done\n");
		if (neg) {
			uint64_t v = value(0, 0);
			ibv_wr_start(qpx);
			qpx->wr_id = id;
			qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_atomic_write(qpx, peer.rkey, peer.addr + 4, &v);
			int err = ibv_wr_complete(qpx);
			if (err)
				die("ibv_wr_complete: %s", strerror(err));
			struct ibv_wc wc = poll1(cq, id, IBV_WC_ATOMIC_WRITE, 0);
			printf("misaligned atomic write: status %s (%d)\n", ibv_wc_status_str(wc.status), wc.status);
			fflush(stdout);
			sendline("neg\n");
		}
		expect("bye");
	} else {
		expect("done");
		printf("mr:");
		for (int i = 0; i < 8 * n; i++)
			printf("%s%02x", i % 8 ? "" : " ", buf[i]);
		printf("\n");
		if (neg) {
			expect("neg");
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qia;
			if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia))
				die("ibv_query_qp: %s", strerror(errno));
			printf("qp state: %s\n", state_name(qa.qp_state));
		}
		fflush(stdout);
		sendline("bye\n");
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
