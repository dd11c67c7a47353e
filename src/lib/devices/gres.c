// SPDX-License-Identifier: MIT
/*
 * gres.c: Slurm's view of this node's GPUs (gres.h, docs/slurm.md).
 *
 * Decisions:
 * - gres.conf is read as Slurm 22.05 reads it (slurm.schedmd.com/gres.conf.html; src/common/
 *   gres.c _parse_gres_config): one record per line, "Key=Value" words separated by blanks,
 *   keys in any case, '#' to the end of the line a comment, a '\' at the end of a line joins
 *   the next. A record starts with NodeName=, Name= or AutoDetect=; NodeName is a hostlist. Only
 *   Name=gpu records count. Anything we cannot read with certainty (an unknown first key, an
 *   unterminated bracket, Include) is -EINVAL: the caller then refuses to guess.
 * - Slurm numbers a node's GPUs by position: the device files of its gpu records in file order,
 *   a File= range expanded in the order written (src/plugins/gres/common/gres_common.c,
 *   common_node_config_load: index++ per file). With AutoDetect off nothing reorders them
 *   (gres_gpu.c sorts only when it merges autodetected GPUs).
 * - Hostlists: comma-separated entries outside brackets; an entry is prefix[ranges]suffix with
 *   one bracket group of N or N-M items; a range keeps the width of its lower bound when that
 *   has a leading zero ("[01-10]"), as Slurm's hostlist.c does. Several bracket groups in one
 *   entry (Slurm's multi-dimensional form) are refused.
 * - CPU topology: sysfs's online list and each CPU's physical_package_id and core_id. A core is
 *   a (package, core_id) pair. Slurm numbers cores as hwloc orders them (slurmd/common/
 *   xcpuinfo.c: abstract id = core's logical index): packages by their lowest CPU, cores within
 *   a package by their lowest CPU. On a DGX A100, CPUs 0 and 128 are core 0; CPU 64 is core 64.
 * - GPU types: Slurm's AutoDetect=nvml rule, so our lines and autodetected ones name the same
 *   type (src/plugins/gpu/nvml/gpu_nvml.c, _nvml_get_device_name, with gpu_common.c's
 *   gpu_common_underscorify_tolower; the same in 22.05 and 24.11): NVML's product name with
 *   every letter lower-cased and every space turned into '_', nothing else changed
 *   ("NVIDIA GeForce RTX 4090" -> "nvidia_geforce_rtx_4090"). A MIG device's type is its parent's
 *   cut at the first '-', then '_' and the profile ("nvidia_a100_1g.5gb"): gpu_nvml.c's
 *   _handle_mig and the loop that calls it (24.11 takes the profile from the MIG device's NVML
 *   name after "MIG", 22.05 rebuilds it from the slice count and memory; both give the profile
 *   name for the profiles of a whole GPU instance). A name with a character a gres.conf record
 *   or Gres= cannot carry (',', ':', '=', '#', quotes, control characters) is refused: Slurm
 *   would write it, and no slurm.conf could name it.
 * - Whole sockets: since 24.11, slurmctld refuses a gres.conf Cores= that covers part of a
 *   socket (src/interfaces/gres.c, _check_core_range_matches_sock, checks each socket's count
 *   of cores in the list: none or all; gres.conf(5), Cores: all the cores of a socket together,
 *   or of a NUMA node / L3 cache with SlurmdParameters=numa_node_as_socket / l3cache_as_socket).
 *   Slurm's scheduler co-allocates GRES and CPUs by socket in every version, so a finer list
 *   never changed a placement: gres_cores_whole_sockets widens a GPU's cores to its sockets.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include "gres.h"
#include "parse.h"
#include "util.h"

#define WORD_MAX  4096 /* longest Key=Value word */
#define NAME_MAX_ 256  /* longest expanded hostlist name */
#define LINE_MAX_ (64 * 1024)

