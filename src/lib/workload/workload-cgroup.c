/* SPDX-License-Identifier: MIT */
/*
 * workload-cgroup.c: what a cgroup path says a process works for (workload-internal.h). The
 * layouts, each from its documented source (docs/workloads.md, "Layouts"):
 *
 * - Slurm, task/cgroup. cgroup v1 (Slurm's cgroup.conf(5) and "Cgroups Guide"): each
 *   controller's hierarchy holds /slurm/uid_<uid>/job_<jobid>/step_<stepid>/task_<taskid>, the
 *   top folder "slurm_<nodename>" when slurmd runs several nodes on one host (the %n of
 *   CgroupMountpoint's layout). cgroup v2 (Slurm's "cgroup v2 plugin" page): slurmd's scope
 *   slurmstepd.scope (<nodename>_slurmstepd.scope for a multiple-slurmd host) holds
 *   job_<jobid>/step_<stepid>/user/task_<taskid> (and step_<stepid>/slurm for the stepd). Steps
 *   are numbered or named batch, extern, interactive.
 * - Kubernetes (kubelet's "cgroup drivers" and pod QoS pages, "Configuring a cgroup driver"):
 *   the systemd driver nests kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice
 *   (a Guaranteed pod: kubepods-pod<uid>.slice right under kubepods.slice), the uid's dashes
 *   written '_' since '-' nests slices (systemd.slice(5)); the CRI names the container's scope
 *   cri-containerd-<id>.scope (containerd's CRI plugin), crio-<id>.scope (CRI-O) or
 *   docker-<id>.scope (cri-dockerd). The cgroupfs driver: /kubepods/<qos>/pod<uid>/<id> and
 *   /kubepods/pod<uid>/<id>.
 * - docker (docker's "Runtime metrics" page): docker-<id>.scope under the systemd driver,
 *   /docker/<id> under cgroupfs. podman (podman-run(1) --cgroup-manager, --cgroups=split):
 *   libpod-<id>.scope (optionally with a "container" child), /libpod_parent/libpod-<id> under
 *   cgroupfs, rootless under the user's user@<uid>.service; libpod-conmon-<id>.scope is the
 *   monitor conmon, not the container. nerdctl: nerdctl-<id>.scope; containerd's CRI outside a
 *   pod: cri-containerd-<id>.scope. LXC (lxc.container.conf(5), lxc.cgroup.dir): lxc.payload.<name>
 *   (LXC 4 and later) and /lxc/<name>.
 * - systemd (systemd.special(7), user@.service(5), systemd-logind.service(8)): system services
 *   under system.slice/<name>.service, a user's under
 *   user.slice/user-<uid>.slice/user@<uid>.service/app.slice/<name>.service, login sessions'
 *   scopes user-<uid>.slice/session-<id>.scope.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "util.h"
#include "workload-internal.h"

/* The components kept of a path: the last ones (prefixes come first). */
#define WL_COMPS 128

struct comp {
	const char *s;
	size_t n;
};

