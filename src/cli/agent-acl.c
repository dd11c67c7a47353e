// SPDX-License-Identifier: MIT
/*
 * agent-acl.c: the agent's enforce = acl (docs/agent.md, "Enforcement: acl"; issue 28): the
 * device nodes of every GPU of a pool whose enforce is acl are closed to users, and each user
 * holding a lease on the GPU (or on one of its MIG devices) gets read-write through a POSIX ACL
 * entry, taken away at the first sample that finds the lease gone.
 *
 * Decisions:
 * - Closed means owner root, group root, mode 0600 with the ACL user::rw-, group::---,
 *   other::---; open to holders adds user:UID:rw- for each and mask::rw- (so `ls -l` shows
 *   0660: the group bits show the mask). Root bypasses all of it (CAP_DAC_OVERRIDE).
 * - Whose node: the GPU's /dev/nvidiaN to its exclusive holder, every shared holder, and the
 *   holders of its MIG devices (CUDA opens the parent GPU's node for a MIG device: NVIDIA's MIG
 *   user guide, "Device Nodes and Capabilities"); a MIG device's GPU- and compute-instance
 *   access capabilities (/dev/nvidia-caps/nvidia-capN) to the holders of that MIG device and of
 *   the whole GPU. The nodes every CUDA process opens (nvidiactl, nvidia-uvm, ...) are never
 *   touched. The map is the library's (gpuctl_devnodes_read), read at each sample.
 * - A holder is its owner record's uid (the file system's word, not the record's text); a held
 *   lease whose record cannot be trusted grants nobody.
 * - Every change goes through an O_PATH descriptor of the node opened without following a
 *   symlink and checked to be the character device the map names (/proc/self/fd/N for chown,
 *   chmod and the ACL), so a symlink or another file put in its place is never changed.
 * - The original owner, group, mode and ACL of each node closed are written to the state file
 *   before the node is changed, and put back when the agent stops (SIGTERM), and at the first
 *   sample that finds its GPU out of acl mode. A crashed agent leaves its nodes closed (safe:
 *   only the holders of that moment keep access); the next one reads the state file, so it
 *   restores the true originals and re-derives the grants from the leases at its first sample.
 * - A node the agent cannot close (missing, another file, no ACL support) is said once and left
 *   as it is; sampling goes on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <acl/libacl.h> /* acl_equiv_mode, acl_to_any_text (Linux extensions) */
#include <sys/acl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent-acl.h"
#include "agent-proto.h"
#include "agent-state.h"
#include "cmd.h"

#define CLOSED_MODE 0600 /* root's own; users only through ACL entries */

/* A set of uids, sorted. */
struct uids {
	uint32_t *v;
	size_t n;
};

/* A node the agent has closed. */
struct guarded {
	char *path;
	uint32_t major, minor;
	uint32_t mode, uid, gid; /* the original owner and mode (st_mode & 07777) */
	char *acl;               /* its original access ACL as text; NULL: none beyond the mode */
	struct uids granted;     /* users it is open to now */
	bool applied;            /* granted is on the node */
	bool wanted;             /* in acl mode at this sample */
	bool failing;            /* a change failed (said once) */
};

struct agent_acl {
	char *dev_dir;
	char *state_path;
	struct guarded *g;
	size_t n;
	bool state_failing; /* the state file could not be written (said once) */
	bool *unknown;      /* per GPU index: its node is not known (said once) */
	bool unsure;        /* this sample did not know some node of a GPU in acl mode */
	size_t n_unknown;
};

/* A node this sample wants closed and open to uids. */
struct want {
	const struct gpuctl_devnode *node;
	struct uids uids;
};

static int uids_add(struct uids *u, uint32_t uid)
{
	size_t i = 0;

	while (i < u->n && u->v[i] < uid)
		i++;
	if (i < u->n && u->v[i] == uid)
		return 0;
	uint32_t *v = realloc(u->v, (u->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memmove(v + i + 1, v + i, (u->n - i) * sizeof(*v));
	v[i] = uid;
	u->v = v;
	u->n++;
	return 0;
}

static int uids_merge(struct uids *u, const struct uids *from)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < from->n; i++)
		r = uids_add(u, from->v[i]);
	return r;
}

static bool uids_equal(const struct uids *a, const struct uids *b)
{
	return a->n == b->n && (a->n == 0 || !memcmp(a->v, b->v, a->n * sizeof(*a->v)));
}

