// SPDX-License-Identifier: MIT
/*
 * agent-cgroup-bpf.c: the cgroup v2 device filter of a job cgroup (agent-cgroup.h): an eBPF
 * program of type BPF_PROG_TYPE_CGROUP_DEVICE, attached to the cgroup's directory as
 * BPF_CGROUP_DEVICE. cgroup v2 has no devices interface file; access to device nodes is
 * controlled by such programs only (the kernel's Documentation/admin-guide/cgroup-v2.rst,
 * "Device controller": the program gets the device's type, major, minor and the access, and
 * "a return value of 0 rejects the access", the open then failing with EPERM).
 *
 * Decisions:
 * - Raw instructions through bpf(2), no libbpf: the program is a dozen instructions plus two per
 *   allowed node, built here from the filter, and the UAPI header (linux/bpf.h, of
 *   linux-libc-dev) gives every constant. No new dependency for a list of comparisons.
 * - The program: a block device, or a character device of an unguarded major, returns 1; a
 *   character device listed in allow returns 1; one of a guarded major returns 0; anything else
 *   1. The context is struct bpf_cgroup_dev_ctx: access_type (the device type in its low 16
 *   bits, BPF_DEVCG_DEV_CHAR or _BLOCK, the access above), major, minor.
 * - Attached with BPF_F_ALLOW_MULTI: a program attached below (by something the job runs) runs
 *   as well, and an access passes only when every program lets it (the kernel runs the
 *   effective programs of the cgroup and its ancestors and ANDs their verdicts), so nothing
 *   below can widen the job's set. The program's descriptor is closed after the attachment,
 *   which keeps it loaded until the cgroup goes.
 */
#include <errno.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent-cgroup.h"
#include "util.h"

static int sys_bpf(int cmd, union bpf_attr *attr)
{
	long r = syscall(__NR_bpf, cmd, attr, sizeof(*attr));
	return r < 0 ? -errno : (int)r;
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	return (struct bpf_insn){
	        .code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

/* Jump targets, patched once the program's end is known. */
enum { TO_ALLOW = 1, TO_DENY = 2 };

/* The program of f (malloc'ed, *ret_n instructions), or NULL. */
static struct bpf_insn *build(const struct agent_devfilter *f, size_t *ret_n)
{
	size_t max = 9 + 2 * f->n_allow + f->n_guarded, n = 0; /* 5 + 2 + 2 below */
	struct bpf_insn *p = calloc(max, sizeof(*p));
	uint8_t *to = calloc(max, 1); /* to[i]: where jump i goes (TO_*), 0: not patched */
	size_t allow, deny;

	if (!p || !to) {
		free(p);
		free(to);
		return NULL;
	}
	/* r2 = access_type & 0xffff (the type), r3 = major, r4 = minor */
	p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);
	p[n++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
	p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, 4, 0);
	p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 8, 0);
	to[n] = TO_ALLOW;
	p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 0, BPF_DEVCG_DEV_CHAR);
	for (size_t i = 0; i < f->n_allow; i++) {
		/* if major != M skip the next; if minor == m allow */
		p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 1,
		              (int32_t)f->allow[i].major);
		to[n] = TO_ALLOW;
		p[n++] = insn(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_4, 0, 0,
		              (int32_t)f->allow[i].minor);
	}
	for (size_t i = 0; i < f->n_guarded; i++) {
		to[n] = TO_DENY;
		p[n++] = insn(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_3, 0, 0, (int32_t)f->guarded[i]);
	}
	allow = n;
	p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
	p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	deny = n;
	p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
	p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		if (to[i])
			p[i].off = (int16_t)((to[i] == TO_ALLOW ? allow : deny) - (i + 1));
	free(to);
	*ret_n = n;
	return p;
}

int agent_cgroup_bpf_attach(int dirfd, const struct agent_devfilter *f)
{
	_cleanup_free_ struct bpf_insn *prog = NULL;
	_cleanup_close_ int pfd = -1;
	union bpf_attr attr;
	size_t n = 0;
	int r;

	/* the offsets are 16 bits: far more nodes than a machine has */
	if (f->n_allow > 8192 || f->n_guarded > 64)
		return -E2BIG;
	prog = build(f, &n);
	if (!prog)
		return -ENOMEM;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uint64_t)(uintptr_t)prog;
	attr.insn_cnt = (uint32_t)n;
	attr.license = (uint64_t)(uintptr_t) "MIT";
	memcpy(attr.prog_name, "gpuctl_devices", sizeof("gpuctl_devices"));
	pfd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (pfd < 0)
		return pfd;
	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)dirfd;
	attr.attach_bpf_fd = (uint32_t)pfd;
	attr.attach_type = BPF_CGROUP_DEVICE;
	attr.attach_flags = BPF_F_ALLOW_MULTI;
	r = sys_bpf(BPF_PROG_ATTACH, &attr);
	return r < 0 ? r : 0;
}

int agent_cgroup_bpf_count(int dirfd)
{
	union bpf_attr attr;
	int r;

	memset(&attr, 0, sizeof(attr));
	attr.query.target_fd = (uint32_t)dirfd;
	attr.query.attach_type = BPF_CGROUP_DEVICE;
	attr.query.query_flags = BPF_F_QUERY_EFFECTIVE;
	r = sys_bpf(BPF_PROG_QUERY, &attr);
	return r < 0 ? r : (int)attr.query.prog_cnt;
}
