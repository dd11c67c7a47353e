// SPDX-License-Identifier: MIT
/*
 * exporter-http.c: the HTTP side of `gpuctl exporter` (cmd-exporter.c samples and decides what
 * the page says): libmicrohttpd loaded at start, the listening socket, the paths, the request
 * deadline, and the /metrics page the main thread swaps in (docs/ARCHITECTURE.md, "The
 * exporter").
 *
 * Decisions:
 * - A scrape only queues the latest page (a reference-counted MHD response) under a mutex, so
 *   any number of scrapers cost no NVML call and no rendering.
 * - The listening socket is ours (bound before MHD starts), so "port in use" is one clear line
 *   (exit 1), and ":PORT" listens on IPv6 and IPv4 (IPv4 only where the host has no IPv6). The
 *   gate (http-gate.c) accepts on it and relays each connection to MHD, checking the request
 *   heads on the way (http-check.c): MHD 0.9.75 answers 200 to what RFC 9112 says is 400
 *   (obs-fold, a NUL in a header, conflicting Content-Length, "%00"), and its API cannot show it.
 * - Bounded: one polling thread, at most EXPORTER_MAX_CONNECTIONS connections and
 *   EXPORTER_PER_IP from one address, a per-connection memory pool of EXPORTER_CONN_MEMORY
 *   bytes (a longer request line or header gets MHD's error answer and the connection is
 *   closed), an idle timeout and a whole-request deadline of the same length (default 10 s;
 *   the GPUCTL_EXPORTER_TIMEOUT environment variable, in seconds, exists for tests). MHD's idle
 *   timer restarts on every byte, so a client sending a header line every few seconds
 *   (slowloris) would keep its connection for ever: a reaper thread shuts down the socket of
 *   any connection whose request (from accept, or the end of the previous request, to the end
 *   of the response) has lasted longer than the deadline. The per-address limit keeps one
 *   client from taking every connection. Only GET and
 *   HEAD (405 with Allow otherwise); a request with a body is refused (413); unknown paths 404.
 *   Connections are kept alive between a scraper's requests (answered at MHD's second call).
 * - Memory: most of what is resident is libmicrohttpd and the GnuTLS libraries it pulls in
 *   (about 3 MiB just to dlopen it). Of ours, one malloc arena (set when serving starts).
 * - The status page (docs/status-page.md): "/" is the page (status-page.html, fixed) and
 *   /api/v1/status the latest sample's document (status-json.c), swapped in like the metrics.
 *   Who may read them is the configuration's status_page: off (the old "/" and 404), local
 *   (loopback clients; others 403) or network. A peer's page reads /api/v1/status across
 *   origins: the CORS header names the request's Origin only when it is a configured peer's,
 *   so that document gets a response of its own per request (a copy of the text).
 * - One teardown: exporter_http_stop undoes what exporter_http_serve started, whatever part
 *   of it did start, and exporter_http_free the rest, so every path of the command ends the
 *   same way.
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <microhttpd.h>

#include "cmd.h"
#include "exporter-http.h"
#include "http-gate.h"
#include "status.h"

/* libmicrohttpd, loaded when the exporter starts: linking it would make every gpuctl command
 * load it and GnuTLS with it (about 1.5 ms of every start, docs/ARCHITECTURE.md). The header
 * gives the types and constants; these are the functions the exporter calls. */
static struct {
	void *handle;
	struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port,
	                                   MHD_AcceptPolicyCallback apc, void *apc_cls,
	                                   MHD_AccessHandlerCallback dh, void *dh_cls, ...);
	void (*stop_daemon)(struct MHD_Daemon *daemon);
	struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer,
	                                                    enum MHD_ResponseMemoryMode mode);
	enum MHD_Result (*add_response_header)(struct MHD_Response *response, const char *header,
	                                       const char *content);
	enum MHD_Result (*queue_response)(struct MHD_Connection *connection,
	                                  unsigned int status_code, struct MHD_Response *response);
	void (*destroy_response)(struct MHD_Response *response);
	const char *(*lookup_connection_value)(struct MHD_Connection *connection,
	                                       enum MHD_ValueKind kind, const char *key);
	const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *connection,
	                                                       enum MHD_ConnectionInfoType type,
	                                                       ...);
	enum MHD_Result (*add_connection)(struct MHD_Daemon *daemon, MHD_socket client_socket,
	                                  const struct sockaddr *addr, socklen_t addrlen);
} mhd;

