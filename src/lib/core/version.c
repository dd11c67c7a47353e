// SPDX-License-Identifier: MIT
/*
 * version.c: the library's version at run time (gpuctl_version).
 *
 * Decisions:
 * - The numbers come from CMake's project(gpuctl VERSION ...), passed to this file alone as
 *   GPUCTL_PROJECT_VERSION_* (so a new version recompiles one file); include/gpuctl/version.h
 *   keeps literal GPUCTL_VERSION_* macros so that the installed headers need no generated
 *   file. The static assertions below make the library fail to build when the two disagree, and
 *   tests/unit/test-version.c checks the string and the run-time answer.
 */
#include <stddef.h>

#include "gpuctl/gpuctl.h"

#if !defined(GPUCTL_PROJECT_VERSION_MAJOR) || !defined(GPUCTL_PROJECT_VERSION_MINOR) ||            \
        !defined(GPUCTL_PROJECT_VERSION_PATCH) || !defined(GPUCTL_PROJECT_VERSION)
#error "build version.c with GPUCTL_PROJECT_VERSION* from CMake (src/lib/CMakeLists.txt)"
#endif

_Static_assert(GPUCTL_VERSION_MAJOR == GPUCTL_PROJECT_VERSION_MAJOR &&
                       GPUCTL_VERSION_MINOR == GPUCTL_PROJECT_VERSION_MINOR &&
                       GPUCTL_VERSION_PATCH == GPUCTL_PROJECT_VERSION_PATCH,
               "GPUCTL_VERSION_* in include/gpuctl/version.h differ from project(gpuctl VERSION) "
               "in CMakeLists.txt");
_Static_assert(sizeof(GPUCTL_VERSION_STRING) == sizeof(GPUCTL_PROJECT_VERSION),
               "GPUCTL_VERSION_STRING in include/gpuctl/version.h differs from project(gpuctl "
               "VERSION) in CMakeLists.txt");
_Static_assert(GPUCTL_PROJECT_VERSION_MINOR < 256 && GPUCTL_PROJECT_VERSION_PATCH < 256,
               "GPUCTL_VERSION_NUMBER has one byte for the minor and the patch version");

const char *gpuctl_version(unsigned *ret_major, unsigned *ret_minor, unsigned *ret_patch)
{
	if (ret_major)
		*ret_major = GPUCTL_PROJECT_VERSION_MAJOR;
	if (ret_minor)
		*ret_minor = GPUCTL_PROJECT_VERSION_MINOR;
	if (ret_patch)
		*ret_patch = GPUCTL_PROJECT_VERSION_PATCH;
	return GPUCTL_PROJECT_VERSION;
}