bool wl_copy(char *dst, const char *s, size_t n)
{
	const char *nul = memchr(s, '\0', n);
	bool cut = false;

	if (nul)
		n = (size_t)(nul - s);
	if (n > GPUCTL_WORKLOAD_NAME_MAX) {
		n = GPUCTL_WORKLOAD_NAME_MAX;
		/* back to the lead byte of a sequence the cut would split (at most 3 back) */
		for (size_t k = 0; k < 3 && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; k++)
			n--;
		cut = true;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	return cut;
}

bool wl_is_hex_id(const char *s, size_t n)
{
	if (n < 12 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool comp_is(const struct comp *c, const char *lit)
{
	return c->n == strlen(lit) && memcmp(c->s, lit, c->n) == 0;
}

/* Whether c is prefix + middle + suffix; *mid and *mid_n the middle (may be empty). */
static bool comp_split(const struct comp *c, const char *prefix, const char *suffix,
                       const char **mid, size_t *mid_n)
{
	size_t p = strlen(prefix), q = strlen(suffix);

	if (c->n < p + q || memcmp(c->s, prefix, p) != 0 || memcmp(c->s + c->n - q, suffix, q) != 0)
		return false;
	*mid = c->s + p;
	*mid_n = c->n - p - q;
	return true;
}

static bool comp_num(const struct comp *c, const char *prefix, const char *suffix, uint32_t *ret)
{
	const char *m;
	size_t n;

	return comp_split(c, prefix, suffix, &m, &n) && parse_dec_u32(m, n, ret);
}

static bool comp_hex(const struct comp *c, const char *prefix, const char *suffix, const char **id,
                     size_t *id_n)
{
	return comp_split(c, prefix, suffix, id, id_n) && wl_is_hex_id(*id, *id_n);
}

static void set_str(struct wl_class *r, char *dst, const char *s, size_t n)
{
	if (wl_copy(dst, s, n))
		r->truncated = true;
}

/* ---- Slurm ---- */

static bool slurm_step_ok(const char *s, size_t n)
{
	uint32_t v;
	struct comp c = {s, n};

	return parse_dec_u32(s, n, &v) || comp_is(&c, "batch") || comp_is(&c, "extern") ||
	       comp_is(&c, "interactive");
}

static bool match_slurm(const struct comp *c, size_t n, struct wl_class *r)
{
	for (size_t i = 1; i < n; i++) {
		uint32_t job, uid;
		const char *m;
		size_t mn;
		bool v2 = comp_is(&c[i - 1], "slurmstepd.scope") ||
		          (comp_split(&c[i - 1], "", "_slurmstepd.scope", &m, &mn) && mn > 0);
		bool v1 = i >= 2 && comp_num(&c[i - 1], "uid_", "", &uid) &&
		          (comp_is(&c[i - 2], "slurm") ||
		           (comp_split(&c[i - 2], "slurm_", "", &m, &mn) && mn > 0));

		if (!(v1 || v2) || !comp_num(&c[i], "job_", "", &job))
			continue;
		r->kind = GPUCTL_WORKLOAD_SLURM;
		r->slurm_job = job;
		if (i + 1 < n && comp_split(&c[i + 1], "step_", "", &m, &mn) &&
		    slurm_step_ok(m, mn))
			set_str(r, r->slurm_step, m, mn);
		return true;
	}
	return false;
}

/* ---- Kubernetes ---- */

/* A pod uid as a cgroup writes it (sep '_' for the systemd driver, '-' for cgroupfs): lower-case
 * hex and separators, 32 to 36 characters (an API server's UUID, or a static pod's hash).
 * Written into r->pod_uid with dashes. */
static bool pod_uid(struct wl_class *r, const char *s, size_t n, char sep)
{
	char buf[40];
	size_t hex = 0;

	if (n < 32 || n > 36)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == sep)
			buf[i] = '-';
		else if ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))
			buf[i] = s[i], hex++;
		else
			return false;
	}
	if (hex < 32)
		return false;
	set_str(r, r->pod_uid, buf, n);
	return true;
}

static bool qos(const struct comp *c)
{
	return comp_is(c, "burstable") || comp_is(c, "besteffort");
}

/* The pod slice or folder at c[i]: systemd driver or cgroupfs. */
static bool pod_at(const struct comp *c, size_t i, struct wl_class *r, bool *systemd)
{
	const char *m;
	size_t mn;

	if (i >= 1 && (comp_is(&c[i - 1], "kubepods.slice") ||
	               comp_is(&c[i - 1], "kubepods-burstable.slice") ||
	               comp_is(&c[i - 1], "kubepods-besteffort.slice"))) {
		*systemd = true;
		if (comp_split(&c[i], "kubepods-burstable-pod", ".slice", &m, &mn) ||
		    comp_split(&c[i], "kubepods-besteffort-pod", ".slice", &m, &mn) ||
		    comp_split(&c[i], "kubepods-pod", ".slice", &m, &mn))
			return pod_uid(r, m, mn, '_');
		return false;
	}
	*systemd = false;
	if ((i >= 1 && comp_is(&c[i - 1], "kubepods")) ||
	    (i >= 2 && qos(&c[i - 1]) && comp_is(&c[i - 2], "kubepods")))
		return comp_split(&c[i], "pod", "", &m, &mn) && pod_uid(r, m, mn, '-');
	return false;
}