/* Loads libmicrohttpd (the Debian 12 soname, then the development name). 0, or -ENOENT with
 * the reason in buf. */
static int mhd_load(char *buf, size_t size)
{
	static const char *const names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
	for (size_t i = 0; !mhd.handle && i < sizeof(names) / sizeof(names[0]); i++)
		mhd.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!mhd.handle) {
		snprintf(buf, size, "%s", dlerror());
		return -ENOENT;
	}
#define MHD_SYM(field, name)                                                                       \
	do {                                                                                       \
		*(void **)&mhd.field = dlsym(mhd.handle, name);                                    \
		if (!mhd.field) {                                                                  \
			snprintf(buf, size, "%s lacks %s", "libmicrohttpd", name);                 \
			return -ENOENT;                                                            \
		}                                                                                  \
	} while (0)
	MHD_SYM(start_daemon, "MHD_start_daemon");
	MHD_SYM(stop_daemon, "MHD_stop_daemon");
	MHD_SYM(create_response_from_buffer, "MHD_create_response_from_buffer");
	MHD_SYM(add_response_header, "MHD_add_response_header");
	MHD_SYM(queue_response, "MHD_queue_response");
	MHD_SYM(destroy_response, "MHD_destroy_response");
	MHD_SYM(lookup_connection_value, "MHD_lookup_connection_value");
	MHD_SYM(get_connection_info, "MHD_get_connection_info");
	MHD_SYM(add_connection, "MHD_add_connection");
#undef MHD_SYM
	return 0;
}

#define EXPORTER_MAX_CONNECTIONS 512
#define EXPORTER_PER_IP          8   /* connections from one address at once */
#define EXPORTER_REAP_MS         250 /* how often the deadline is checked */
#define EXPORTER_CONN_MEMORY     (16 * 1024)
#define EXPORTER_DEFAULT_TIMEOUT 10
#define EXPORTER_MAX_TIMEOUT     3600
#define STATUS_PATH              "/api/v1/status"
#define CSP_ORIGIN_MAX           300 /* a peer's origin (CONFIG_MAX_PEER_LEN and room) */

static const char index_page[] =
        "<!DOCTYPE html>\n"
        "<html><head><title>gpuctl exporter</title></head>\n"
        "<body><h1>gpuctl exporter</h1>\n"
        "<p><a href=\"/metrics\">Metrics</a> (Prometheus text format) &middot; "
        "<a href=\"/healthz\">Liveness</a></p>\n"
        "</body></html>\n";

/* A connection, for the whole-request deadline (EXPORTER_REQUEST_DEADLINE). */
struct conn_track {
	struct conn_track *prev, *next; /* in exporter.conns */
	int fd;                         /* its socket (MHD's; we only shut it down) */
	double since;                   /* CLOCK_MONOTONIC: accepted, or its last request ended */
	bool cut;                       /* shut down by the reaper */
};

struct exporter_http {
	pthread_mutex_t lock;           /* guards page and overdue */
	pthread_mutex_t conns_lock;     /* guards conns and every conn_track in it */
	struct conn_track *conns;       /* open connections (MHD's thread adds and removes) */
	double deadline_s;              /* a request's whole time, from accept or the end of the
	                                 * previous request to the end of its response */
	volatile sig_atomic_t stopping; /* the reaper thread ends */
	struct MHD_Response *page;      /* the latest /metrics page; swapped by the main thread */
	bool overdue;                   /* the page is an overdue one: /healthz answers 503 */
	struct MHD_Response *index;     /* "/" */
	struct MHD_Response *healthz;   /* "/healthz", 200 */
	struct MHD_Response *unhealthy; /* "/healthz" while the sample is overdue, 503 */
	struct MHD_Response *notfound;  /* 404 */
	struct MHD_Response *badmethod; /* 405, with Allow */
	struct MHD_Response *toolarge;  /* 413 */
	bool verbose;                   /* -v: MHD's own messages go to stderr */
	const char *listen_text;        /* --listen as given, for messages (the caller's) */
	int listen_fd;                  /* the listening socket until the gate owns it, else -1 */
	struct MHD_Daemon *daemon;      /* NULL until serving */
	struct http_gate *gate;         /* NULL until serving */
	pthread_t reaper;               /* the deadline's thread, while reaping */
	bool reaping;
	/* the status page (status.h): who may read it, the peers' origins (CORS), the page */
	enum gpuctl_status_page_access access;
	char **origins; /* owned, n_origins entries */
	size_t n_origins;
	char *csp;                        /* the page's Content-Security-Policy, owned */
	struct MHD_Response *status_page; /* "/" when the page is served */
	struct MHD_Response *forbidden;   /* 403: the page is for loopback clients */
	struct MHD_Response *unready;     /* 503: no status document yet */
	char *status;                     /* the latest /api/v1/status text (guarded by lock) */
	size_t status_len;
};

