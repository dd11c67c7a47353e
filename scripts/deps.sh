#!/bin/sh
# Installs the Debian packages that building and testing gpuctl need, when they are missing.
# As root it runs apt-get; otherwise it prints the exact command and exits 1, changing nothing.
# Usage: scripts/deps.sh [build|test|bench|all]   (default: all; bench: what `make bench` adds)
set -eu

# libncurses-dev: gpuctl top's screen; tmux: the tests drive gpuctl top in a pane
build_pkgs="gcc make cmake pkg-config libjansson-dev libnuma-dev libmicrohttpd-dev libncurses-dev"
# slurmctld slurmd slurm-client munge: the real Slurm of tests/cli/test_slurm.py (the packages
# start no daemon; the test runs its own in a scratch directory)
test_pkgs="libcmocka-dev g++ clang libclang-rt-14-dev clang-format python3 python3-pytest prometheus tmux slurmctld slurmd slurm-client munge"
# wrk: the HTTP load generator of the exporter benchmark (50 concurrent scrapers)
bench_pkgs="python3 wrk"

case "${1:-all}" in
build) want="$build_pkgs" ;;
test | all) want="$build_pkgs $test_pkgs" ;;
bench) want="$build_pkgs $bench_pkgs" ;;
*)
	echo "scripts/deps.sh: unknown set '$1' (expected build, test, bench or all)" >&2
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
