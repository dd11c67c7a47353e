// SPDX-License-Identifier: MIT
/*
 * fuzz-mig-profile.c: libFuzzer target for the MIG profile parser (src/lib/model/mig-profile.c),
 * which reads `--mig PROFILE` and the profile names NVML reports.
 *
 * The input is one NUL-terminated name. Properties checked beyond "no crash, no leak": a refused
 * name leaves the result untouched and says why; an accepted name formats to a canonical name
 * that parses to an equal profile and formats to itself; a profile matches its canonical name;
 * a Kubernetes resource name, when there is one, holds only lowercase letters, digits, '-' and
 * '.', starts with "mig-" and ends alphanumeric.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mig-profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mig_profile p, q, untouched;
	char canon[256], again[256], k8s[128];
	const char *why = NULL;
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&untouched, 0x5a, sizeof(untouched));
	memcpy(&p, &untouched, sizeof(p));
	if (mig_profile_parse(text, &p, &why) < 0) {
		if (!why || memcmp(&p, &untouched, sizeof(p)) != 0)
			abort();
	} else {
		int n = mig_profile_format(&p, canon, sizeof(canon));

		if (n <= 0 || (size_t)n >= sizeof(canon))
			abort();
		if (mig_profile_parse(canon, &q, &why) < 0 || !mig_profile_equal(&p, &q))
			abort();
		if (mig_profile_format(&q, again, sizeof(again)) != n || strcmp(canon, again) != 0)
			abort();
		if (!mig_profile_matches(text, canon) || !mig_profile_matches(canon, text))
			abort();
	}
	if (mig_profile_k8s_name(text, k8s, sizeof(k8s)) == 0) {
		size_t len = strlen(k8s);

		if (strncmp(k8s, "mig-", 4) != 0 || !isalnum((unsigned char)k8s[len - 1]))
			abort();
		for (size_t i = 0; i < len; i++)
			if (!islower((unsigned char)k8s[i]) && !isdigit((unsigned char)k8s[i]) &&
			    k8s[i] != '-' && k8s[i] != '.')
				abort();
	}
	free(text);
	return 0;
}