/* ---- the listening socket ---- */

static int bind_one(int family, const struct sockaddr *sa, socklen_t len, bool dual)
{
	int one = 1, zero = 0;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one, sizeof(int)) < 0) ||
	    bind(fd, sa, len) < 0 || listen(fd, 128) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Binds and listens on spec; returns the socket, or -errno of the last address tried
 * (-EHOSTUNREACH: the host name does not resolve). */
static int bind_listen(const struct listen_spec *spec)
{
	if (spec->kind == LISTEN_ANY) {
		struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(spec->port)};
		a6.sin6_addr = in6addr_any;
		int fd = bind_one(AF_INET6, (struct sockaddr *)&a6, sizeof(a6), true);
		if (fd != -EAFNOSUPPORT)
			return fd;
		struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(spec->port)};
		a4.sin_addr.s_addr = htonl(INADDR_ANY);
		return bind_one(AF_INET, (struct sockaddr *)&a4, sizeof(a4), false);
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char port[8];
	snprintf(port, sizeof(port), "%u", (unsigned)spec->port);
	hints.ai_family = spec->kind == LISTEN_IPV4   ? AF_INET
	                  : spec->kind == LISTEN_IPV6 ? AF_INET6
	                                              : AF_UNSPEC;
	if (spec->kind != LISTEN_NAME)
		hints.ai_flags |= AI_NUMERICHOST;
	int g = getaddrinfo(spec->host, port, &hints, &res);
	if (g != 0)
		return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	int fd = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = bind_one(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false);
		if (fd >= 0 || fd == -EADDRINUSE)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

/* ---- HTTP ---- */

/* The gate's hand-over (http-gate.h): MHD takes the socket, closing it when it refuses. */
static int gate_add(void *cls, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	return mhd.add_connection(cls, fd, addr, addrlen) == MHD_YES ? 0 : -1;
}

/* Whether conn may read the status page: every client under network, a loopback one under
 * local (127.0.0.0/8, ::1, and IPv4's loopback mapped into IPv6). */
