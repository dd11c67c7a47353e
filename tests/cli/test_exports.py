"""libgpuctl's exported names (docs/ARCHITECTURE.md, "Exported names").

- The public static library (build/lib/libgpuctl.a, the one `make install` installs) defines no
  global symbol but the functions include/gpuctl/ declares (gpuctl.h, the umbrella, includes
  every header there): every internal name
  (ctx_error, parse_size, snapshot_*, ...) is local to its one object.
- libgpuctl.so.0 exports exactly the functions gpuctl.h declares, no internal helper, and every
  one of them.
- A program that defines, for its own use, every name the library has inside (ctx_error,
  ctx_log, parse_size and all the other globals of build/lib/libgpuctl-internal.a) links
  statically against libgpuctl.a and runs on a simulated machine, the library using its own
  functions and the program its own. Against the internal archive the same link fails, which
  shows the test means something.
The header's functions are read from the headers themselves, gpuctl.h through the preprocessor
(no comments, no macros; it includes the others): a gpuctl_ name directly followed by "(" is a
declaration. A function declared in a private header of src/lib, even with the gpuctl_ prefix,
is hidden: neither list has it.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import BUILD, CC, NM, NVSIM, SANITIZE_FLAGS, SCENARIOS, SRC, GpuctlTestCase, run

INCLUDE = os.path.join(SRC, "include")
HEADER = os.path.join(INCLUDE, "gpuctl", "gpuctl.h")
PUBLIC_A = os.path.join(BUILD, "lib", "libgpuctl.a")
INTERNAL_A = os.path.join(BUILD, "lib", "libgpuctl-internal.a")
SHARED = os.path.join(BUILD, "lib", "libgpuctl.so.0")


def header_functions():
    pre = subprocess.run([CC, "-E", "-P", "-I", INCLUDE, HEADER], capture_output=True,
                         text=True, check=True).stdout
    return set(re.findall(r"\b(gpuctl_\w+)\s*\(", pre))


def defined_globals(path, dynamic=False):
    """{name: nm type} of the global (or dynamic) symbols path defines."""
    args = [NM, "--defined-only", "-D" if dynamic else "-g", path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3:
            syms[f[2].split("@")[0]] = f[1]
    return syms


class Exports(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.header = header_functions()
        # the header has its whole API: a parse that found next to nothing would pass anything
        assert {"gpuctl_ctx_new", "gpuctl_version", "gpuctl_health_verdict"} <= cls.header, \
            cls.header

    def test_public_archive_defines_only_the_header_functions(self):
        syms = defined_globals(PUBLIC_A)
        stray = sorted(n for n in syms if not n.startswith("gpuctl_"))
        self.assertEqual(stray, [], "internal names global in libgpuctl.a")
        self.assertEqual(sorted(set(syms) - self.header), [], "not declared in gpuctl.h")
        self.assertEqual(sorted(self.header - set(syms)), [], "declared but not defined")
        self.assertEqual({t for t in syms.values()}, {"T"}, syms)

    def test_shared_library_exports_exactly_the_header_functions(self):
        syms = defined_globals(SHARED, dynamic=True)
        # the version node of libgpuctl.sym is an absolute symbol, not a function
        self.assertEqual(syms.pop("LIBGPUCTL_0", None), "A")
        self.assertEqual(sorted(set(syms) - self.header), [], "exported, not in gpuctl.h")
        self.assertEqual(sorted(self.header - set(syms)), [], "in gpuctl.h, not exported")
        self.assertEqual({t for t in syms.values()}, {"T"}, syms)

    def test_internal_archive_keeps_every_name(self):
        # the CLI, unit tests and fuzzers link it for the private headers
        syms = defined_globals(INTERNAL_A)
        self.assertIn("ctx_error", syms)
        self.assertIn("snapshot_new_empty", syms)
        self.assertLessEqual(self.header, set(syms))


PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <gpuctl/gpuctl.h>

/* Names libgpuctl uses inside, defined here for this program's own purposes. */
static int own_calls;
int ctx_error(int r, const char *fmt);
int ctx_error(int r, const char *fmt)
{
	(void)fmt;
	own_calls++;
	return r;
}
void ctx_log(void);
void ctx_log(void)
{
	own_calls++;
}
int parse_size(const char *s, unsigned long long *ret, const char **why);
int parse_size(const char *s, unsigned long long *ret, const char **why)
{
	(void)s;
	(void)why;
	*ret = 42;
	own_calls++;
	return 0;
}
@OTHERS@

int main(void)
{
	static const char conf[] = "busy_memory = 512MiB\n";
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_config *cfg = NULL;
	size_t *idx = NULL, n = 0;
	unsigned long long mine = 0;
	int r;

	if (gpuctl_ctx_new(&ctx) < 0)
		return 1;
	r = gpuctl_snapshot_take(ctx, GPUCTL_SNAP_BASIC, &snap);
	if (r < 0) {
		fprintf(stderr, "%s\n", gpuctl_errmsg(ctx));
		gpuctl_ctx_free(ctx);
		return 1;
	}
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap); i++)
		printf("%s\n", gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, i), GPUCTL_F_UUID));
	/* the library's error path (its own ctx_error) and its size parser (its own parse_size) */
	r = gpuctl_ids_resolve(ctx, snap, "nosuch", &idx, &n);
	printf("ids %d: %s\n", r, gpuctl_errmsg(ctx));
	r = gpuctl_config_parse(ctx, "test.conf", conf, strlen(conf), &cfg);
	printf("config %d: busy_memory %llu\n", r,
	       r < 0 ? 0ull : (unsigned long long)gpuctl_config_settings(cfg)->busy_memory);
	/* none of that called this program's functions; this program gets its own */
	printf("own calls %d\n", own_calls);
	parse_size("1G", &mine, NULL);
	printf("own parse_size %llu\n", mine);
	gpuctl_config_free(cfg);
	free(idx);
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	return 0;
}
"""