static void uids_free(struct uids *u)
{
	free(u->v);
	*u = (struct uids){0};
}

/* ---- the state file ---- */

/* One line: "MODE UID GID MAJOR:MINOR ACL PATH" (octal mode, ACL text or "-", the path last). */
static int state_print(FILE *f, void *arg)
{
	const struct agent_acl *a = arg;

	for (size_t i = 0; i < a->n; i++) {
		const struct guarded *g = &a->g[i];
		if (fprintf(f, "%o %" PRIu32 " %" PRIu32 " %" PRIu32 ":%" PRIu32 " %s %s\n",
		            g->mode, g->uid, g->gid, g->major, g->minor, g->acl ? g->acl : "-",
		            g->path) < 0)
			return -EIO;
	}
	return 0;
}

static int state_write(struct agent_acl *a)
{
	if (!a->state_path)
		return 0;
	if (a->n == 0)
		return unlink(a->state_path) < 0 && errno != ENOENT ? -errno : 0;
	return agent_state_write(a->state_path, state_print, a);
}

/* The state file's nodes into a (each restored at the first sample unless wanted). Only a
 * root-owned file not writable by others, in a directory only root can change, and only
 * entries for nodes under the dev directory are believed. */
static int state_read(struct agent_acl *a)
{
	FILE *f = agent_state_open(a->state_path);
	char line[8192];

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (agent_state_getline(f, line, sizeof(line))) {
		struct agent_acl_state e;
		struct guarded g = {0};
		void *p;

		if (!agent_acl_state_line(line, a->dev_dir, &e))
			continue;
		if (!(p = realloc(a->g, (a->n + 1) * sizeof(*a->g))))
			break;
		a->g = p;
		g = (struct guarded){.mode = e.mode,
		                     .uid = e.uid,
		                     .gid = e.gid,
		                     .major = e.major,
		                     .minor = e.minor,
		                     .path = strdup(e.path),
		                     .acl = e.acl ? strdup(e.acl) : NULL};
		a->g[a->n++] = g;
	}
	fclose(f);
	return 0;
}

/* ---- the nodes ---- */

/* Opens path as an O_PATH descriptor, checked to be character device major:minor; -errno
 * (-ENOTTY: another file). */
static int node_open(const char *path, uint32_t major, uint32_t minor, struct stat *ret_st)
{
	int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0 || !S_ISCHR(ret_st->st_mode) || major(ret_st->st_rdev) != major ||
	    minor(ret_st->st_rdev) != minor) {
		close(fd);
		return -ENOTTY;
	}
	return fd;
}

