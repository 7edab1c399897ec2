// ucimm: UC SEND and RDMA WRITE with immediate data (IBA 9.8.2, 9.4.1,
// 9.4.3) on rxe, facing the uroce program of tests/interop/internal/ucimm
// over one UC QP.
//
// It listens on a TCP port; the peer connects and the two swap one line
// each, "QPN PSN GID ADDR RKEY" in hex (the receiver's region is the one
// that counts), then both move their QP to RTS and say "rts". The
// receiver keeps RECVS receives posted, one 4 KiB slot each. For each of
// ROUNDS rounds it clears its two WRITE areas and says "go"; the sender
// then posts three messages, each with the immediate TAG << 24 | round:
//
//	SEND with immediate, SIZE bytes into a receive (tag a1);
//	RDMA WRITE with immediate, SIZE bytes at ADDR+WRITE1 (tag b2);
//	RDMA WRITE with immediate, SMALL bytes at ADDR+WRITE2 (tag c3),
//
// SIZE spanning several packets at IB MTU 1024 and SMALL one, and checks
// that each completes successfully (IBV_WC_SEND, IBV_WC_RDMA_WRITE). The
// receiver checks each completion: successful, IBV_WC_WITH_IMM, an
// immediate of a known tag and this round (ntohl(imm_data): verbs gives
// it in network order), not seen before this round, opcode IBV_WC_RECV
// for the SEND and IBV_WC_RECV_RDMA_WITH_IMM for the WRITEs, byte_len
// the message's length, and the bytes pattern(tag, round, i).
//
// UC has no ACKs and drops a message with a lost packet whole (IBA
// 9.8.2, rxe's drop_msg), so a receiver cannot wait for every message.
// When a round's messages are not all there within half a second it
// says "mark", and the sender SENDs 8 bytes with immediate
// d4 << 24 | round behind them. Packets of one QP arrive and complete
// in order, so once the mark is in, whatever of the round is missing
// was lost; a mark lost in turn is asked for again, up to eight times
// in a row. The receiver says "done" after the last round and prints
// how many of each message came; the sender ends with "bye". Both
// print their QP's state last.
//
// Built on the host against Debian 13's libibverbs-dev (rdma-core 56).
//
// -t SECONDS ends it with status 3 after that long.
//
// -onewrite leaves the multi-packet WRITE out of each round.
//
// Usage: ucimm [-p PORT] [-d DEV] [-g GIDX] [-r ROUNDS] [-s SIZE]
//              [-onewrite] [-t SECONDS] sender|receiver
#include "labverbs.h"

#include <time.h>

#define MR_SIZE 131072
#define SLOT 4096
#define RECVS 16 // receives posted: marks asked for twice take two
#define WRITE1 65536
#define WRITE2 98304
#define SMALL 200
#define NMSG 3
#define MARK 0xd4

// The messages of a round: their immediates' tags, kind and the offset
// of their bytes in the sender's region (and, for the WRITEs, in the
// receiver's).
static const uint8_t tags[NMSG] = {0xa1, 0xb2, 0xc3};
static const int is_write[NMSG] = {0, 1, 1};
static const int offs[NMSG] = {0, WRITE1, WRITE2};
static const char *names[NMSG] = {"SENDs", "multi-packet WRITEs", "one-packet WRITEs"};

// sent says which messages a round has: -onewrite leaves out the
// multi-packet WRITE (README.md, "UC with immediate data": rxe's UC
// responder stops taking anything once such a WRITE lost a later
// packet).
static int sent[NMSG] = {1, 1, 1};

// pattern is byte i of message tag in round r; the uroce program has the
// same.
static uint8_t pattern(int tag, int r, int i)
{
	return (uint8_t)(tag + r * 13 + i * 7);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf, int slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(buf + slot * SLOT), .length = SLOT, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv: %s", strerror(errno));
}

static void post_imm(struct ibv_qp *qp, struct ibv_mr *mr, int write, uint64_t id, void *local, uint32_t len,
		     uint32_t imm, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id, .opcode = write ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND_WITH_IMM,
				 .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge, .num_sge = 1,
				 .imm_data = htonl(imm), .wr.rdma = {.remote_addr = raddr, .rkey = rkey}},
			   *bad;
	int err = ibv_post_send(qp, &wr, &bad);
	if (err)
		die("ibv_post_send: %s", strerror(err));
}

static void sender(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf, struct peer p, int rounds,
		   int size)
{
	char line[256];
	int r = 0, marks = 0;
	for (;;) {
		if (!fgets(line, sizeof line, sock_in))
			die("peer closed in round %d", r);
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "done"))
			break;
		if (!strcmp(line, "mark")) {
			// The mark of the round just sent, behind it.
			post_imm(qp, mr, 0, 9, buf + WRITE2 + SLOT, 8, (uint32_t)MARK << 24 | (r - 1), 0, 0);
			poll1(cq, 9, IBV_WC_SEND, 1);
			marks++;
			continue;
		}
		if (strcmp(line, "go") || r >= rounds)
			die("peer said \"%s\" after %d rounds", line, r);
		for (int k = 0; k < NMSG; k++) {
			if (!sent[k])
				continue;
			int n = k == 2 ? SMALL : size;
			for (int i = 0; i < n; i++)
				buf[offs[k] + i] = pattern(tags[k], r, i);
			post_imm(qp, mr, is_write[k], k, buf + offs[k], n, (uint32_t)tags[k] << 24 | r, p.addr + offs[k],
				 p.rkey);
		}
		for (int k = 0; k < NMSG; k++)
			if (sent[k])
				poll1(cq, k, is_write[k] ? IBV_WC_RDMA_WRITE : IBV_WC_SEND, 1);
		r++;
	}
	if (r != rounds)
		die("peer said done after %d of %d rounds", r, rounds);
	printf("sender: %d rounds: %d messages with immediate and %d marks sent, all IBV_WC_SUCCESS\n", rounds,
	       (sent[0] + sent[1] + sent[2]) * rounds, marks);
	fflush(stdout);
	sendline("bye\n");
}

