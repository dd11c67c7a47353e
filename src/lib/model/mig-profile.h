/* SPDX-License-Identifier: MIT */
/*
 * mig-profile.h: MIG profile names ("1g.10gb", "1c.3g.20gb", "1g.24gb+me.all", "1g.24gb-me"),
 * parsed, compared and turned into Kubernetes resource names (src/lib/model/mig-profile.c). Private
 * to src/lib, the tests and the fuzzers.
 */
#ifndef GPUCTL_MIG_PROFILE_H
#define GPUCTL_MIG_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#define MIG_PROFILE_MAX_ATTRS 8  /* attributes after the sign */
#define MIG_PROFILE_ATTR_MAX  16 /* characters in one attribute */
#define MIG_PROFILE_NUM_MAX   9999

/* A parsed MIG profile name. */
struct mig_profile {
	unsigned c;  /* compute slices of the compute instance (g when the name has no "<C>c.") */
	unsigned g;  /* GPU slices of the GPU instance */
	unsigned gb; /* memory, GB as the name rounds it */
	char sign;   /* '+': attributes the GPU instance has; '-': ones it lacks; 0: none */
	size_t n_attrs;                                              /* entries in attrs */
	char attrs[MIG_PROFILE_MAX_ATTRS][MIG_PROFILE_ATTR_MAX + 1]; /* lowercase, sorted */
};

/* Parses s ("[<C>c.]<G>g.<M>gb[(+|-)<attr>[,<attr>...]]", case-insensitive). 0 and *ret filled, or
 * -EINVAL with *ret_why saying what is wrong (static text) and *ret untouched. */
int mig_profile_parse(const char *s, struct mig_profile *ret, const char **ret_why);
bool mig_profile_equal(const struct mig_profile *a, const struct mig_profile *b);
/* The canonical name of p ("<C>c." only when c differs from g); snprintf's return. */
int mig_profile_format(const struct mig_profile *p, char *buf, size_t size);
/* Whether a device named name (NVML's profile) is of the requested profile: compared as parsed
 * profiles when both parse, else as text ignoring case. */
bool mig_profile_matches(const char *request, const char *name);
/* The NVIDIA device plugin's resource name (without "nvidia.com/") of profile name: "mig-" and
 * the name with '+' replaced by '.' ("1g.5gb+me" -> "mig-1g.5gb.me"). -EINVAL when the result
 * is not a Kubernetes resource name (lowercase letters, digits, '-', '.'; alphanumeric ends),
 * -ENOSPC when buf is too small. */
int mig_profile_k8s_name(const char *name, char *buf, size_t size);

#endif
