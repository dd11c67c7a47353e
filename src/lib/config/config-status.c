// SPDX-License-Identifier: MIT
/*
 * config-status.c: the status page's settings (docs/config.md, "Status page"; docs/status-page.md):
 * `status_page`, who may read it (off, local: loopback clients only, network), `peers`, the
 * other agents whose /api/v1/status the page shows beside this one's, and `status_page_users`,
 * whether the page and its JSON name users. config.c hands the keys here
 * (config_status_key); gpuctl_config_status_page answers the query.
 *
 * Decisions:
 * - Global settings only: one server serves one page.
 * - status_page is local by default: `--listen` has listened on every address since the
 *   exporter began (Prometheus scrapes from another host), and the page says more than the
 *   metrics (who waits, which commands), so other hosts see it only when the file says network.
 * - A peer is a base URL, http:// or https:// then a host, an optional :PORT and an optional
 *   path, in the characters of RFC 3986's unreserved set and ":/[]%" only: no user
 *   information ('@'), query or fragment, no quote, '<' or blank. The page puts these URLs in
 *   the DOM and in fetch(), and the server compares its clients' Origin with them (CORS): a
 *   narrow alphabet keeps both simple. A trailing '/' is dropped, so the page appends
 *   "/api/v1/status" the same way to every peer.
 * - At most CONFIG_MAX_PEERS peers of CONFIG_MAX_PEER_LEN bytes each: a page is for a team's
 *   handful of servers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config-internal.h"
#include "util.h"

static const char *const no_peers[] = {NULL};

void config_status_free(struct status_keys *s)
{
	for (size_t i = 0; s->peers && s->peers[i]; i++)
		free(s->peers[i]);
	free(s->peers);
	s->peers = NULL;
}

void gpuctl_config_status_page(const struct gpuctl_config *cfg,
                               struct gpuctl_config_status_page *ret)
{
	*ret = (struct gpuctl_config_status_page){.peers = no_peers,
	                                          .access = GPUCTL_STATUS_PAGE_LOCAL};
	if (!cfg)
		return;
	if (cfg->status.peers)
		ret->peers = (const char *const *)cfg->status.peers;
	ret->hide_users = cfg->status.hide_users;
	if (cfg->status.line[2])
		ret->access = cfg->status.access;
}

static bool peer_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("-._~:/[]%", c);
}

/* One peer URL, s[0..len): 0, or -EINVAL (message on p). */
static int check_peer(struct parser *p, const char *s, size_t len)
{
	char q[QUOTE_MAX + 4];
	size_t host;

	quote_text(q, sizeof(q), s, len, QUOTE_MAX);
	if (len > CONFIG_MAX_PEER_LEN)
		return config_perr(p, "peers: '%s' is longer than %d bytes", q,
		                   CONFIG_MAX_PEER_LEN);
	if (len > 7 && !strncmp(s, "http://", 7))
		host = 7;
	else if (len > 8 && !strncmp(s, "https://", 8))
		host = 8;
	else
		return config_perr(p, "peers: '%s' is not an http:// or https:// URL", q);
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !peer_char(s[i]))
			return config_perr(p,
			                   "peers: '%s': only letters, digits and -._~:/[]%% may "
			                   "appear in a peer's URL (no user, query or fragment)",
			                   q);
	if (s[host] == '/' || s[host] == ':')
		return config_perr(p, "peers: '%s' names no host", q);
	return 0;
}

/* "URL, URL, ..." into s->peers. */
static int set_peers(struct parser *p, struct status_keys *s, const char *value)
{
	size_t n = 0;
	const char *v = value;

	s->peers = calloc(CONFIG_MAX_PEERS + 1, sizeof(*s->peers));
	if (!s->peers)
		return config_perr(p, "out of memory");
	for (;;) {
		const char *comma = strchr(v, ',');
		size_t len = comma ? (size_t)(comma - v) : strlen(v);
		const char *b = v;

		while (len && (*b == ' ' || *b == '\t')) {
			b++;
			len--;
		}
		while (len && (b[len - 1] == ' ' || b[len - 1] == '\t'))
			len--;
		if (!len)
			return config_perr(p, "peers: an empty entry (expected URL, URL, ...)");
		int r = check_peer(p, b, len);
		if (r < 0)
			return r;
		while (len > 1 && b[len - 1] == '/' && b[len - 2] != '/')
			len--;
		if (n == CONFIG_MAX_PEERS)
			return config_perr(p, "peers: more than %d peers", CONFIG_MAX_PEERS);
		s->peers[n] = strndup(b, len);
		if (!s->peers[n++])
			return config_perr(p, "out of memory");
		if (!comma)
			return 0;
		v = comma + 1;
	}
}

int config_status_key(struct parser *p, const char *key, const char *value)
{
	struct status_keys *s = &p->cfg->status;
	char q[QUOTE_MAX + 4];
	int k;

	if (!strcmp(key, "peers"))
		k = 0;
	else if (!strcmp(key, "status_page_users"))
		k = 1;
	else if (!strcmp(key, "status_page"))
		k = 2;
	else
		return 1;
	if (p->cur)
		return config_perr(p,
		                   "key '%s' in [pool %s]: it is a global setting (put it before "
		                   "the first [pool NAME] header)",
		                   key, p->cur->name);
	if (s->line[k])
		return config_perr(p, "key '%s' given twice (first on line %u)", key, s->line[k]);
	s->line[k] = p->line;
	if (!value[0])
		return config_perr(p, "empty value for '%s'", key);
	if (k == 0)
		return set_peers(p, s, value);
	if (k == 2) {
		static const char *const words[] = {"off", "local", "network"};
		for (int i = 0; i < 3; i++)
			if (!strcmp(value, words[i])) {
				s->access = (enum gpuctl_status_page_access)i;
				return 0;
			}
		quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
		return config_perr(p, "status_page '%s': not off, local or network", q);
	}
	if (!strcmp(value, "show") || !strcmp(value, "hide")) {
		s->hide_users = value[0] == 'h';
		return 0;
	}
	quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
	return config_perr(p, "status_page_users '%s': not show or hide", q);
}