_printf_(3, 4) static int fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		(void)vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* ---- hostlists ---- */

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int push_name(char ***names, size_t *n, size_t max, const char *s, size_t len)
{
	char **nn;

	if (*n >= max || len >= NAME_MAX_)
		return -EINVAL;
	nn = realloc(*names, (*n + 1) * sizeof(**names));
	if (!nn)
		return -ENOMEM;
	*names = nn;
	if (!(nn[*n] = strndup(s, len)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* digits [s, e) as a value, at most 9 digits */
static bool number(const char *s, const char *e, unsigned long *v)
{
	if (s == e || e - s > 9)
		return false;
	*v = 0;
	for (; s < e; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
		*v = *v * 10 + (unsigned long)(*s - '0');
	}
	return true;
}

/* one entry: prefix[ranges]suffix or a plain name */
static int expand_entry(const char *s, size_t len, size_t max, char ***names, size_t *n)
{
	const char *open = memchr(s, '[', len), *close, *p;
	char buf[NAME_MAX_];
	int r;

	if (!open) {
		if (memchr(s, ']', len))
			return -EINVAL;
		return len ? push_name(names, n, max, s, len) : -EINVAL;
	}
	close = memchr(open, ']', len - (size_t)(open - s));
	if (!close || memchr(close + 1, '[', len - (size_t)(close + 1 - s)) ||
	    memchr(close + 1, ']', len - (size_t)(close + 1 - s)) ||
	    memchr(s, ']', (size_t)(open - s)) || close == open + 1)
		return -EINVAL;
	for (p = open + 1; p < close;) {
		const char *comma = memchr(p, ',', (size_t)(close - p)),
		           *end = comma ? comma : close;
		const char *dash = memchr(p, '-', (size_t)(end - p));
		unsigned long lo, hi;
		int width = 0;

		if (!number(p, dash ? dash : end, &lo) || (dash && !number(dash + 1, end, &hi)))
			return -EINVAL;
		if (!dash)
			hi = lo;
		if (hi < lo || hi - lo >= max)
			return -EINVAL;
		if (*p == '0' && (dash ? dash : end) - p > 1)
			width = (int)((dash ? dash : end) - p);
		for (unsigned long v = lo; v <= hi; v++) {
			int k = snprintf(buf, sizeof(buf), "%.*s%0*lu%.*s", (int)(open - s), s,
			                 width, v, (int)(len - (size_t)(close + 1 - s)), close + 1);

			if (k < 0 || (size_t)k >= sizeof(buf))
				return -EINVAL;
			if ((r = push_name(names, n, max, buf, (size_t)k)) < 0)
				return r;
		}
		p = comma ? comma + 1 : close;
	}
	return 0;
}

int gres_hostlist_expand(const char *expr, size_t max, char ***ret_names)
{
	char **names = NULL;
	size_t n = 0;
	int depth = 0, r = 0;
	const char *start;

	if (!expr || !ret_names || !*expr)
		return -EINVAL;
	start = expr;
	for (const char *p = expr;; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']')
			depth--;
		if (depth < 0 || depth > 1) {
			r = -EINVAL;
			break;
		}
		if ((*p == ',' && depth == 0) || *p == '\0') {
			if (p == start ||
			    (r = expand_entry(start, (size_t)(p - start), max, &names, &n)) < 0) {
				r = r ? r : -EINVAL;
				break;
			}
			if (*p == '\0')
				break;
			start = p + 1;
		}
	}
	if (r == 0 && depth != 0)
		r = -EINVAL;
	if (r < 0) {
		free_names(names, n);
		return r;
	}
	*ret_names = names;
	return (int)n;
}

bool gres_hostlist_match(const char *expr, const char *name)
{
	char **names = NULL;
	bool found = false;
	int n = gres_hostlist_expand(expr, GRES_MAX_FILES, &names);

	for (int i = 0; i < n && !found; i++)
		found = streq(names[i], name);
	if (n > 0)
		free_names(names, (size_t)n);
	return found;
}

int gres_node_name(char *buf, size_t size)
{
	const char *env = secure_getenv("SLURMD_NODENAME");
	struct utsname u;

	if (!env || !env[0]) {
		if (uname(&u) < 0)
			return -errno;
		u.nodename[strcspn(u.nodename, ".")] = '\0';
		env = u.nodename;
	}
	if (!env[0])
		return -EINVAL;
	if (strlen(env) >= size)
		return -ENAMETOOLONG;
	memcpy(buf, env, strlen(env) + 1);
	return 0;
}

/* ---- gres.conf ---- */

void gres_gpus_free(struct gres_gpus *g)
{
	if (!g)
		return;
	free_names(g->files, g->n);
	*g = (struct gres_gpus){0};
}

struct word {
	char key[32];
	char value[WORD_MAX];
};

/* Splits a logical line into Key=Value words; at most max. -EINVAL for a word without '=' or
 * one too long. */
static int split_words(const char *line, struct word *w, size_t max, size_t *ret_n, char *why,
                       size_t whylen, unsigned lineno)
{
	size_t n = 0;
	const char *p = line;

	for (;;) {
		const char *s, *eq;
		size_t klen, vlen;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		s = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		eq = memchr(s, '=', (size_t)(p - s));
		if (!eq || eq == s)
			return fail(why, whylen, "line %u: '%.*s' is not Key=Value", lineno,
			            (int)((size_t)(p - s) > 40 ? 40 : (size_t)(p - s)), s);
		klen = (size_t)(eq - s);
		vlen = (size_t)(p - eq - 1);
		if (n >= max || klen >= sizeof(w->key) || vlen >= sizeof(w->value))
			return fail(why, whylen, "line %u: too long", lineno);
		memcpy(w[n].key, s, klen);
		w[n].key[klen] = '\0';
		memcpy(w[n].value, eq + 1, vlen);
		w[n].value[vlen] = '\0';
		/* a quoted value: Slurm's parser drops the quotes */
		if (vlen >= 2 && w[n].value[0] == '"' && w[n].value[vlen - 1] == '"') {
			memmove(w[n].value, w[n].value + 1, vlen - 2);
			w[n].value[vlen - 2] = '\0';
		}
		n++;
	}
	*ret_n = n;
	return 0;
}

static const char *word_get(const struct word *w, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(w[i].key, key) == 0)
			return w[i].value;
	return NULL;
}

static bool autodetect_on(const char *v)
{
	return strcasecmp(v, "off") != 0;
}

static int add_record(const struct word *w, size_t nw, struct gres_gpus *g, bool *node_auto,
                      bool *node_auto_set, char *why, size_t whylen, unsigned lineno)
{
	const char *name = word_get(w, nw, "Name"), *file = word_get(w, nw, "File");
	const char *ad = word_get(w, nw, "AutoDetect");
	char **names = NULL;
	int n;

	if (!file)
		file = word_get(w, nw, "Files");
	if (ad) {
		*node_auto = autodetect_on(ad);
		*node_auto_set = true;
	}
	if (!name || strcmp(name, "gpu") != 0)
		return 0;
	g->any_record = true;
	if (word_get(w, nw, "MultipleFiles")) {
		g->multiple_files = true;
		return 0;
	}
	if (!file) {
		g->no_file = true;
		return 0;
	}
	n = gres_hostlist_expand(file, GRES_MAX_FILES - g->n, &names);
	if (n == -ENOMEM)
		return n;
	if (n < 0)
		return fail(why, whylen, "line %u: File=%.60s: not a device file list", lineno,
		            file);
	char **nf = realloc(g->files, (g->n + (size_t)n) * sizeof(*nf));
	if (!nf) {
		free_names(names, (size_t)n);
		return -ENOMEM;
	}
	g->files = nf;
	memcpy(g->files + g->n, names, (size_t)n * sizeof(*names));
	g->n += (size_t)n;
	free(names);
	return 0;
}

int gres_conf_parse(const char *text, size_t len, const char *node, struct gres_gpus *ret,
                    char *why, size_t whylen)
{
	_cleanup_free_ char *line = malloc(LINE_MAX_);
	_cleanup_free_ struct word *w = calloc(64, sizeof(*w));
	struct gres_gpus g = {0};
	bool global_auto = false, node_auto = false, node_auto_set = false;
	size_t pos = 0, ll = 0;
	unsigned lineno = 0, first_line = 1;
	int r = 0;

	if (!ret || !node || (!text && len))
		return -EINVAL;
	if (!line || !w)
		return -ENOMEM;
	while (pos <= len && r == 0) {
		bool eol = pos == len || text[pos] == '\n';
		char c = eol ? '\0' : text[pos];

		pos++;
		if (!eol) {
			if (c == '\0' || c == '\r')
				c = ' ';
			if (ll + 1 >= LINE_MAX_) {
				r = fail(why, whylen, "line %u: too long", lineno + 1);
				break;
			}
			line[ll++] = c;
			continue;
		}
		lineno++;
		line[ll] = '\0';
		/* a comment runs to the end of the line */
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0', ll = (size_t)(hash - line);
		/* a '\' at the end joins the next line */
		while (ll > 0 && (line[ll - 1] == ' ' || line[ll - 1] == '\t'))
			line[--ll] = '\0';
		if (ll > 0 && line[ll - 1] == '\\' && pos <= len) {
			line[--ll] = ' ';
			ll++;
			continue;
		}
		size_t nw = 0;
		if ((r = split_words(line, w, 64, &nw, why, whylen, first_line)) < 0)
			break;
		ll = 0;
		first_line = lineno + 1;
		if (nw == 0)
			continue;
		if (strcasecmp(w[0].key, "NodeName") == 0) {
			if (!gres_hostlist_match(w[0].value, node))
				continue;
			r = add_record(w + 1, nw - 1, &g, &node_auto, &node_auto_set, why, whylen,
			               lineno);
		} else if (strcasecmp(w[0].key, "Name") == 0) {
			bool dummy_set = false, dummy = false;

			r = add_record(w, nw, &g, &dummy, &dummy_set, why, whylen, lineno);
		} else if (strcasecmp(w[0].key, "AutoDetect") == 0 && nw == 1) {
			global_auto = autodetect_on(w[0].value);
		} else {
			r = fail(why, whylen,
			         "line %u: '%s=' cannot start a record (NodeName=, Name= "
			         "or AutoDetect=)",
			         lineno, w[0].key);
		}
	}
	if (r < 0) {
		gres_gpus_free(&g);
		return r;
	}
	g.autodetect = node_auto_set ? node_auto : global_auto;
	*ret = g;
	return 0;
}

int gres_read_file(const char *path, size_t max, char **ret_text, size_t *ret_len)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *buf = NULL;
	size_t n;

	if (!f)
		return -errno;
	if (!(buf = malloc(max + 2)))
		return -ENOMEM;
	n = fread(buf, 1, max + 1, f);
	if (ferror(f))
		return -EIO;
	if (n > max)
		return -EFBIG;
	buf[n] = '\0';
	*ret_text = TAKE_PTR(buf);
	*ret_len = n;
	return 0;
}