static bool match_pod(const struct comp *c, size_t n, struct wl_class *r)
{
	for (size_t i = 1; i < n; i++) {
		const char *id = NULL;
		size_t idn = 0;
		bool systemd;

		if (!pod_at(c, i, r, &systemd))
			continue;
		r->kind = GPUCTL_WORKLOAD_POD;
		if (i + 1 < n) {
			const struct comp *s = &c[i + 1];
			bool ok = true;

			if (systemd && comp_hex(s, "cri-containerd-", ".scope", &id, &idn))
				r->runtime = "containerd";
			else if (systemd && (comp_hex(s, "crio-", ".scope", &id, &idn) ||
			                     comp_hex(s, "cri-o-", ".scope", &id, &idn)))
				r->runtime = "cri-o";
			else if (systemd && comp_hex(s, "docker-", ".scope", &id, &idn))
				r->runtime = "docker";
			else if (!systemd && comp_hex(s, "crio-", "", &id, &idn))
				r->runtime = "cri-o";
			else
				ok = !systemd && comp_hex(s, "", "", &id, &idn);
			if (!ok)
				id = NULL;
		}
		if (id)
			set_str(r, r->id, id, idn);
		return true;
	}
	return false;
}

/* ---- containers outside Kubernetes ---- */

static const char *container_at(const struct comp *c, size_t i, const char **id, size_t *idn)
{
	const struct comp *p = i >= 1 ? &c[i - 1] : NULL;

	if (comp_hex(&c[i], "docker-", ".scope", id, idn) ||
	    (p && comp_is(p, "docker") && comp_hex(&c[i], "", "", id, idn)))
		return "docker";
	if (comp_hex(&c[i], "libpod-", ".scope", id, idn) ||
	    (p && comp_is(p, "libpod_parent") && comp_hex(&c[i], "libpod-", "", id, idn)))
		return "podman";
	if (comp_hex(&c[i], "nerdctl-", ".scope", id, idn) ||
	    comp_hex(&c[i], "cri-containerd-", ".scope", id, idn))
		return "containerd";
	if (comp_hex(&c[i], "crio-", ".scope", id, idn) ||
	    comp_hex(&c[i], "cri-o-", ".scope", id, idn))
		return "cri-o";
	if ((comp_split(&c[i], "lxc.payload.", "", id, idn) && *idn > 0) ||
	    (p && comp_is(p, "lxc") && c[i].n > 0 && (*id = c[i].s, *idn = c[i].n, true)))
		return "lxc";
	return NULL;
}

static bool match_container(const struct comp *c, size_t n, struct wl_class *r)
{
	/* the outermost: the host's runtime made it, and only the host's state names it */
	for (size_t i = 0; i < n; i++) {
		const char *id;
		size_t idn;
		const char *rt = container_at(c, i, &id, &idn);

		if (!rt)
			continue;
		r->kind = GPUCTL_WORKLOAD_CONTAINER;
		r->runtime = rt;
		set_str(r, r->id, id, idn);
		return true;
	}
	return false;
}

/* ---- systemd units and sessions ---- */

static bool match_unit(const struct comp *c, size_t n, struct wl_class *r)
{
	/* the innermost service or session scope */
	for (size_t i = n; i-- > 0;) {
		const char *m;
		size_t mn;
		uint32_t uid;

		if (comp_split(&c[i], "session-", ".scope", &m, &mn) && mn > 0 && i >= 1 &&
		    comp_num(&c[i - 1], "user-", ".slice", &uid)) {
			r->kind = GPUCTL_WORKLOAD_SESSION;
			r->unit_uid = uid;
			set_str(r, r->name, c[i].s, c[i].n);
			return true;
		}
		if (!comp_split(&c[i], "", ".service", &m, &mn) || mn == 0)
			continue;
		r->kind = GPUCTL_WORKLOAD_UNIT;
		set_str(r, r->name, c[i].s, c[i].n);
		/* a unit of a user's manager (user@U.service above it) is that user's; the manager
		 * itself is a system unit */
		for (size_t k = 0; k < i; k++)
			if (comp_num(&c[k], "user@", ".service", &uid))
				r->unit_uid = uid;
		return true;
	}
	return false;
}