static bool client_allowed(const struct exporter_http *ex, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;
	const struct sockaddr *sa;

	if (ex->access == GPUCTL_STATUS_PAGE_NETWORK)
		return true;
	ci = mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	sa = ci ? ci->client_addr : NULL;
	if (sa && sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* /api/v1/status: the latest document, with the CORS header when the request's Origin is a
 * configured peer's (the page of a peer reads it; docs/status-page.md "Peers"). */
static enum MHD_Result queue_status(struct exporter_http *ex, struct MHD_Connection *conn)
{
	const char *origin = mhd.lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
	const char *allow = NULL;
	struct MHD_Response *r = NULL;
	enum MHD_Result q;

	for (size_t i = 0; origin && i < ex->n_origins && !allow; i++)
		if (strcasecmp(origin, ex->origins[i]) == 0)
			allow = ex->origins[i];
	pthread_mutex_lock(&ex->lock);
	if (ex->status)
		r = mhd.create_response_from_buffer(ex->status_len, ex->status,
		                                    MHD_RESPMEM_MUST_COPY);
	pthread_mutex_unlock(&ex->lock);
	if (!r)
		return mhd.queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE, ex->unready);
	if (mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") !=
	            MHD_YES ||
	    mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES ||
	    mhd.add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES ||
	    mhd.add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin") != MHD_YES ||
	    (allow &&
	     mhd.add_response_header(r, "Access-Control-Allow-Origin", allow) != MHD_YES)) {
		mhd.destroy_response(r);
		return MHD_NO;
	}
	q = mhd.queue_response(conn, MHD_HTTP_OK, r);
	mhd.destroy_response(r);
	return q;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
	struct exporter_http *ex = cls;
	struct MHD_Response *resp;
	unsigned code = MHD_HTTP_OK;
	enum MHD_Result r;
	(void)version;
	(void)upload_data;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return mhd.queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, ex->badmethod);
	/* No request of ours has a body: refuse one before reading it (MHD then closes). */
	const char *cl =
	        mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if ((cl && strcmp(cl, "0") != 0) || *upload_data_size ||
	    mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return mhd.queue_response(conn, MHD_HTTP_CONTENT_TOO_LARGE, ex->toolarge);
	/* MHD calls this once the headers are in and again once the whole request is. A response
	 * queued at the first call is an early answer after which MHD closes the connection
	 * (libmicrohttpd 0.9.75, Debian 12), so a good request is answered at the second call and
	 * the connection stays open for the scraper's next request (keep-alive). */
	if (!*req_cls) {
		*req_cls = ex;
		return MHD_YES;
	}

	if (strcmp(url, "/metrics") == 0) {
		pthread_mutex_lock(&ex->lock);
		r = mhd.queue_response(conn, MHD_HTTP_OK, ex->page);
		pthread_mutex_unlock(&ex->lock);
		return r;
	}
	if (ex->access != GPUCTL_STATUS_PAGE_OFF &&
	    (strcmp(url, "/") == 0 || strcmp(url, STATUS_PATH) == 0)) {
		if (!client_allowed(ex, conn))
			return mhd.queue_response(conn, MHD_HTTP_FORBIDDEN, ex->forbidden);
		if (strcmp(url, "/") == 0)
			return mhd.queue_response(conn, MHD_HTTP_OK, ex->status_page);
		return queue_status(ex, conn);
	}
	if (strcmp(url, "/") == 0) {
		resp = ex->index;
	} else if (strcmp(url, "/healthz") == 0) {
		pthread_mutex_lock(&ex->lock);
		bool overdue = ex->overdue;
		pthread_mutex_unlock(&ex->lock);
		resp = overdue ? ex->unhealthy : ex->healthz;
		code = overdue ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
	} else {
		resp = ex->notfound;
		code = MHD_HTTP_NOT_FOUND;
	}
	return mhd.queue_response(conn, code, resp);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct exporter_http *ex = cls;
	char buf[512];
	if (!ex->verbose)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	cli_error("exporter: debug: %s", buf);
}

/* MHD_OPTION_NOTIFY_CONNECTION: tracks each connection for the deadline. An untracked one
 * (out of memory) still has MHD's idle timeout. Runs in MHD's thread; CLOSED comes before MHD
 * closes the socket, so the reaper never shuts down a descriptor that was reused. */
static void notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
	struct exporter_http *ex = cls;
	struct conn_track *t;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		        mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		*socket_context = NULL;
		if (!ci || !(t = calloc(1, sizeof(*t))))
			return;
		t->fd = ci->connect_fd;
		t->since = cli_now(CLOCK_MONOTONIC);
		pthread_mutex_lock(&ex->conns_lock);
		t->next = ex->conns;
		if (ex->conns)
			ex->conns->prev = t;
		ex->conns = t;
		pthread_mutex_unlock(&ex->conns_lock);
		*socket_context = t;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && (t = *socket_context)) {
		pthread_mutex_lock(&ex->conns_lock);
		if (t->prev)
			t->prev->next = t->next;
		else
			ex->conns = t->next;
		if (t->next)
			t->next->prev = t->prev;
		pthread_mutex_unlock(&ex->conns_lock);
		free(t);
		*socket_context = NULL;
	}
}

/* MHD_OPTION_NOTIFY_COMPLETED: a request ended (answered, or the connection failed): the
 * next one on the connection has a deadline of its own. */
