// SPDX-License-Identifier: MIT
/*
 * http-gate.c: the exporter's gate: one thread that accepts the connections and relays each to
 * libmicrohttpd through a socket pair, passing a request head on only line by line, each line
 * once http-check.c has found it acceptable (docs/metrics.md, "HTTP").
 *
 * Decisions:
 * - Why a relay: libmicrohttpd reads the socket itself and shows only what it parsed, so the
 *   faults RFC 9112 says a server must refuse (obs-fold, a NUL in a header, conflicting
 *   Content-Length, "%00") cannot be seen through its API; a check at accept time alone would
 *   miss the later requests of a kept-alive connection. libmicrohttpd gets the server's end of
 *   each pair with MHD_add_connection (made for proxies), with the client's address, so its
 *   connection limit, per-address limit, timeouts and the exporter's request deadline (which
 *   shuts that end down) work as before.
 * - A refused line is never passed on. In its place (and instead of everything the client sends
 *   after it) the server gets a header line without a colon, which libmicrohttpd answers 400
 *   and then closes: the answer comes in its turn, after those to earlier pipelined requests,
 *   which the gate could not order itself.
 * - Memory is bounded: a line longer than GATE_LINE_MAX goes on unchecked (libmicrohttpd's
 *   memory pool per connection is no larger, so it refuses such a line: 414 or 431); responses
 *   pass GATE_DOWN_MAX bytes at a time. Both buffers exist only while the connection does.
 * - A client's half-close is passed on as one (shutdown of the pair's write side), a reset or
 *   an error closes both sides; when the server closes its end, what it sent is delivered and
 *   the client's connection closed.
 * - Out of descriptors (EMFILE), accepting pauses for GATE_BACKOFF_MS instead of spinning.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd.h"
#include "http-check.h"
#include "http-gate.h"

#define GATE_LINE_MAX   (16 * 1024)
#define GATE_DOWN_MAX   (16 * 1024)
#define GATE_BACKOFF_MS 100

/* What the server gets instead of a refused line: a header line without a colon ends the head
 * as malformed (400). Before it, for a refused request line, a request line of its own. */
static const char inject_header[] = "gpuctl-refused-request\r\n\r\n";
static const char inject_request[] = "GET / HTTP/1.1\r\ngpuctl-refused-request\r\n\r\n";
#define INJECT_MAX sizeof(inject_request)

struct relay {
	int c;                   /* the client's socket */
	int a;                   /* ours of the socket pair; libmicrohttpd has the other */
	struct http_check check; /* where the client's stream is */
	char *up;                /* checked bytes [0, up_ready), then the line being read */
	size_t up_ready, up_len; /* (up holds GATE_LINE_MAX + INJECT_MAX bytes) */
	bool unchecked;          /* a line outgrew GATE_LINE_MAX: the rest passes as it is */
	char *down;              /* what the server sent, [down_off, down_len) not yet delivered */
	size_t down_off, down_len;
	bool c_eof;   /* nothing more is read from the client (its end, or refused) */
	bool refused; /* a line was refused: the server has the injection instead */
	bool a_shut;  /* the client's half-close passed on */
	bool a_eof;   /* the server closed its end */
};

struct http_gate {
	int listen_fd;        /* owned */
	int wake[2];          /* a byte on wake[1] stops the thread */
	size_t max;           /* relays at most */
	struct relay **r;     /* n relays, owned */
	size_t n;             /* relays open */
	struct pollfd *pfd;   /* 2 + 2 * max */
	http_gate_add_fn add; /* hands a pair's end to the server */
	void *cls;            /* its argument */
	bool verbose;         /* refusals said on stderr */
	pthread_t thread;     /* gate_main */
	bool running;         /* thread started */
};

static void relay_free(struct relay *x)
{
	if (!x)
		return;
	if (x->c >= 0)
		close(x->c);
	if (x->a >= 0)
		close(x->a);
	free(x->up);
	free(x->down);
	free(x);
}

static void relay_drop(struct http_gate *g, size_t i)
{
	relay_free(g->r[i]);
	g->r[i] = g->r[--g->n];
}

