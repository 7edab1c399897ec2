// mwinv: memory windows and SEND with invalidate (IBA 10.6.7, 9.4.4.1)
// on rxe, facing the uroce program of tests/interop/internal/mwinv over
// one RC QP.
//
// It listens on a TCP port; the peer connects and the two swap one line
// each, "QPN PSN GID ADDR RKEY" in hex, then both move their QP to RTS
// and say "rts". The owner fills its region's first 4 KiB with
// pattern(-1, i), binds a type 1 window over them for remote READ
// (ibv_bind_mw) and says "mw1 KEY ADDR". Then, for each of ROUNDS
// rounds, it binds a type 2 window over [ADDR+8192, +8192) for remote
// READ and WRITE with a BIND_MW work request under the window's next
// key, posts a receive and says "mw2 KEY ADDR"; it waits for "sent",
// then checks that the receive completed with the invalidation of that
// key (IBV_WC_WITH_INV, or the bit rxe sets instead: below) and that the
// window holds pattern(r, i) at offset 100 on. The user READs 4 KiB
// through the type 1 window and checks them; for each "mw2" it WRITEs
// 3000 bytes of pattern(r, i) through the window at offset 100, READs
// them back through it, SENDs 8 bytes with invalidate of the key behind
// a fence, checks each completion in order and says "sent". With -neg
// the user then WRITEs through the last, invalidated key, prints the
// status (rxe: IBV_WC_REM_ACCESS_ERR) and says "neg", and the owner
// prints its QP's state. The owner ends with "bye".
//
// Built on the host against Debian 13's libibverbs-dev (rdma-core 56).
//
// -t SECONDS ends it with status 3 after that long.
//
// Usage: mwinv [-p PORT] [-d DEV] [-g GIDX] [-r ROUNDS] [-neg]
//              [-t SECONDS] owner|user
#include "labverbs.h"

#define MR_SIZE 65536

// pattern is byte i of what round r writes through the window; the uroce
// program has the same. Round -1 is the type 1 window's region.
static uint8_t pattern(int r, int i)
{
	return (uint8_t)(r * 31 + i * 7 + 1);
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(qp, wr, &bad);
	if (err)
		die("ibv_post_send (opcode %d): %s", wr->opcode, strerror(err));
}

static void rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id, struct ibv_mr *mr, void *local,
		 uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				 .sg_list = &sge, .num_sge = 1, .wr.rdma = {.remote_addr = raddr, .rkey = rkey}};
	post(qp, &wr);
}