/* ---- CPU topology ---- */

void cpu_topology_free(struct cpu_topology *t)
{
	if (!t)
		return;
	free(t->core_of);
	free(t->socket_first);
	*t = (struct cpu_topology){0};
}

static int read_text(const char *path, char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	return 0;
}

struct core_key {
	long pkg, core;
	size_t first_cpu;     /* the core's lowest CPU */
	size_t pkg_first_cpu; /* its package's lowest CPU */
};

static int cmp_core(const void *a, const void *b)
{
	const struct core_key *x = a, *y = b;

	if (x->pkg_first_cpu != y->pkg_first_cpu)
		return x->pkg_first_cpu < y->pkg_first_cpu ? -1 : 1;
	return x->first_cpu < y->first_cpu ? -1 : x->first_cpu > y->first_cpu;
}

/* The first abstract core of each socket of the sorted keys, and one past the last, into a new
 * array (NULL when out of memory); *ret_sockets their count. */
static unsigned *socket_starts(const struct core_key *keys, size_t nkeys, unsigned *ret_sockets)
{
	unsigned *first = calloc(nkeys + 1, sizeof(*first)), n = 0;

	if (!first)
		return NULL;
	for (size_t k = 0; k < nkeys; k++)
		if (k == 0 || keys[k].pkg != keys[k - 1].pkg)
			first[n++] = (unsigned)k;
	first[n] = (unsigned)nkeys;
	*ret_sockets = n;
	return first;
}

