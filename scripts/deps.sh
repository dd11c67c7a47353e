#!/bin/sh
# Installs the Debian packages that building and testing gpuctl need, when they are missing.
# As root it runs apt-get; otherwise it prints the exact command and exits 1, changing nothing.
# Usage: scripts/deps.sh [build|test|bench|pkg|all]   (default: all; bench: what `make bench`
# adds; pkg: what building the Debian packages and `make fresh-check` add)
set -eu

build_pkgs="gcc make cmake pkg-config libjansson-dev libnuma-dev libmicrohttpd-dev"
# slurmctld slurmd slurm-client munge: the real Slurm of tests/cli/test_slurm.py (the packages
# start no daemon; the test runs its own in a scratch directory)
# git: scripts/format-check.sh lists the C files with git ls-files (a clone copied to a machine
# without git has none: make fresh-check found it)
test_pkgs="git libcmocka-dev g++ clang libclang-rt-14-dev clang-format python3 python3-pytest prometheus slurmctld slurmd slurm-client munge"
# wrk: the HTTP load generator of the exporter benchmark (50 concurrent scrapers)
bench_pkgs="python3 wrk"
# The Debian packages (debian/, docs/packaging.md) and their test: dpkg-buildpackage (dpkg-dev)
# with debhelper and dh-python, lintian, systemd-analyze (systemd); make fresh-check: debootstrap
# and git (git archive of HEAD).
pkg_pkgs="python3 dpkg-dev debhelper dh-python lintian systemd debootstrap git"

case "${1:-all}" in
build) want="$build_pkgs" ;;
test | all) want="$build_pkgs $test_pkgs" ;;
bench) want="$build_pkgs $bench_pkgs" ;;
pkg) want="$build_pkgs $pkg_pkgs" ;;
*)
	echo "scripts/deps.sh: unknown set '$1' (expected build, test, bench, pkg or all)" >&2
	exit 2
	;;
esac

missing=""
for p in $want; do
	# dpkg-query prints "install ok installed" only for a fully installed package.
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "gpuctl: missing Debian packages:$missing" >&2
	# a fresh machine (a container, debootstrap) has empty package lists: update first
	if ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
		echo "gpuctl: run: sudo apt-get install -y$missing" >&2
	else
		echo "gpuctl: run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	fi
	exit 1
fi
echo "gpuctl: installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q $missing >/dev/null 2>&1 || {
	apt-get update -q >/dev/null
	apt-get install -y -q $missing
}
