#!/bin/sh
# make fresh-check: the README's two commands on a truly fresh Debian 12.
#
# Builds a minimal Debian 12 (bookworm) root with debootstrap from Debian's archive (the default
# variant: the packages of priority required and important, what a base install has, and no
# compiler), installs `make` in it (the one thing a user must have to type `make`: README, "Two
# commands"), puts a clean clone of this repository's HEAD in (git clone: committed files only,
# nothing built; git itself is not installed in the root), and runs `make demo` and then
# `make test` inside it with chroot, as root, so that scripts/deps.sh installs every other
# package itself; then `make package-check` (the Debian packages built, installed, tried and
# purged: here, in the throwaway root). Each step's output goes to WORK/<step>.log; the script
# prints one line per step with its duration, and exits 1 at the first step that fails.
#
# Usage: scripts/fresh-check.sh [--demo-only]
#   FRESH_WORK   working directory (default /var/tmp/gpuctl-fresh-check); the debootstrapped
#                root is cached there as bookworm-base.tar and unpacked afresh for every run
#   FRESH_MIRROR Debian mirror (default http://deb.debian.org/debian)
# Needs root, debootstrap and git (scripts/deps.sh pkg installs them). Too slow for
# `make test` (bench/RESULTS.md, "Fresh machine", has a measured run).
set -eu

demo_only=0
case "${1:-}" in
"") ;;
--demo-only) demo_only=1 ;;
*)
	echo "scripts/fresh-check.sh: unknown argument '$1' (expected --demo-only or nothing)" >&2
	exit 2
	;;
esac
if [ "$(id -u)" -ne 0 ]; then
	echo "scripts/fresh-check.sh: needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi
for tool in debootstrap git; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "scripts/fresh-check.sh: $tool not found (scripts/deps.sh pkg installs it)" >&2
		exit 1
	fi
done

src=$(cd "$(dirname "$0")/.." && pwd)
work=${FRESH_WORK:-/var/tmp/gpuctl-fresh-check}
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
root="$work/root"
base="$work/bookworm-base.tar"
mkdir -p "$work"

# Everything mounted under $root, deepest first; called on every exit.
unmount_all() {
	for m in dev/shm dev/pts dev sys/fs/cgroup sys proc; do
		if mountpoint -q "$root/$m" 2>/dev/null; then
			umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m"
		fi
	done
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# step NAME COMMAND...: runs COMMAND with its output in $work/NAME.log, prints the duration.
step() {
	name=$1
	shift
	t0=$(date +%s)
	if "$@" >"$work/$name.log" 2>&1; then
		echo "fresh-check: $name: ok ($(($(date +%s) - t0)) s)"
	else
		echo "fresh-check: $name: FAILED after $(($(date +%s) - t0)) s; last lines of $work/$name.log:"
		tail -n 30 "$work/$name.log"
		exit 1
	fi
}

# remove_tree DIR: never into anything mounted (a bind of /dev left behind by a killed run).
remove_tree() {
	if grep -q " $1/" /proc/self/mounts; then
		echo "something is still mounted under $1: not removing it" >&2
		return 1
	fi
	rm -rf --one-file-system "$1"
}

bootstrap() {
	remove_tree "$work/bootstrap"
	debootstrap bookworm "$work/bootstrap" "$mirror"
	tar -C "$work/bootstrap" -cf "$base.tmp" .
	mv "$base.tmp" "$base"
	remove_tree "$work/bootstrap"
}

# A fresh root from the cached base; refuses to remove a root that still has mounts in it.
unpack() {
	remove_tree "$root"
	mkdir -p "$root"
	tar -C "$root" -xf "$base"
	mkdir -p "$root/src"
	git clone -q --no-hardlinks --no-checkout "$src" "$root/src/gpuctl"
	git -C "$root/src/gpuctl" checkout -q --detach "$(git -C "$src" rev-parse HEAD)"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
}

mount_all() {
	mount -t proc proc "$root/proc"
	mount -t sysfs sysfs "$root/sys"
	# the host's cgroup tree with its controllers (recursive: cgroup v1 mounts each one below
	# a tmpfs), as systemd mounts it on a real machine: a fresh sysfs has none, and slurmd,
	# which tests/cli/test_slurm.py runs, refuses to start without it. A slave copy, so that
	# unmounting it here never propagates to the host's mounts.
	if mountpoint -q /sys/fs/cgroup; then
		mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
		mount --make-rslave "$root/sys/fs/cgroup"
	fi
	mount --bind /dev "$root/dev"
	mount --bind /dev/pts "$root/dev/pts"
	mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
}

# in_root CMD: a login-like root shell in the fresh root (Debian's default PATH, no host env).
in_root() {
	env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		chroot "$root" /bin/sh -c "$1"
}

[ -f "$base" ] || step debootstrap bootstrap
step unpack unpack
mount_all
step install-make in_root 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y make'
step make-demo in_root 'cd /src/gpuctl && make demo'
[ "$demo_only" -eq 1 ] && exit 0
step make-test in_root 'cd /src/gpuctl && make test'
# the Debian packages' test (not part of make test: it installs into /usr; here that is the
# fresh root's)
step make-package-check in_root 'cd /src/gpuctl && make package-check'
echo "fresh-check: make demo, make test and make package-check passed on a fresh Debian 12 root"