int cpu_topology_read(const char *sysfs_root, struct cpu_topology *ret, char *why, size_t whylen)
{
	char path[4096], text[8192];
	const char *root = sysfs_root;
	_cleanup_free_ uint64_t *online = NULL;
	_cleanup_free_ long *pkg = NULL, *core = NULL;
	_cleanup_free_ struct core_key *keys = NULL;
	_cleanup_free_ int *core_of = NULL;
	_cleanup_free_ unsigned *socket_first = NULL;
	size_t nbits = PARSE_CPULIST_MAX_CPU + 1, ncpus = 0, nkeys = 0;
	unsigned sockets = 0, tpc = 0;
	int r;

	if (!ret)
		return -EINVAL;
	if (!root)
		root = secure_getenv("GPUCTL_SYSFS");
	if (!root || !*root)
		root = "/sys";
	online = calloc(nbits / 64, sizeof(*online));
	if (!online)
		return -ENOMEM;
	(void)snprintf(path, sizeof(path), "%s/devices/system/cpu/online", root);
	if ((r = read_text(path, text, sizeof(text))) < 0) {
		(void)snprintf(why, whylen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (parse_cpulist(text, online, nbits) < 0) {
		(void)snprintf(why, whylen, "%s: not a cpulist", path);
		return -EINVAL;
	}
	for (size_t c = 0; c < nbits; c++)
		if (online[c / 64] >> (c % 64) & 1)
			ncpus = c + 1;
	pkg = calloc(ncpus, sizeof(*pkg));
	core = calloc(ncpus, sizeof(*core));
	keys = calloc(ncpus, sizeof(*keys));
	core_of = malloc(ncpus * sizeof(*core_of));
	if (!pkg || !core || !keys || !core_of)
		return -ENOMEM;
	for (size_t c = 0; c < ncpus; c++) {
		static const char *const names[2] = {"physical_package_id", "core_id"};
		long *dst[2] = {&pkg[c], &core[c]};

		core_of[c] = -1;
		if (!(online[c / 64] >> (c % 64) & 1))
			continue;
		for (int k = 0; k < 2; k++) {
			char *end;

			(void)snprintf(path, sizeof(path),
			               "%s/devices/system/cpu/cpu%zu/topology/%s", root, c,
			               names[k]);
			if ((r = read_text(path, text, sizeof(text))) < 0) {
				(void)snprintf(why, whylen, "%s: %s", path, strerror(-r));
				return r;
			}
			errno = 0;
			*dst[k] = strtol(text, &end, 10);
			if (errno || end == text || *end) {
				(void)snprintf(why, whylen, "%s: not a number", path);
				return -EINVAL;
			}
		}
		/* CPUs in increasing order: the first of a core or package is its lowest */
		size_t k = 0, pkg_first = c;
		for (size_t j = 0; j < nkeys; j++)
			if (keys[j].pkg == pkg[c])
				pkg_first = keys[j].pkg_first_cpu;
		while (k < nkeys && !(keys[k].pkg == pkg[c] && keys[k].core == core[c]))
			k++;
		if (k == nkeys)
			keys[nkeys++] = (struct core_key){pkg[c], core[c], c, pkg_first};
	}
	qsort(keys, nkeys, sizeof(*keys), cmp_core);
	if (!(socket_first = socket_starts(keys, nkeys, &sockets)))
		return -ENOMEM;
	for (size_t c = 0; c < ncpus; c++) {
		unsigned threads = 0;

		if (!(online[c / 64] >> (c % 64) & 1))
			continue;
		for (size_t k = 0; k < nkeys; k++)
			if (keys[k].pkg == pkg[c] && keys[k].core == core[c])
				core_of[c] = (int)k;
		for (size_t d = 0; d < ncpus; d++)
			threads += (online[d / 64] >> (d % 64) & 1) && pkg[d] == pkg[c] &&
			           core[d] == core[c];
		if (threads > tpc)
			tpc = threads;
	}
	*ret = (struct cpu_topology){
	        .core_of = TAKE_PTR(core_of),
	        .socket_first = TAKE_PTR(socket_first),
	        .n_cpus = ncpus,
	        .sockets = sockets,
	        .cores = (unsigned)nkeys,
	        .threads_per_core = tpc,
	};
	return 0;
}

/* ---- whole sockets ---- */

bool gres_cores_whole_sockets(const struct cpu_topology *t, const uint64_t *cores, uint64_t *ret,
                              size_t nbits)
{
	bool finer = false;

	memset(ret, 0, (nbits + 63) / 64 * sizeof(*ret));
	for (unsigned s = 0; s < t->sockets; s++) {
		unsigned first = t->socket_first[s], last = t->socket_first[s + 1];
		unsigned have = 0;

		for (unsigned c = first; c < last && c < nbits; c++)
			have += (unsigned)(cores[c / 64] >> (c % 64) & 1);
		if (!have)
			continue;
		finer |= have != last - first;
		for (unsigned c = first; c < last && c < nbits; c++)
			ret[c / 64] |= UINT64_C(1) << (c % 64);
	}
	return finer;
}

/* ---- types ---- */

/* A character a gres.conf record or slurm.conf's Gres= cannot carry inside a Type. */
static bool type_breaker(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '#' || c == '=' || c == ',' || c == ':' || c == '\\' ||
	       c == '"' || c == '\'';
}

int gres_gpu_type(const char *product, char *buf, size_t size)
{
	size_t n = 0;

	if (!product || !product[0] || !size)
		return -EINVAL;
	for (const char *p = product; *p; p++) {
		if (type_breaker((unsigned char)*p))
			return -EINVAL;
		if (n + 1 >= size)
			return -ENAMETOOLONG;
		buf[n++] = *p == ' ' ? '_' : (char)tolower((unsigned char)*p);
	}
	buf[n] = '\0';
	return 0;
}

int gres_mig_type(const char *product, const char *profile, char *buf, size_t size)
{
	char parent[GRES_TYPE_MAX];
	int r = gres_gpu_type(product, parent, sizeof(parent));

	if (r < 0)
		return r;
	if (!profile || !profile[0])
		return -EINVAL;
	for (const char *p = profile; *p; p++)
		if (type_breaker((unsigned char)*p) || *p == ' ')
			return -EINVAL;
	parent[strcspn(parent, "-")] = '\0';
	if ((size_t)snprintf(buf, size, "%s_%s", parent, profile) >= size)
		return -ENAMETOOLONG;
	return 0;
}
