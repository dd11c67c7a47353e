#!/bin/sh
# Makes (once) a Debian 13 "trixie" root with its Slurm 24.11 daemons, for the second Slurm
# version of tests/cli/test_slurm.py (issue 29: Slurm >= 24.11 checks gres.conf's Cores= against
# socket boundaries, which Debian 12's 22.05 does not). Prints the root's path on stdout.
#
# Usage: scripts/slurm-trixie-root.sh [--check]
#   --check   build nothing: exit 0 (printing the path) when the cached root is current, else 1
# Environment:
#   GPUCTL_TRIXIE_ROOT   where the root lives (default /var/cache/gpuctl-test/trixie-slurm,
#                        outside the clone, so a CI cache or a second clone reuses it)
#   GPUCTL_TRIXIE_MIRROR Debian mirror (default http://deb.debian.org/debian)
#
# Decisions:
# - debootstrap --variant=minbase, then apt-get install of slurmctld, slurmd, slurm-client and
#   munge inside it (Debian's package names, the same four scripts/deps.sh installs for Debian
#   12). About 2 minutes and 250 MB the first time; nothing afterwards.
# - Built atomically: into a temporary directory beside the root, which is renamed into place
#   only after the stamp file is written, so a killed build never leaves a half root (the next
#   run removes the leftover). A lock (flock on ROOT.lock) keeps two builds from racing.
# - Current means: the stamp file .gpuctl-root holds this script's RECIPE line and the
#   programs are there. A changed recipe (other packages, another suite) rebuilds it.
# - debootstrap mounts /proc and /sys inside the target while it installs; a killed one can
#   leave them, so a leftover is unmounted before it is removed, and removal never crosses a
#   file system (rm --one-file-system).
set -eu

RECIPE="trixie minbase slurmctld slurmd slurm-client munge hosts v3"
root=${GPUCTL_TRIXIE_ROOT:-/var/cache/gpuctl-test/trixie-slurm}
mirror=${GPUCTL_TRIXIE_MIRROR:-http://deb.debian.org/debian}

current() {
	[ -f "$root/.gpuctl-root" ] && [ "$(cat "$root/.gpuctl-root")" = "$RECIPE" ] &&
		[ -x "$root/usr/sbin/slurmd" ] && [ -x "$root/usr/sbin/slurmctld" ] &&
		[ -x "$root/usr/sbin/munged" ] && [ -x "$root/usr/bin/scontrol" ]
}

# Unmounts whatever is mounted at or below $1 (deepest first), then removes it.
remove_tree() {
	[ -e "$1" ] || return 0
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount -l "$m" || true; done
	rm -rf --one-file-system "$1"
}

if [ "${1:-}" = --check ]; then
	current && echo "$root" && exit 0
	exit 1
fi
if current; then
	echo "$root"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "scripts/slurm-trixie-root.sh: needs root (debootstrap) to build $root" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
	echo "scripts/slurm-trixie-root.sh: debootstrap not found (scripts/deps.sh test installs it)" >&2
	exit 1
fi
parent=$(dirname "$root")
mkdir -p "$parent"
exec 9>"$root.lock"
flock 9
# another process may have built it while this one waited for the lock
if current; then
	echo "$root"
	exit 0
fi
for old in "$root".tmp.* "$root".old.*; do
	[ -e "$old" ] && remove_tree "$old"
done
tmp=$(mktemp -d "$root.tmp.XXXXXX")
# mktemp makes it 0700; the root's / must be 0755 for its users (munge, _apt)
chmod 0755 "$tmp"
trap 'remove_tree "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
echo "scripts/slurm-trixie-root.sh: debootstrap trixie from $mirror into $tmp" >&2
log="$root.log"
# the base first, then the four packages with apt inside it, where a policy-rc.d forbids
# starting services (munge's postinst would start munged otherwise, which fails in a chroot);
# /proc for apt is mounted in a mount namespace of its own (unshare -m), which takes the mount
# with it however the install ends
# shellcheck disable=SC2016 # $1 is the inner shell's argument, expanded there
if ! debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$log" 2>&1 ||
	! printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d" ||
	! chmod 0755 "$tmp/usr/sbin/policy-rc.d" ||
	! unshare -m --propagation private sh -c 'mount -t proc proc "$1/proc" &&
		chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c "apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		slurmctld slurmd slurm-client munge"' sh "$tmp" >>"$log" 2>&1; then
	echo "scripts/slurm-trixie-root.sh: building the trixie root from $mirror failed" \
		"(no network? the last lines of $log follow)" >&2
	tail -n 15 "$log" >&2
	exit 1
fi
rm -f "$log"
# the package cache: not needed to run
rm -rf "$tmp/var/cache/apt/archives/"*.deb
# debootstrap writes no /etc/hosts; the test cluster's slurm.conf names its host "localhost"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
echo "$RECIPE" >"$tmp/.gpuctl-root"
if [ -e "$root" ]; then
	mv "$root" "$root.old.$$"
fi
mv "$tmp" "$root"
trap - EXIT
remove_tree "$root.old.$$"
echo "$root"