/* Replaces the line being read and all the client would still send with the injection. */
static void refuse(struct http_gate *g, struct relay *x, bool request_line)
{
	const char *text = request_line ? inject_request : inject_header;
	size_t len = strlen(text);

	if (g->verbose)
		cli_error("exporter: debug: a request refused (400): %s", x->check.why);
	x->up_len = x->up_ready;
	memcpy(x->up + x->up_len, text, len);
	x->up_len += len;
	x->up_ready = x->up_len;
	x->c_eof = true;
	x->refused = true;
}

/* Checks the complete lines among the bytes read, marking those that may go on. */
static void relay_scan(struct http_gate *g, struct relay *x)
{
	while (!x->c_eof && x->up_ready < x->up_len) {
		char *line = x->up + x->up_ready;
		size_t have = x->up_len - x->up_ready;
		char *lf = x->unchecked ? NULL : memchr(line, '\n', have);

		if (x->unchecked) {
			x->up_ready = x->up_len;
			return;
		}
		if (!lf) {
			if (have >= GATE_LINE_MAX)
				x->unchecked = true; /* the server refuses a line this long */
			else
				return; /* the rest of the line is still to come */
			continue;
		}
		bool request_line = !x->check.in_headers;
		if (http_check_line(&x->check, line, (size_t)(lf - line)) < 0) {
			refuse(g, x, request_line);
			return;
		}
		x->up_ready += (size_t)(lf - line) + 1;
	}
}