int main(int argc, char **argv)
{
	prog = "mwinv";
	int port = 18515, gidx = 1, rounds = 1, neg = 0, timeout = 0, owner = -1;
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
		else if (!strcmp(argv[i], "-neg"))
			neg = 1;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!strcmp(argv[i], "owner"))
			owner = 1;
		else if (!strcmp(argv[i], "user"))
			owner = 0;
		else
			die("usage: mwinv [-p PORT] [-d DEV] [-g GIDX] [-r ROUNDS] [-neg] [-t SECONDS] owner|user");
	}
	if (owner < 0 || rounds < 1 || timeout < 0)
		die("bad arguments");
	if (timeout > 0) {
		signal(SIGALRM, timed_out);
		alarm(timeout);
	}

	struct ibv_context *ctx = open_device(devname);
	struct ibv_device_attr dattr;
	if (ibv_query_device(ctx, &dattr))
		die("ibv_query_device: %s", strerror(errno));
	printf("device %s: max_mw %d, type 2B %s\n", devname, dattr.max_mw,
	       dattr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B ? "yes" : "no");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	uint8_t *buf = aligned_alloc(4096, MR_SIZE);
	memset(buf, 0, MR_SIZE);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, MR_SIZE, access);
	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT: %s", strerror(errno));
	connect_peer(ctx, qp, gidx, port, buf, mr->rkey);
	char line[256];

	if (owner) {
		for (int i = 0; i < 4096; i++)
			buf[i] = pattern(-1, i);
		struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		if (!mw1 || !mw2)
			die("ibv_alloc_mw: %s", strerror(errno));
		struct ibv_mw_bind b1 = {.wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = {.mr = mr, .addr = (uintptr_t)buf, .length = 4096,
						       .mw_access_flags = IBV_ACCESS_REMOTE_READ}};
		if (ibv_bind_mw(qp, mw1, &b1))
			die("ibv_bind_mw: %s", strerror(errno));
		poll1(cq, 1, IBV_WC_BIND_MW, 1);
		snprintf(line, sizeof line, "mw1 %08x %016" PRIx64 "\n", mw1->rkey, (uint64_t)(uintptr_t)buf);
		sendline(line);
		uint8_t *win = buf + 8192;
		for (int r = 0; r < rounds; r++) {
			uint32_t key = ibv_inc_rkey(mw2->rkey);
			struct ibv_send_wr wr = {.wr_id = 100 + r, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
						 .bind_mw = {.mw = mw2, .rkey = key,
							     .bind_info = {.mr = mr, .addr = (uintptr_t)win, .length = 8192,
									   .mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE}}};
			post(qp, &wr);
			poll1(cq, 100 + r, IBV_WC_BIND_MW, 1);
			mw2->rkey = key;
			struct ibv_sge rs = {.addr = (uintptr_t)(buf + 60000), .length = 64, .lkey = mr->lkey};
			struct ibv_recv_wr rw = {.wr_id = 1000 + r, .sg_list = &rs, .num_sge = 1}, *rbad;
			if (ibv_post_recv(qp, &rw, &rbad))
				die("ibv_post_recv: %s", strerror(errno));
			snprintf(line, sizeof line, "mw2 %08x %016" PRIx64 "\n", key, (uint64_t)(uintptr_t)win);
			sendline(line);
			expect("sent");
			struct ibv_wc wc = poll1(cq, 1000 + r, IBV_WC_RECV, 1);
			// rxe (6.12) writes the kernel's IB_WC_WITH_INVALIDATE
			// (1 << 2) into the user's wc_flags, where libibverbs
			// has IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV is 1 << 3.
			if (!(wc.wc_flags & (IBV_WC_WITH_INV | 1 << 2)) || wc.invalidated_rkey != key)
				die("round %d: receive flags %#x invalidated key %08x, want IBV_WC_WITH_INV of %08x",
				    r, wc.wc_flags, wc.invalidated_rkey, key);
			if (r == 0)
				printf("receive flags %#x\n", wc.wc_flags);
			for (int i = 0; i < 3000; i++)
				if (win[100 + i] != pattern(r, i))
					die("round %d: window byte %d is %02x, want %02x", r, i, win[100 + i], pattern(r, i));
		}
		printf("owner: %d rounds: type 2 window bound, written, read and invalidated by SEND with invalidate; "
		       "every receive IBV_WC_WITH_INV of its key\n", rounds);
		fflush(stdout);
		sendline("checked\n");
		if (neg) {
			expect("neg");
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qia;
			if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia))
				die("ibv_query_qp: %s", strerror(errno));
			printf("qp state: %s\n", state_name(qa.qp_state));
			fflush(stdout);
		}
		sendline("bye\n");
	} else {
		unsigned key;
		unsigned long long addr;
		if (!fgets(line, sizeof line, sock_in) || sscanf(line, "mw1 %x %llx", &key, &addr) != 2)
			die("bad mw1 line");
		rdma(qp, IBV_WR_RDMA_READ, 1, mr, buf, 4096, addr, key);
		poll1(cq, 1, IBV_WC_RDMA_READ, 1);
		for (int i = 0; i < 4096; i++)
			if (buf[i] != pattern(-1, i))
				die("type 1 window byte %d is %02x, want %02x", i, buf[i], pattern(-1, i));
		for (int r = 0; r < rounds; r++) {
			if (!fgets(line, sizeof line, sock_in) || sscanf(line, "mw2 %x %llx", &key, &addr) != 2)
				die("bad mw2 line");
			for (int i = 0; i < 3000; i++)
				buf[4096 + i] = pattern(r, i);
			memset(buf + 16384, 0, 3000);
			uint64_t id = 10 * (r + 1);
			rdma(qp, IBV_WR_RDMA_WRITE, id, mr, buf + 4096, 3000, addr + 100, key);
			rdma(qp, IBV_WR_RDMA_READ, id + 1, mr, buf + 16384, 3000, addr + 100, key);
			struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
			// Fenced: a READ response lost and asked for again
			// after the invalidation would find the key gone.
			struct ibv_send_wr wr = {.wr_id = id + 2, .opcode = IBV_WR_SEND_WITH_INV,
						 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE,
						 .sg_list = &sge, .num_sge = 1, .invalidate_rkey = key};
			post(qp, &wr);
			poll1(cq, id, IBV_WC_RDMA_WRITE, 1);
			poll1(cq, id + 1, IBV_WC_RDMA_READ, 1);
			poll1(cq, id + 2, IBV_WC_SEND, 1);
			if (memcmp(buf + 4096, buf + 16384, 3000))
				die("round %d: the READ through the window differs from the WRITE", r);
			sendline("sent\n");
		}
		expect("checked");
		printf("user: type 1 window read; %d rounds: WRITE, READ and SEND with invalidate through a type 2 window, "
		       "all IBV_WC_SUCCESS\n", rounds);
		fflush(stdout);
		if (neg) {
			rdma(qp, IBV_WR_RDMA_WRITE, 5, mr, buf, 8, addr, key);
			struct ibv_wc wc = poll1(cq, 5, IBV_WC_RDMA_WRITE, 0);
			printf("write after invalidate: status %s (%d)\n", ibv_wc_status_str(wc.status), wc.status);
			fflush(stdout);
			sendline("neg\n");
		}
		expect("bye");
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