class StaticLinkCollision(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-exports-")
        names = sorted(n for n in defined_globals(INTERNAL_A)
                       if re.fullmatch(r"[a-z][a-z0-9_]*", n) and not n.startswith("gpuctl_")
                       and n not in ("ctx_error", "ctx_log", "parse_size"))
        assert "snapshot_new_empty" in names and "ctx_log_once" in names, names
        others = "".join(f"int {n}(void);\nint {n}(void)\n{{\n\treturn ++own_calls;\n}}\n"
                         for n in names)
        cls.src = os.path.join(cls.tmp, "collide.c")
        with open(cls.src, "w") as f:
            f.write("#include <stdlib.h>\n" + PROGRAM.replace("@OTHERS@", others))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def link(self, archive, exe):
        # the static library's own needs, as libgpuctl.pc's Libs.private lists them (jansson:
        # the runtimes' state files, src/lib/workload/; sqlite3: the ledger, src/lib/ledger/)
        return subprocess.run([CC, "-std=c17", "-Wall", "-Wextra", "-Werror", *SANITIZE_FLAGS,
                               "-I", INCLUDE, self.src, archive, "-ldl", "-lm", "-ljansson",
                               "-lsqlite3", "-o", exe],
                              capture_output=True, text=True)

    def test_program_with_internal_names_links_and_runs(self):
        exe = os.path.join(self.tmp, "collide")
        p = self.link(PUBLIC_A, exe)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = run([NVSIM, "exec", "hgx-h100", "--", exe])
        self.assertEqual(r.rc, 0, r)
        with open(os.path.join(SCENARIOS, "hgx-h100.json")) as f:
            uuids = [g["uuid"] for g in json.load(f)["gpus"]]
        lines = r.out.splitlines()
        self.assertEqual(lines[:len(uuids)], uuids)
        self.assertRegex(lines[len(uuids)], r"^ids -22: .*'nosuch'")
        self.assertEqual(lines[len(uuids) + 1], "config 0: busy_memory 536870912")
        self.assertEqual(lines[len(uuids) + 2:], ["own calls 0", "own parse_size 42"])

    def test_same_program_collides_with_internal_archive(self):
        p = self.link(INTERNAL_A, os.path.join(self.tmp, "collide-internal"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("multiple definition", p.stderr)


if __name__ == "__main__":
    unittest.main()