static void request_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                              enum MHD_RequestTerminationCode toe)
{
	struct exporter_http *ex = cls;
	const union MHD_ConnectionInfo *ci =
	        mhd.get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn_track *t = ci ? ci->socket_context : NULL;
	(void)req_cls;
	(void)toe;

	if (!t)
		return;
	pthread_mutex_lock(&ex->conns_lock);
	t->since = cli_now(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&ex->conns_lock);
}

/* The reaper thread: every EXPORTER_REAP_MS, shuts down the sockets of connections whose
 * request has run past the deadline; MHD then sees the hang-up and closes them. */
static void *reaper_main(void *arg)
{
	struct exporter_http *ex = arg;
	struct timespec tick = {.tv_sec = 0, .tv_nsec = EXPORTER_REAP_MS * 1000000L};

	while (!ex->stopping) {
		double now = cli_now(CLOCK_MONOTONIC);

		pthread_mutex_lock(&ex->conns_lock);
		for (struct conn_track *t = ex->conns; t; t = t->next)
			if (!t->cut && now - t->since > ex->deadline_s) {
				(void)shutdown(t->fd, SHUT_RDWR);
				t->cut = true;
			}
		pthread_mutex_unlock(&ex->conns_lock);
		(void)nanosleep(&tick, NULL);
	}
	return NULL;
}

static struct MHD_Response *static_response(const char *text, const char *type)
{
	struct MHD_Response *r =
	        mhd.create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (r && mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES) {
		mhd.destroy_response(r);
		r = NULL;
	}
	return r;
}

