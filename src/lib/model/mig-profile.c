// SPDX-License-Identifier: MIT
/*
 * mig-profile.c: MIG profile names, as NVIDIA's MIG user guide ("MIG device names", "Supported
 * MIG profiles") and NVIDIA's go-nvlib (pkg/nvlib/device/mig_profile.go, the parser NVIDIA's
 * Kubernetes device plugin and mig-parted use) spell them.
 *
 * Grammar (our own reading of those sources):
 *   [<C>c.]<G>g.<M>gb[<sign><attr>[,<attr>...]]
 * - <C>, <G>, <M>: decimal numbers; "<C>c." names a compute instance smaller than its GPU
 *   instance (1c.3g.20gb); without it the compute instance is the whole GPU instance (C = G).
 * - sign '+': attributes the GPU instance has: "me" (media extensions, 1g.10gb+me), "me.all"
 *   (all media engines, 1g.24gb+me.all on RTX PRO Blackwell), "gfx" (graphics, 1g.24gb+gfx);
 *   sign '-': attributes it lacks ("-me": no media extensions, 1g.24gb-me). Only one sign.
 * - an attribute: letters, digits and dots, starting with a letter, not ending with a dot; a
 *   list is comma-separated and names each attribute once.
 *
 * Decisions:
 * - Case-insensitive (NVML prints lowercase; a user may not); attributes are kept lowercase
 *   and sorted, so "+gfx,me" and "+me,gfx" are one profile, as go-nvlib compares them.
 * - Stricter than go-nvlib where it is lax: numbers are 1 to 9999 digits-only (no sign, no
 *   blanks), no empty dot-separated piece in an attribute.
 * - Kubernetes names follow the device plugin: '+' becomes '.', the rest is kept, and a name
 *   that is not a valid resource name (a comma, an upper-case letter) is refused, never
 *   rewritten into some other resource.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mig-profile.h"

/* Digits at *s up to the letter(s) unit (case-insensitive); advances *s past the unit. */
static bool number_with_unit(const char **s, const char *unit, unsigned *ret)
{
	const char *p = *s;
	unsigned long v = 0;
	size_t n = 0, ul = strlen(unit);

	while (isdigit((unsigned char)p[n])) {
		v = v * 10 + (unsigned long)(p[n] - '0');
		if (v > MIG_PROFILE_NUM_MAX)
			return false;
		n++;
	}
	if (n == 0 || v == 0 || strncasecmp(p + n, unit, ul) != 0)
		return false;
	*ret = (unsigned)v;
	*s = p + n + ul;
	return true;
}

static int cmp_attr(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* One attribute of length len at s into out (lowercase); NULL or the reason it is not one. */
static const char *parse_attr(const char *s, size_t len, char *out)
{
	if (len == 0)
		return "an empty attribute";
	if (len > MIG_PROFILE_ATTR_MAX)
		return "an attribute longer than 16 characters";
	if (!isalpha((unsigned char)s[0]))
		return "an attribute must start with a letter";
	if (s[len - 1] == '.')
		return "an attribute must not end with '.'";
	for (size_t i = 0; i < len; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '.')
			return "an attribute holds only letters, digits and dots";
		if (s[i] == '.' && s[i + 1] == '.')
			return "an attribute has an empty part between dots";
		out[i] = (char)tolower((unsigned char)s[i]);
	}
	out[len] = '\0';
	return NULL;
}

int mig_profile_parse(const char *s, struct mig_profile *ret, const char **ret_why)
{
	struct mig_profile p = {0};
	const char *q = s, *why = NULL;
	unsigned first;

	if (!s || !ret)
		return -EINVAL;
	if (!number_with_unit(&q, "c.", &first)) {
		if (!number_with_unit(&q, "g.", &p.g)) {
			why = "expected <G>g.<M>gb or <C>c.<G>g.<M>gb";
			goto bad;
		}
		p.c = p.g;
	} else {
		p.c = first;
		if (!number_with_unit(&q, "g.", &p.g)) {
			why = "expected <G>g. after <C>c.";
			goto bad;
		}
	}
	if (!number_with_unit(&q, "gb", &p.gb)) {
		why = "expected the memory as <M>gb";
		goto bad;
	}
	if (*q == '+' || *q == '-') {
		p.sign = *q++;
		for (;;) {
			size_t len = strcspn(q, ",");

			if (p.n_attrs == MIG_PROFILE_MAX_ATTRS) {
				why = "more than 8 attributes";
				goto bad;
			}
			why = parse_attr(q, len, p.attrs[p.n_attrs]);
			if (why)
				goto bad;
			for (size_t k = 0; k < p.n_attrs; k++)
				if (strcmp(p.attrs[k], p.attrs[p.n_attrs]) == 0) {
					why = "an attribute named twice";
					goto bad;
				}
			p.n_attrs++;
			q += len;
			if (*q != ',')
				break;
			q++;
		}
	}
	if (*q != '\0') {
		why = *q == '+' || *q == '-' ? "'+' and '-' attributes together"
		                             : "unexpected text after the profile";
		goto bad;
	}
	qsort(p.attrs, p.n_attrs, sizeof(p.attrs[0]), cmp_attr);
	*ret = p;
	return 0;
bad:
	if (ret_why)
		*ret_why = why;
	return -EINVAL;
}

bool mig_profile_equal(const struct mig_profile *a, const struct mig_profile *b)
{
	if (a->c != b->c || a->g != b->g || a->gb != b->gb || a->n_attrs != b->n_attrs ||
	    (a->n_attrs && a->sign != b->sign))
		return false;
	for (size_t k = 0; k < a->n_attrs; k++)
		if (strcmp(a->attrs[k], b->attrs[k]) != 0)
			return false;
	return true;
}

int mig_profile_format(const struct mig_profile *p, char *buf, size_t size)
{
	int n, r;

	if (p->c != p->g)
		n = snprintf(buf, size, "%uc.%ug.%ugb", p->c, p->g, p->gb);
	else
		n = snprintf(buf, size, "%ug.%ugb", p->g, p->gb);
	for (size_t k = 0; n >= 0 && k < p->n_attrs; k++) {
		r = snprintf(buf + ((size_t)n < size ? (size_t)n : size),
		             (size_t)n < size ? size - (size_t)n : 0, "%c%s", k ? ',' : p->sign,
		             p->attrs[k]);
		n = r < 0 ? r : n + r;
	}
	return n;
}

bool mig_profile_matches(const char *request, const char *name)
{
	struct mig_profile a, b;

	if (!request || !name)
		return false;
	if (mig_profile_parse(request, &a, NULL) == 0 && mig_profile_parse(name, &b, NULL) == 0)
		return mig_profile_equal(&a, &b);
	return strcasecmp(request, name) == 0;
}

int mig_profile_k8s_name(const char *name, char *buf, size_t size)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0)
		return -EINVAL;
	if (len + 5 > size)
		return -ENOSPC;
	memcpy(buf, "mig-", 4);
	for (size_t i = 0; i < len; i++) {
		char ch = name[i] == '+' ? '.' : name[i];

		if (!(islower((unsigned char)ch) || isdigit((unsigned char)ch) || ch == '-' ||
		      ch == '.'))
			return -EINVAL;
		buf[4 + i] = ch;
	}
	buf[4 + len] = '\0';
	if (!isalnum((unsigned char)buf[3 + len]))
		return -EINVAL;
	return 0;
}