/* One step of relay x after poll: its events for c (ce) and a (ae). False: closed. */
static bool relay_step(struct http_gate *g, struct relay *x, short ce, short ae)
{
	ssize_t k;

	if ((ce & (POLLIN | POLLHUP | POLLERR)) && !x->c_eof && x->up_len < GATE_LINE_MAX) {
		k = recv(x->c, x->up + x->up_len, GATE_LINE_MAX - x->up_len, 0);
		if (k == 0)
			x->c_eof = true;
		else if (k < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		else if (k > 0)
			x->up_len += (size_t)k;
		relay_scan(g, x);
	}
	if (x->up_ready > 0 && (ae & (POLLOUT | POLLERR | POLLHUP))) {
		k = send(x->a, x->up, x->up_ready, MSG_NOSIGNAL);
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (k > 0) {
			memmove(x->up, x->up + k, x->up_len - (size_t)k);
			x->up_len -= (size_t)k;
			x->up_ready -= (size_t)k;
			relay_scan(g, x);
		}
	}
	/* the client's end passed on once all it sent that may go is delivered (not after a
	 * refusal: the server answers the malformed head it was given, then closes) */
	if (x->c_eof && !x->a_shut && x->up_ready == 0 && !x->refused) {
		(void)shutdown(x->a, SHUT_WR);
		x->a_shut = true;
	}
	if ((ae & (POLLIN | POLLHUP | POLLERR)) && !x->a_eof && x->down_off == x->down_len) {
		k = recv(x->a, x->down, GATE_DOWN_MAX, 0);
		if (k == 0)
			x->a_eof = true;
		else if (k < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		else if (k > 0) {
			x->down_off = 0;
			x->down_len = (size_t)k;
		}
	}
	if (x->down_off < x->down_len && (ce & (POLLOUT | POLLERR | POLLHUP))) {
		k = send(x->c, x->down + x->down_off, x->down_len - x->down_off, MSG_NOSIGNAL);
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (k > 0)
			x->down_off += (size_t)k;
	}
	return !(x->a_eof && x->down_off == x->down_len);
}

/* Accepts one connection and hands its pair to the server. False: out of descriptors. */
static bool gate_accept(struct http_gate *g)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct relay *x;
	int c, pair[2], one = 1;

	c = accept4(g->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (c < 0)
		return !(errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM);
	if (g->n >= g->max) {
		close(c); /* as the server does past its connection limit */
		return true;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0) {
		close(c);
		return false;
	}
	x = calloc(1, sizeof(*x));
	if (x) {
		x->up = malloc(GATE_LINE_MAX + INJECT_MAX);
		x->down = malloc(GATE_DOWN_MAX);
	}
	if (!x || !x->up || !x->down) {
		if (x)
			x->c = x->a = -1;
		relay_free(x);
		close(c);
		close(pair[0]);
		close(pair[1]);
		return true;
	}
	x->c = c;
	x->a = pair[0];
	http_check_init(&x->check);
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
		(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (g->add(g->cls, pair[1], (struct sockaddr *)&ss, len) < 0) {
		relay_free(x); /* the server closed its end */
		return true;
	}
	g->r[g->n++] = x;
	return true;
}

static void *gate_main(void *arg)
{
	struct http_gate *g = arg;
	bool backoff = false;

	for (;;) {
		struct pollfd *p = g->pfd;
		size_t np = 0;
		int k;

		p[np++] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
		p[np++] = (struct pollfd){.fd = backoff ? -1 : g->listen_fd, .events = POLLIN};
		for (size_t i = 0; i < g->n; i++) {
			struct relay *x = g->r[i];
			short ce = 0, ae = 0;

			if (!x->c_eof && x->up_len < GATE_LINE_MAX)
				ce |= POLLIN;
			if (x->down_off < x->down_len)
				ce |= POLLOUT;
			if (!x->a_eof && x->down_off == x->down_len)
				ae |= POLLIN;
			if (x->up_ready > 0)
				ae |= POLLOUT;
			/* a side nothing is wanted of is left out: its hang-up, reported whatever
			 * the events, would wake the loop again and again (a closed server end
			 * waiting for a slow reader, say); the next read or write on it sees the
			 * end */
			p[np++] = (struct pollfd){.fd = ce ? x->c : -1, .events = ce};
			p[np++] = (struct pollfd){.fd = ae ? x->a : -1, .events = ae};
		}
		k = poll(p, np, backoff ? GATE_BACKOFF_MS : -1);
		if (k < 0 && errno != EINTR)
			break;
		if (k < 0)
			continue;
		if (p[0].revents)
			break;
		/* relays first, from the end: relay_drop moves the last one into the hole */
		for (size_t i = g->n; i-- > 0;)
			if (!relay_step(g, g->r[i], p[2 + 2 * i].revents, p[3 + 2 * i].revents))
				relay_drop(g, i);
		backoff = false;
		if (p[1].revents & POLLIN)
			backoff = !gate_accept(g);
	}
	return NULL;
}

static void gate_free(struct http_gate *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		relay_free(g->r[i]);
	free(g->r);
	free(g->pfd);
	if (g->wake[0] >= 0)
		close(g->wake[0]);
	if (g->wake[1] >= 0)
		close(g->wake[1]);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	free(g);
}

int http_gate_start(int listen_fd, size_t max_conns, http_gate_add_fn add, void *cls, bool verbose,
                    struct http_gate **ret_gate)
{
	struct http_gate *g = calloc(1, sizeof(*g));
	int r;

	if (!g) {
		close(listen_fd);
		return -ENOMEM;
	}
	g->listen_fd = listen_fd;
	g->wake[0] = g->wake[1] = -1;
	g->max = max_conns;
	g->add = add;
	g->cls = cls;
	g->verbose = verbose;
	g->r = calloc(max_conns ? max_conns : 1, sizeof(*g->r));
	g->pfd = calloc(2 + 2 * max_conns, sizeof(*g->pfd));
	if (!g->r || !g->pfd) {
		gate_free(g);
		return -ENOMEM;
	}
	if (pipe2(g->wake, O_CLOEXEC) < 0 ||
	    fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK) < 0) {
		r = -errno;
		gate_free(g);
		return r;
	}
	r = pthread_create(&g->thread, NULL, gate_main, g);
	if (r != 0) {
		gate_free(g);
		return -r;
	}
	g->running = true;
	*ret_gate = g;
	return 0;
}

void http_gate_stop(struct http_gate *g)
{
	if (!g)
		return;
	if (g->running) {
		while (write(g->wake[1], "x", 1) < 0 && errno == EINTR)
			;
		pthread_join(g->thread, NULL);
	}
	gate_free(g);
}