static void receiver(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf, int rounds, int size)
{
	int delivered[NMSG] = {0}, marks = 0;
	for (int s = 0; s < RECVS; s++)
		post_recv(qp, mr, buf, s);
	for (int r = 0; r < rounds; r++) {
		memset(buf + WRITE1, 0, size);
		memset(buf + WRITE2, 0, SMALL);
		int got[NMSG] = {0}, left = sent[0] + sent[1] + sent[2], unanswered = 0;
		sendline("go\n");
		double deadline = now() + 0.5;
		while (left > 0) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(cq, 1, &wc);
			if (n < 0)
				die("ibv_poll_cq: %d", n);
			if (n == 0) {
				if (now() > deadline) {
					// Eight marks in a row lost at 1 % loss is
					// one in 10^16: the responder takes nothing.
					if (++unanswered > 8)
						die("round %d: nothing came after 8 marks", r);
					sendline("mark\n");
					marks++;
					deadline = now() + 0.5;
				}
				continue;
			}
			unanswered = 0;
			if (wc.status != IBV_WC_SUCCESS)
				die("round %d: wr_id %" PRIu64 ": status %s (%d)", r, wc.wr_id,
				    ibv_wc_status_str(wc.status), wc.status);
			if (!(wc.wc_flags & IBV_WC_WITH_IMM))
				die("round %d: completion flags %#x lack IBV_WC_WITH_IMM", r, wc.wc_flags);
			uint32_t imm = ntohl(wc.imm_data);
			int tag = imm >> 24, round = imm & 0xffffff, slot = (int)wc.wr_id;
			uint8_t *data = buf + slot * SLOT;
			post_recv(qp, mr, buf, slot);
			if (tag == MARK) {
				if (wc.opcode != IBV_WC_RECV)
					die("round %d: mark's opcode %d, want IBV_WC_RECV", r, wc.opcode);
				if (round > r)
					die("round %d: mark of round %d", r, round);
				if (round == r)
					break;
				continue; // an earlier round's mark, asked for twice
			}
			int k = 0;
			while (k < NMSG && tags[k] != tag)
				k++;
			if (k == NMSG || !sent[k])
				die("round %d: immediate %08x has no tag of this run", r, imm);
			if (round != r)
				die("round %d: immediate %08x is of round %d", r, imm, round);
			if (got[k])
				die("round %d: second message with immediate %08x", r, imm);
			enum ibv_wc_opcode op = is_write[k] ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
			if (wc.opcode != op)
				die("round %d: immediate %08x: opcode %d, want %d", r, imm, wc.opcode, op);
			int want = k == 2 ? SMALL : size;
			if ((int)wc.byte_len != want)
				die("round %d: immediate %08x: byte_len %u, want %d", r, imm, wc.byte_len, want);
			if (is_write[k])
				data = buf + offs[k];
			for (int i = 0; i < want; i++)
				if (data[i] != pattern(tag, r, i))
					die("round %d: immediate %08x: byte %d is %02x, want %02x", r, imm, i, data[i],
					    pattern(tag, r, i));
			got[k] = 1;
			delivered[k]++;
			left--;
		}
	}
	sendline("done\n");
	printf("receiver: %d rounds: delivered", rounds);
	for (int k = 0; k < NMSG; k++)
		printf(" %d %s", delivered[k], names[k]);
	printf(" with immediate, each byte-exact with its round's immediate, none twice; %d marks\n", marks);
	fflush(stdout);
	expect("bye");
}

int main(int argc, char **argv)
{
	prog = "ucimm";
	int port = 18515, gidx = 1, rounds = 1, size = 3000, timeout = 0, send = -1;
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
		else if (!strcmp(argv[i], "-s") && i + 1 < argc)
			size = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-onewrite"))
			sent[1] = 0;
		else if (!strcmp(argv[i], "sender"))
			send = 1;
		else if (!strcmp(argv[i], "receiver"))
			send = 0;
		else
			die("usage: ucimm [-p PORT] [-d DEV] [-g GIDX] [-r ROUNDS] [-s SIZE] [-onewrite] [-t SECONDS] "
			    "sender|receiver");
	}
	if (send < 0 || rounds < 1 || rounds > 0xffffff || size < 1 || size > SLOT || timeout < 0)
		die("bad arguments");
	if (timeout > 0) {
		signal(SIGALRM, timed_out);
		alarm(timeout);
	}

	struct ibv_context *ctx = open_device(devname);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	uint8_t *buf = aligned_alloc(4096, MR_SIZE);
	memset(buf, 0, MR_SIZE);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, MR_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = 16, .max_recv_wr = RECVS, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_UC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT: %s", strerror(errno));
	struct peer p = connect_peer(ctx, qp, gidx, port, buf, mr->rkey);
	if (send)
		sender(qp, cq, mr, buf, p, rounds, size);
	else
		receiver(qp, cq, mr, buf, rounds, size);
	// Lost packets never move a UC QP to the error state (IBA 9.8.2:
	// the responder drops the message, the requester never hears).
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia))
		die("ibv_query_qp: %s", strerror(errno));
	printf("qp state: %s\n", state_name(qa.qp_state));
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