/* The fixed pages: 0, or -ENOMEM. */
static int make_pages(struct exporter_http *ex)
{
	static const char text[] = "text/plain; charset=utf-8";

	ex->index = static_response(index_page, "text/html; charset=utf-8");
	ex->healthz = static_response("ok\n", text);
	ex->unhealthy =
	        static_response("503 NVML not answering: the latest sample is overdue\n", text);
	ex->notfound = static_response("404 not found: try /metrics\n", text);
	ex->badmethod = static_response("405 method not allowed: GET or HEAD\n", text);
	ex->toolarge = static_response("413 request bodies are not accepted\n", text);
	ex->forbidden = static_response("403 forbidden: the status page is served to this host's "
	                                "own clients only (status_page = network in gpuctl.conf "
	                                "serves it to others)\n",
	                                text);
	ex->unready = static_response("503 no status yet: the first sample is not in\n", text);
	ex->status_page = mhd.create_response_from_buffer(
	        status_page_html_len, (void *)status_page_html, MHD_RESPMEM_PERSISTENT);
	if (!ex->forbidden || !ex->unready || !ex->status_page ||
	    mhd.add_response_header(ex->status_page, MHD_HTTP_HEADER_CONTENT_TYPE,
	                            "text/html; charset=utf-8") != MHD_YES ||
	    mhd.add_response_header(ex->status_page, "X-Content-Type-Options", "nosniff") !=
	            MHD_YES ||
	    mhd.add_response_header(ex->status_page, "Referrer-Policy", "no-referrer") != MHD_YES ||
	    mhd.add_response_header(ex->status_page, "X-Frame-Options", "DENY") != MHD_YES)
		return -ENOMEM;
	if (!ex->index || !ex->healthz || !ex->unhealthy || !ex->notfound || !ex->badmethod ||
	    !ex->toolarge ||
	    mhd.add_response_header(ex->badmethod, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES ||
	    mhd.add_response_header(ex->toolarge, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES)
		return -ENOMEM;
	return 0;
}

/* ---- the server's life ---- */

int exporter_http_new(const char *listen_text, const struct listen_spec *spec, bool verbose,
                      struct exporter_http **ret_http)
{
	_cleanup_(exporter_http_freep) struct exporter_http *ex = NULL;
	_cleanup_close_ int fd = bind_listen(spec);
	char why[256];

	if (fd < 0) {
		cli_error("exporter: cannot listen on '%s': %s", listen_text,
		          fd == -EHOSTUNREACH ? "the host name does not resolve" : strerror(-fd));
		return CLI_EXIT_FAILURE;
	}
	if (mhd_load(why, sizeof(why)) < 0) {
		cli_error("exporter: cannot load libmicrohttpd (Debian: apt-get install "
		          "libmicrohttpd12): "
		          "%s",
		          why);
		return CLI_EXIT_FAILURE;
	}
	ex = calloc(1, sizeof(*ex));
	if (ex) {
		ex->verbose = verbose;
		ex->listen_text = listen_text;
		ex->listen_fd = TAKE_FD(fd);
	}
	if (!ex || pthread_mutex_init(&ex->lock, NULL) != 0 ||
	    pthread_mutex_init(&ex->conns_lock, NULL) != 0 || make_pages(ex) < 0) {
		cli_error("exporter: out of memory");
		return CLI_EXIT_FAILURE;
	}
	*ret_http = TAKE_PTR(ex);
	return CLI_EXIT_OK;
}

int exporter_http_publish(struct exporter_http *ex, const struct metrics_input *in, bool overdue)
{
	struct textbuf buf = {0};
	int r = metrics_render(in, &buf);

	if (r < 0) {
		textbuf_free(&buf);
		return r;
	}
	struct MHD_Response *page =
	        mhd.create_response_from_buffer(buf.len, buf.data, MHD_RESPMEM_MUST_FREE);
	if (!page) {
		textbuf_free(&buf);
		return -ENOMEM;
	}
	if (mhd.add_response_header(page, MHD_HTTP_HEADER_CONTENT_TYPE,
	                            "text/plain; version=0.0.4; charset=utf-8") != MHD_YES) {
		mhd.destroy_response(page);
		return -ENOMEM;
	}
	pthread_mutex_lock(&ex->lock);
	struct MHD_Response *old = ex->page;
	ex->page = page;
	ex->overdue = overdue;
	/* connections still sending the old page hold their own reference */
	if (old)
		mhd.destroy_response(old);
	pthread_mutex_unlock(&ex->lock);
	return 0;
}

/* The page's script's SHA-256 (hex, from the build) in base64, as CSP writes a hash. */
static void script_hash_base64(struct textbuf *b)
{
	static const char b64[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *hex = status_page_html_script_sha256;
	unsigned char d[32];
	char out[45];
	size_t o = 0;

	for (size_t i = 0; i < 32; i++) {
		unsigned v = 0;
		for (size_t k = 0; k < 2; k++) {
			char c = hex[2 * i + k];
			v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
		}
		d[i] = (unsigned char)v;
	}
	for (size_t i = 0; i < 32; i += 3) {
		unsigned v = (unsigned)d[i] << 16 | (i + 1 < 32 ? (unsigned)d[i + 1] << 8 : 0) |
		             (i + 2 < 32 ? d[i + 2] : 0);
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < 32 ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < 32 ? b64[v & 63] : '=';
	}
	out[o] = '\0';
	textbuf_puts(b, out);
}

static int status_config(struct exporter_http *ex, const struct gpuctl_config_status_page *sp)
{
	size_t n = 0;
	char origin[CSP_ORIGIN_MAX];
	struct textbuf csp = {0};

	ex->access = sp->access;
	while (sp->peers[n])
		n++;
	ex->origins = calloc(n ? n : 1, sizeof(*ex->origins));
	if (!ex->origins)
		return -ENOMEM;
	/* the page runs its own script only (by its hash: no inline event handler, no injected
	 * script) and loads nothing but this server's and the peers' documents
	 * (docs/status-page.md) */
	textbuf_puts(&csp, "default-src 'none'; script-src 'sha256-");
	script_hash_base64(&csp);
	textbuf_puts(&csp, "'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
	                   "form-action 'none'; frame-ancestors 'none'; connect-src 'self'");
	for (size_t i = 0; i < n; i++) {
		if (status_origin(sp->peers[i], origin, sizeof(origin)) < 0)
			continue;
		ex->origins[ex->n_origins] = strdup(origin);
		if (!ex->origins[ex->n_origins])
			return -ENOMEM;
		ex->n_origins++;
		textbuf_puts(&csp, " ");
		textbuf_puts(&csp, origin);
	}
	if (!csp.data || csp.failed ||
	    mhd.add_response_header(ex->status_page, "Content-Security-Policy", csp.data) !=
	            MHD_YES) {
		textbuf_free(&csp);
		return -ENOMEM;
	}
	ex->csp = csp.data;
	return 0;
}

int exporter_http_status_open(struct exporter_http *ex, const struct gpuctl_config *cfg,
                              struct status_history **ret_history)
{
	struct gpuctl_config_status_page sp;

	*ret_history = NULL;
	gpuctl_config_status_page(cfg, &sp);
	if (status_config(ex, &sp) < 0)
		return -ENOMEM;
	if (sp.access == GPUCTL_STATUS_PAGE_OFF)
		return 0;
	return status_history_new(cli_now(CLOCK_REALTIME), ret_history);
}

void exporter_http_publish_status(struct exporter_http *ex, char *text, size_t len)
{
	pthread_mutex_lock(&ex->lock);
	char *old = ex->status;
	ex->status = text;
	ex->status_len = len;
	pthread_mutex_unlock(&ex->lock);
	free(old);
}

int exporter_http_serve(struct exporter_http *ex, unsigned timeout_s)
{
	signal(SIGPIPE, SIG_IGN);
#ifdef __GLIBC__
	/* One malloc arena: MHD's thread would otherwise get an arena of its own, which keeps
	 * the connections' memory pools (EXPORTER_CONN_MEMORY each) resident after they close
	 * (measured: about 0.4 MiB more resident after 50 scrapers left). The sampler
	 * allocates once per interval, so the threads hardly ever contend. */
	mallopt(M_ARENA_MAX, 1);
#endif

	/* no listening socket of its own: the gate accepts and hands each connection over */
	ex->daemon = mhd.start_daemon(
	        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
	                MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
	        0, NULL, NULL, handle, ex, MHD_OPTION_CONNECTION_LIMIT,
	        (unsigned)EXPORTER_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EXPORTER_CONN_MEMORY,
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)EXPORTER_PER_IP,
	        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, ex, MHD_OPTION_NOTIFY_COMPLETED,
	        request_completed, ex, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, ex, MHD_OPTION_END);
	if (!ex->daemon) {
		cli_error("exporter: cannot start the HTTP server on '%s'", ex->listen_text);
		return CLI_EXIT_FAILURE;
	}
	/* three descriptors a connection (the client's socket and the pair): the soft limit is
	 * raised toward the hard one, since systemd starts services with 1024 */
	struct rlimit rl;
	rlim_t want = 3 * (rlim_t)EXPORTER_MAX_CONNECTIONS + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* the gate owns the listening socket from now on, even when it fails to start */
	int r = http_gate_start(TAKE_FD(ex->listen_fd), EXPORTER_MAX_CONNECTIONS, gate_add,
	                        ex->daemon, ex->verbose, &ex->gate);
	if (r < 0) {
		cli_error("exporter: cannot start serving on '%s': %s", ex->listen_text,
		          strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	ex->deadline_s = timeout_s;
	ex->reaping = pthread_create(&ex->reaper, NULL, reaper_main, ex) == 0;
	if (!ex->reaping)
		cli_error("exporter: no request deadline (cannot start a thread); the idle "
		          "timeout stays");
	return CLI_EXIT_OK;
}

void exporter_http_stop(struct exporter_http *ex)
{
	if (!ex)
		return;
	ex->stopping = 1;
	/* the gate first: it closes the listening socket and the clients' connections */
	http_gate_stop(ex->gate);
	ex->gate = NULL;
	if (ex->listen_fd >= 0)
		close(TAKE_FD(ex->listen_fd));
	if (ex->reaping)
		pthread_join(ex->reaper, NULL);
	ex->reaping = false;
	if (ex->daemon)
		mhd.stop_daemon(ex->daemon);
	ex->daemon = NULL;
}

void exporter_http_free(struct exporter_http *ex)
{
	if (!ex)
		return;
	exporter_http_stop(ex);
	struct MHD_Response **all[] = {
	        &ex->page,      &ex->index,    &ex->healthz,   &ex->unhealthy, &ex->notfound,
	        &ex->badmethod, &ex->toolarge, &ex->forbidden, &ex->unready,   &ex->status_page};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i])
			mhd.destroy_response(*all[i]);
	for (size_t i = 0; i < ex->n_origins; i++)
		free(ex->origins[i]);
	free(ex->origins);
	free(ex->csp);
	free(ex->status);
	pthread_mutex_destroy(&ex->lock);
	pthread_mutex_destroy(&ex->conns_lock);
	free(ex);
}