static void init_class(struct wl_class *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = GPUCTL_WORKLOAD_BARE;
	r->unit_uid = UINT32_MAX;
	r->user_uid = UINT32_MAX;
}

void wl_classify_path(const char *path, size_t len, struct wl_class *ret)
{
	struct comp c[WL_COMPS];
	size_t n = 0, first = 0;

	init_class(ret);
	if (wl_copy(ret->cgroup, path, len))
		ret->truncated = true;
	/* the components, keeping the last WL_COMPS in a ring */
	for (size_t i = 0; i < len;) {
		size_t j = i;

		while (j < len && path[j] != '/')
			j++;
		if (j > i) {
			c[(first + n) % WL_COMPS] = (struct comp){path + i, j - i};
			if (n < WL_COMPS)
				n++;
			else
				first = (first + 1) % WL_COMPS;
		}
		i = j + 1;
	}
	if (first) { /* unroll the ring */
		struct comp tmp[WL_COMPS];

		for (size_t i = 0; i < n; i++)
			tmp[i] = c[(first + i) % WL_COMPS];
		memcpy(c, tmp, sizeof(tmp));
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t uid;

		if (comp_num(&c[i], "user@", ".service", &uid))
			ret->user_uid = uid;
	}
	if (match_slurm(c, n, ret) || match_pod(c, n, ret) || match_container(c, n, ret) ||
	    match_unit(c, n, ret))
		return;
}

static int rank(enum gpuctl_workload_kind k)
{
	switch (k) {
	case GPUCTL_WORKLOAD_SLURM:
	case GPUCTL_WORKLOAD_POD:
	case GPUCTL_WORKLOAD_CONTAINER:
		return 3;
	case GPUCTL_WORKLOAD_UNIT:
	case GPUCTL_WORKLOAD_SESSION:
		return 2;
	default:
		return 1;
	}
}

/* Lines are at most this many: more is no kernel's file. */
#define WL_CGROUP_LINES 64

int wl_parse_cgroup(const char *text, size_t len, struct wl_class *ret)
{
	uint32_t seen[WL_CGROUP_LINES];
	size_t lines = 0;
	struct wl_class best, cur;
	int best_rank = 0, best_pri = -1;

	init_class(ret);
	for (size_t i = 0; i < len;) {
		const char *l = text + i, *nl = memchr(l, '\n', len - i);
		size_t ln = nl ? (size_t)(nl - l) : len - i;
		const char *c1 = memchr(l, ':', ln), *c2;
		uint32_t id;
		int r, pri;

		i += ln + 1;
		if (ln == 0 && !nl)
			break;
		c2 = c1 ? memchr(c1 + 1, ':', ln - (size_t)(c1 - l) - 1) : NULL;
		if (!c2 || !parse_dec_u32(l, (size_t)(c1 - l), &id) || lines == WL_CGROUP_LINES)
			return init_class(ret), 0; /* malformed: trusted for nothing */
		for (size_t k = 0; k < lines; k++)
			if (seen[k] == id)
				return init_class(ret), 0;
		seen[lines++] = id;
		wl_classify_path(c2 + 1, ln - (size_t)(c2 + 1 - l), &cur);
		if (id == 0 && c2 == c1 + 1)
			pri = 2;
		else if ((size_t)(c2 - c1 - 1) == strlen("name=systemd") &&
		         memcmp(c1 + 1, "name=systemd", strlen("name=systemd")) == 0)
			pri = 1;
		else
			pri = 0;
		r = rank(cur.kind);
		if (r > best_rank || (r == best_rank && pri > best_pri)) {
			best = cur;
			best_rank = r;
			best_pri = pri;
		}
	}
	if (lines == 0)
		return -ENODATA;
	*ret = best;
	return 0;
}
