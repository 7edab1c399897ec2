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
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MR_SIZE 65536
#define MAX_N 1024

static void die(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	fprintf(stderr, "flushatomic: ");
	vfprintf(stderr, f, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

// value is what round r writes to slot k; the uroce program has the same.
static uint64_t value(int r, int k)
{
	return 0x0123456789abcdefULL ^ ((uint64_t)r << 56) ^ ((uint64_t)(k + 1) * 0x9e3779b97f4a7c15ULL);
}

static void timed_out(int sig)
{
	(void)sig;
	static const char msg[] = "flushatomic: timed out\n";
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(3);
	_exit(3);
}

static int sock_fd;
static FILE *sock_in;

static void sendline(const char *s)
{
	size_t n = strlen(s);
	if (write(sock_fd, s, n) != (ssize_t)n)
		die("write to peer: %s", strerror(errno));
}

static void expect(const char *want)
{
	char line[256];
	if (!fgets(line, sizeof line, sock_in))
		die("peer closed before %s", want);
	line[strcspn(line, "\n")] = 0;
	if (strcmp(line, want))
		die("peer said \"%s\", want %s", line, want);
}

static const char *state_name(enum ibv_qp_state s)
{
	switch (s) {
	case IBV_QPS_RESET: return "RESET";
	case IBV_QPS_INIT: return "INIT";
	case IBV_QPS_RTR: return "RTR";
	case IBV_QPS_RTS: return "RTS";
	case IBV_QPS_SQD: return "SQD";
	case IBV_QPS_SQE: return "SQE";
	case IBV_QPS_ERR: return "ERR";
	default: return "?";
	}
}

// poll waits for one completion and checks its opcode and wr_id.
static struct ibv_wc poll1(struct ibv_cq *cq, uint64_t id, enum ibv_wc_opcode op, int want_ok)
{
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (n < 0)
		die("ibv_poll_cq: %d", n);
	if (want_ok && wc.status != IBV_WC_SUCCESS)
		die("wr_id %" PRIu64 ": status %s (%d)", wc.wr_id, ibv_wc_status_str(wc.status), wc.status);
	if (wc.wr_id != id)
		die("completion for wr_id %" PRIu64 ", want %" PRIu64, wc.wr_id, id);
	if (wc.status == IBV_WC_SUCCESS && wc.opcode != op)
		die("wr_id %" PRIu64 ": opcode %d, want %d", wc.wr_id, wc.opcode, op);
	return wc;
}

int main(int argc, char **argv)
{
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

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev)
		die("no device %s", devname);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));
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
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("ibv_query_gid: %s", strerror(errno));

	// The exchange: the peer connects, sends its line, gets ours.
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (bind(ls, (struct sockaddr *)&sin, sizeof sin) || listen(ls, 1))
		die("listen on port %d: %s", port, strerror(errno));
	sock_fd = accept(ls, NULL, NULL);
	if (sock_fd < 0)
		die("accept: %s", strerror(errno));
	close(ls);
	sock_in = fdopen(dup(sock_fd), "r");
	char line[256];
	if (!fgets(line, sizeof line, sock_in))
		die("peer closed before its address");
	unsigned rqpn, rpsn, rrkey;
	unsigned long long raddr;
	char rgid[33];
	if (sscanf(line, "%x %x %32s %llx %x", &rqpn, &rpsn, rgid, &raddr, &rrkey) != 5 || strlen(rgid) != 32)
		die("bad address line %s", line);
	union ibv_gid dgid;
	for (int i = 0; i < 16; i++)
		sscanf(rgid + 2 * i, "%2hhx", &dgid.raw[i]);
	unsigned mypsn = (unsigned)getpid() & 0xffffff;
	char hex[33];
	for (int i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", gid.raw[i]);
	snprintf(line, sizeof line, "%06x %06x %s %016" PRIx64 " %08x\n", qp->qp_num, mypsn, hex, (uint64_t)(uintptr_t)buf, mr->rkey);
	sendline(line);
	printf("local:  QPN %06x PSN %06x GID %s addr %p rkey %08x\n", qp->qp_num, mypsn, hex, buf, mr->rkey);
	printf("remote: QPN %06x PSN %06x GID %s addr %llx rkey %08x\n", rqpn, rpsn, rgid, raddr, rrkey);

	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = rqpn,
		.rq_psn = rpsn,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = 12,
		.ah_attr = {.is_global = 1, .port_num = 1,
			    .grh = {.dgid = dgid, .sgid_index = gidx, .hop_limit = 64}},
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR: %s", strerror(errno));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				 .sq_psn = mypsn, .max_rd_atomic = 16};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS: %s", strerror(errno));
	// Neither side sends before the other's QP is ready to receive: a
	// request that reaches a QP still in INIT is dropped.
	sendline("rts\n");
	expect("rts");

	if (requester) {
		uint64_t id = 0;
		for (int r = 0; r < rounds; r++) {
			uint64_t first = id;
			ibv_wr_start(qpx);
			for (int k = 0; k < n; k++) {
				uint64_t v = value(r, k);
				qpx->wr_id = id++;
				qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_atomic_write(qpx, rrkey, raddr + 8 * k, &v);
			}
			if (flush) {
				qpx->wr_id = id++;
				qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_flush(qpx, rrkey, raddr, 8 * n, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
				qpx->wr_id = id++;
				qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_flush(qpx, rrkey, raddr, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
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
			ibv_wr_atomic_write(qpx, rrkey, raddr + 4, &v);
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
	ibv_free_device_list(list);
	return 0;
}