/* Sets the access ACL text on the file of fd (an O_PATH descriptor): 0 or -errno. */
static int fd_set_acl(int fd, const char *text)
{
	char proc[64];
	acl_t acl = acl_from_text(text);
	int r = 0;

	if (!acl)
		return -EINVAL;
	(void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (acl_set_file(proc, ACL_TYPE_ACCESS, acl) < 0)
		r = -errno;
	acl_free(acl);
	return r;
}

/* What g is to be: closed, open to g->granted (not yet applied). */
static int node_close(const struct guarded *g)
{
	struct stat st;
	char proc[64], text[8192];
	size_t len;
	int fd = node_open(g->path, g->major, g->minor, &st), r = 0;

	if (fd < 0)
		return fd;
	(void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	len = (size_t)snprintf(text, sizeof(text), "u::rw-,g::---,o::---%s",
	                       g->granted.n ? ",m::rw-" : "");
	for (size_t i = 0; i < g->granted.n && len < sizeof(text); i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, ",u:%" PRIu32 ":rw-",
		                        g->granted.v[i]);
	if (len >= sizeof(text))
		r = -E2BIG;
	/* owner first: a user who owned the node must not keep user::rw- */
	if (r == 0 && (st.st_uid != 0 || st.st_gid != 0) && chown(proc, 0, 0) < 0)
		r = -errno;
	if (r == 0)
		r = fd_set_acl(fd, text);
	close(fd);
	return r;
}

/* Puts g's original owner, group, ACL and mode back. */
static int node_restore(const struct guarded *g)
{
	struct stat st;
	char proc[64];
	int fd = node_open(g->path, g->major, g->minor, &st), r = 0;

	if (fd < 0)
		return fd;
	(void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (chown(proc, g->uid, g->gid) < 0)
		r = -errno;
	/* the ACL first (it sets the permission bits), then the mode's other bits */
	if (r == 0 && g->acl)
		r = fd_set_acl(fd, g->acl);
	else if (r == 0)
		r = fd_set_acl(fd, "u::rw-,g::---,o::---"); /* drops every extended entry */
	if (r == 0 && chmod(proc, g->mode) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* The original state of the node of w into g (not yet closed). */
static int guard_new(const struct want *w, struct guarded *g)
{
	struct stat st;
	char proc[64];
	int fd = node_open(w->node->path, w->node->major, w->node->minor, &st);
	acl_t acl;

	if (fd < 0)
		return fd;
	*g = (struct guarded){.major = w->node->major,
	                      .minor = w->node->minor,
	                      .mode = st.st_mode & 07777,
	                      .uid = st.st_uid,
	                      .gid = st.st_gid};
	(void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	acl = acl_get_file(proc, ACL_TYPE_ACCESS);
	if (acl) {
		/* a minimal ACL is the mode alone: nothing to keep */
		if (acl_equiv_mode(acl, NULL) == 1) {
			char *t = acl_to_any_text(acl, NULL, ',', TEXT_NUMERIC_IDS);
			if (t) {
				g->acl = strdup(t);
				acl_free(t);
			}
		}
		acl_free(acl);
	}
	close(fd);
	g->path = strdup(w->node->path);
	return g->path ? 0 : -ENOMEM;
}

static void guarded_free(struct guarded *g)
{
	free(g->path);
	free(g->acl);
	uids_free(&g->granted);
}

/* ---- one sample ---- */

/* The pool index of GPU g (SIZE_MAX: the default pool). */
static size_t pool_of(const struct exporter_view *v, size_t g)
{
	const char *name = v->pool_of && v->pool_of[g] ? v->pool_of[g] : "";
	size_t i = SIZE_MAX;

	if (name[0] && strcmp(name, "default") != 0 &&
	    gpuctl_config_pool_find(NULL, gpuctl_site_config(v->site), name, &i) < 0)
		i = SIZE_MAX;
	return i;
}

static bool gpu_in_acl_mode(const struct exporter_view *v, size_t g)
{
	struct gpuctl_config_enforce e;

	gpuctl_config_pool_enforce(gpuctl_site_config(v->site), pool_of(v, g), &e);
	return e.enforce == GPUCTL_ENFORCE_ACL;
}

/* The users holding each device: holders[g][0] the whole GPU's, holders[g][1 + m] MIG m's. */
static int holders_read(const struct exporter_view *v, struct uids **holders)
{
	for (size_t i = 0; v->leases && i < gpuctl_lease_list_count(v->leases); i++) {
		const struct gpuctl_lease_owner *const *owners = NULL;
		size_t g, n_own = 0, slot;
		int mig, r = 0;

		if (gpuctl_lease_list_get(v->leases, i, &g, &mig, NULL, NULL, NULL) < 0 ||
		    !holders[g] || gpuctl_lease_list_holders(v->leases, i, &owners, &n_own) < 0)
			continue;
		slot = mig < 0 ? 0 : (size_t)mig + 1;
		if (slot > gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(v->snap, g)))
			continue;
		for (size_t k = 0; r == 0 && k < n_own; k++)
			if (owners[k]->uid != 0)
				r = uids_add(&holders[g][slot], owners[k]->uid);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Adds node (open to uids) to the wants, merging a node wanted twice (a GPU instance's
 * capability shared by its compute instances). */
static int want_add(struct want **ws, size_t *n, const struct gpuctl_devnode *node,
                    const struct uids *uids)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*ws)[i].node->path, node->path))
			return uids_merge(&(*ws)[i].uids, uids);
	struct want *p = realloc(*ws, (*n + 1) * sizeof(**ws));
	if (!p)
		return -ENOMEM;
	*ws = p;
	p[*n] = (struct want){.node = node};
	(*n)++;
	return uids_merge(&p[*n - 1].uids, uids);
}

/* Says once that GPU g's node is not known (so not guarded), and again after it was. */
static void say_unknown(struct agent_acl *a, size_t g, bool unknown)
{
	if (g >= a->n_unknown) {
		bool *p = realloc(a->unknown, (g + 1) * sizeof(*p));
		if (!p)
			return;
		memset(p + a->n_unknown, 0, (g + 1 - a->n_unknown) * sizeof(*p));
		a->unknown = p;
		a->n_unknown = g + 1;
	}
	if (unknown && !a->unknown[g])
		cli_error("agent: acl: GPU %zu: its device node is not known (no driver file gives "
		          "its minor: docs/agent.md, \"Device nodes\"), so it is not guarded",
		          g);
	a->unknown[g] = unknown;
}

/* The nodes of GPU g (in acl mode) and of its MIG devices, with their users. */
static int want_gpu(struct agent_acl *a, struct want **ws, size_t *n,
                    const struct gpuctl_devnodes *map, size_t g, size_t n_mig, struct uids *h)
{
	const struct gpuctl_devnode *const *nodes;
	struct uids all = {0};
	size_t k;
	int r = 0;
	bool known = gpuctl_devnodes_of(map, g, -1, &nodes, &k) == 0;

	say_unknown(a, g, !known);
	a->unsure |= !known;
	for (size_t s = 0; r == 0 && s <= n_mig; s++)
		r = uids_merge(&all, &h[s]);
	if (r == 0 && known)
		r = want_add(ws, n, nodes[0], &all);
	for (size_t m = 0; r == 0 && m < n_mig; m++) {
		struct uids mine = {0};

		if (gpuctl_devnodes_of(map, g, (int)m, &nodes, &k) < 0) {
			a->unsure = true;
			continue;
		}
		r = uids_merge(&mine, &h[0]);
		if (r == 0)
			r = uids_merge(&mine, &h[m + 1]);
		for (size_t j = 1; r == 0 && j < k; j++) /* nodes[0] is the GPU's, above */
			r = want_add(ws, n, nodes[j], &mine);
		uids_free(&mine);
	}
	uids_free(&all);
	return r;
}

/* "alice, bob" (or uids) of u into buf. */
static void names_text(const struct uids *u, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < u->n && len < size; i++) {
		struct passwd pw, *pp = NULL;
		char pbuf[1024];
		int w;

		if (getpwuid_r(u->v[i], &pw, pbuf, sizeof(pbuf), &pp) == 0 && pp)
			w = snprintf(buf + len, size - len, "%s%s", i ? ", " : "", pp->pw_name);
		else
			w = snprintf(buf + len, size - len, "%s%" PRIu32, i ? ", " : "", u->v[i]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

/* Whether g's node is still as the agent left it: root's, its mode 0600 (0660 with entries:
 * the mask), a character device of its numbers. One lstat a sample; the entries themselves
 * only root can change. */
static bool still_closed(const struct guarded *g)
{
	struct stat st;

	return lstat(g->path, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == g->major &&
	       minor(st.st_rdev) == g->minor && st.st_uid == 0 && st.st_gid == 0 &&
	       (st.st_mode & 07777) == (g->granted.n ? 0660u : (unsigned)CLOSED_MODE);
}

/* Closes w's node (taking it over when new) with w's users. */
static void apply(struct agent_acl *a, const struct want *w)
{
	struct guarded *g = NULL;
	char who[512];
	int r;

	for (size_t i = 0; i < a->n && !g; i++)
		if (!strcmp(a->g[i].path, w->node->path))
			g = &a->g[i];
	if (!g) {
		struct guarded fresh;
		void *p = realloc(a->g, (a->n + 1) * sizeof(*a->g));

		if (!p)
			return;
		a->g = p;
		if ((r = guard_new(w, &fresh)) < 0) {
			cli_error("agent: acl: %s: %s (left as it is)", w->node->path,
			          r == -ENOTTY ? "not the character device the driver names"
			                       : strerror(-r));
			return;
		}
		a->g[a->n++] = fresh;
		g = &a->g[a->n - 1];
		/* the original is on disk before the node changes */
		if ((r = state_write(a)) < 0 && !a->state_failing) {
			cli_error("agent: acl: state file %s: %s (a crash would lose the nodes' "
			          "original modes)",
			          a->state_path, strerror(-r));
			a->state_failing = true;
		}
	}
	g->wanted = true;
	if (g->applied && uids_equal(&g->granted, &w->uids)) {
		if (still_closed(g))
			return;
		/* recreated (a driver reload: udev's mode) or changed by someone else */
		cli_error("agent: acl: %s: changed under the agent, closing it again", g->path);
	}
	uids_free(&g->granted);
	if (uids_merge(&g->granted, &w->uids) < 0)
		return;
	r = node_close(g);
	g->applied = r == 0;
	if (r < 0) {
		if (!g->failing)
			cli_error("agent: acl: %s: %s (tried again every sample)", g->path,
			          strerror(-r));
		g->failing = true;
		return;
	}
	g->failing = false;
	names_text(&g->granted, who, sizeof(who));
	cli_error("agent: acl: %s: %s%s", g->path, g->granted.n ? "open to " : "closed to users",
	          who);
}

/* Restores the nodes this sample does not want (all of them with every); keep: none, when the
 * sample did not know some node of a GPU in acl mode (a GPU lost for a moment must not open
 * its node: closed is the safe side). */
static void release(struct agent_acl *a, bool every, bool keep)
{
	size_t n = 0;
	bool changed = false;

	for (size_t i = 0; i < a->n; i++) {
		struct guarded *g = &a->g[i];
		int r;

		if ((g->wanted || keep) && !every) {
			g->wanted = false;
			a->g[n++] = *g;
			continue;
		}
		r = node_restore(g);
		if (r < 0 && r != -ENOENT && r != -ENOTTY && !every) {
			/* keep it closed and its original known; tried again next sample */
			if (!g->failing)
				cli_error("agent: acl: %s: cannot restore: %s", g->path,
				          strerror(-r));
			g->failing = true;
			a->g[n++] = *g;
			continue;
		}
		if (r < 0)
			cli_error("agent: acl: %s: cannot restore: %s", g->path, strerror(-r));
		else
			cli_error("agent: acl: %s: restored (mode %04o)", g->path, g->mode);
		guarded_free(g);
		changed = true;
	}
	a->n = n;
	if (changed)
		(void)state_write(a);
}

void agent_acl_sample(struct agent_acl *a, const struct exporter_view *v)
{
	size_t n_gpus = gpuctl_snapshot_gpu_count(v->snap), n_w = 0;
	struct gpuctl_devnodes *map = NULL;
	struct uids **holders = NULL;
	struct want *ws = NULL;
	bool any = false;
	int r = 0;

	a->unsure = false;
	for (size_t g = 0; g < n_gpus && !any; g++)
		any = gpu_in_acl_mode(v, g);
	if (!any) {
		release(a, false, false);
		return;
	}
	/* no lease list (the lease directory unreadable this sample): change nothing rather than
	 * take every holder's entry away until it reads again */
	if (!v->leases)
		return;
	if (gpuctl_devnodes_read(v->ctx, v->snap, a->dev_dir, &map) < 0 ||
	    !(holders = calloc(n_gpus, sizeof(*holders))))
		goto out;
	for (size_t g = 0; g < n_gpus && r == 0; g++)
		if (gpu_in_acl_mode(v, g) &&
		    !(holders[g] = calloc(gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(v->snap, g)) + 1,
		                          sizeof(**holders))))
			r = -ENOMEM;
	if (r == 0)
		r = holders_read(v, holders);
	for (size_t g = 0; g < n_gpus && r == 0; g++)
		if (holders[g])
			r = want_gpu(a, &ws, &n_w, map, g,
			             gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(v->snap, g)),
			             holders[g]);
	/* out of memory: change nothing this sample (no grant taken away by mistake) */
	if (r == 0) {
		for (size_t i = 0; i < n_w; i++)
			apply(a, &ws[i]);
		release(a, false, a->unsure);
	}
out:
	for (size_t i = 0; i < n_w; i++)
		uids_free(&ws[i].uids);
	free(ws);
	for (size_t g = 0; holders && g < n_gpus; g++) {
		size_t n_slots = gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(v->snap, g)) + 1;
		for (size_t s = 0; holders[g] && s < n_slots; s++)
			uids_free(&holders[g][s]);
		free(holders[g]);
	}
	free(holders);
	gpuctl_devnodes_free(map);
}

int agent_acl_new(const char *dev_dir, const char *state_path, struct agent_acl **ret)
{
	struct agent_acl *a = calloc(1, sizeof(*a));
	int r;

	if (!a || !(a->dev_dir = strdup(dev_dir)) ||
	    (state_path && !(a->state_path = strdup(state_path)))) {
		agent_acl_free(a);
		return -ENOMEM;
	}
	if (a->state_path && (r = state_read(a)) < 0)
		cli_error("agent: acl: state file %s: %s", a->state_path, strerror(-r));
	*ret = a;
	return 0;
}

void agent_acl_free(struct agent_acl *a)
{
	if (!a)
		return;
	release(a, true, false);
	free(a->g);
	free(a->unknown);
	free(a->dev_dir);
	free(a->state_path);
	free(a);
}
