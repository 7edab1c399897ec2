// labverbs.h: what the lab's C programs (flushatomic.c, mwinv.c, ucimm.c)
// share: errors, the line protocol with the uroce program over TCP,
// completions checked one by one, and the exchange that connects one RC
// or UC QP to the peer's. Each program sets prog to its name first.
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

static const char *prog;

static void die(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, f, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void timed_out(int sig)
{
	(void)sig;
	static const char msg[] = ": timed out\n";
	if (write(2, prog, strlen(prog)) < 0 || write(2, msg, sizeof msg - 1) < 0)
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

// open_device opens the RDMA device called name.
static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	if (!dev)
		die("no device %s", name);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

// peer is what the uroce program's line says of its side.
struct peer {
	unsigned qpn, psn, rkey;
	unsigned long long addr;
};

// connect_peer waits on TCP port for the uroce program, swaps the
// "QPN PSN GID ADDR RKEY" lines (ours for qp, buf and rkey, the GID at
// gidx), moves qp from INIT to RTS towards the peer, and swaps "rts":
// neither side sends before the other's QP is ready to receive, as a
// request that reaches a QP still in INIT is dropped.
static struct peer connect_peer(struct ibv_context *ctx, struct ibv_qp *qp, int gidx, int port, void *buf, uint32_t rkey)
{
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
	snprintf(line, sizeof line, "%06x %06x %s %016" PRIx64 " %08x\n", qp->qp_num, mypsn, hex, (uint64_t)(uintptr_t)buf, rkey);
	sendline(line);
	printf("local:  QPN %06x PSN %06x GID %s addr %p rkey %08x\n", qp->qp_num, mypsn, hex, buf, rkey);
	printf("remote: QPN %06x PSN %06x GID %s addr %llx rkey %08x\n", rqpn, rpsn, rgid, raddr, rrkey);

	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = rqpn,
		.rq_psn = rpsn,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = 12,
		.ah_attr = {.is_global = 1, .port_num = 1,
			    .grh = {.dgid = dgid, .sgid_index = gidx, .hop_limit = 64}},
	};
	// A UC QP has no reads, atomics, ACKs or RNR NAKs: the kernel
	// refuses those attributes for it (IBA 11.2.4.2's UC columns).
	int uc = qp->qp_type == IBV_QPT_UC;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (!uc)
		rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(qp, &a, rtr))
		die("modify QP to RTR: %s", strerror(errno));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				 .sq_psn = mypsn, .max_rd_atomic = 16};
	int rts = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!uc)
		rts |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(qp, &a, rts))
		die("modify QP to RTS: %s", strerror(errno));
	sendline("rts\n");
	expect("rts");
	return (struct peer){.qpn = rqpn, .psn = rpsn, .rkey = rrkey, .addr = raddr};
}
