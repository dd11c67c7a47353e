#!/bin/sh
# Installs the Debian packages that building and testing gpuctl need, when they are missing.
# As root it runs apt-get; otherwise it prints the exact commands and exits 1, changing nothing.
# Usage: scripts/deps.sh [build|test|bench|pkg|all]   (default: all; bench: what `make bench`
#        adds; pkg: what building the Debian packages and `make fresh-check` add)
#        scripts/deps.sh sources   prints the sources stanzas `test` would write (nothing when
#                                  contrib and non-free are enabled already), changing nothing
#
# The tests run three NVML clients people use on the simulator, unmodified (tests/cli/
# test_nvml_clients.py): nvtop, gpustat and NVIDIA's Python binding. Debian ships them in its
# `contrib` component, and nvtop pulls NVIDIA's own libnvidia-ml.so.1 (libnvidia-ml1, the
# reference for NVML's names in tests/cli/test_real_nvml.py) from `non-free`. Where those
# components of the Debian archive this machine already uses are not enabled, this script
# enables them in a sources file of its own, /etc/apt/sources.list.d/gpuctl-contrib-non-free.sources
# (deb822, the same URIs, suites and keyring as the `main` entries; delete it to undo), then
# runs apt-get update. It never edits another sources file, and a second run changes nothing.
set -eu

# libncurses-dev: gpuctl top's screen; libsqlite3-dev: the usage ledger (docs/ledger.md);
# libacl1-dev: the agent's enforce = acl (docs/agent.md)
build_pkgs="gcc make cmake pkg-config libjansson-dev libnuma-dev libmicrohttpd-dev libncurses-dev libsqlite3-dev libacl1-dev"
# nvtop, gpustat, python3-pynvml (contrib) and libnvidia-ml1 (non-free): NVML clients and
# NVIDIA's real NVML library; tmux: the terminal gpuctl top's and nvtop's screens are read from;
# slurmctld slurmd slurm-client munge: the real Slurm of tests/cli/test_slurm.py (the packages
# start no daemon; the test runs its own in a scratch directory)
contrib_pkgs="nvtop gpustat python3-pynvml libnvidia-ml1"
# git: scripts/format-check.sh lists the C files with git ls-files (a clone copied to a machine
# without git has none: make fresh-check found it); python3-venv: `python3 -m venv` with the pip
# Debian bundles, for the pip installs of python/tests/test_pip_install.py
# podman runc busybox-static: the real container of tests/cli/test_real_workloads.py (issue 26):
# rootful podman with runc and the cgroupfs manager, on an image `podman import`ed from a busybox
# tar the test builds, in a scratch storage of its own (no registry, no network, no daemon);
# strace: tests/cli/test_workloads.py counts the /proc files a refresh of top opens
# libfaketime: tests/cli/test_agent_reliability.py steps the agent's wall clock back (LD_PRELOAD)
# acl: getfacl/setfacl, tests/cli/test_agent_acl.py reads and sets device nodes' ACLs
# debootstrap: the Debian 13 root with Slurm 24.11 that tests/cli/test_slurm.py makes on first
# use (scripts/slurm-trixie-root.sh; cached in /var/cache/gpuctl-test, outside the clone)
# chromium: the real browser tests/cli/test_status_page.py loads the status page in (headless);
# python3-jsonschema: the same test checks /api/v1/status against docs/status.schema.json
test_pkgs="chromium python3-jsonschema debootstrap acl git libcmocka-dev g++ clang libclang-rt-14-dev clang-format python3 python3-pytest python3-venv prometheus tmux slurmctld slurmd slurm-client munge podman runc busybox-static strace libfaketime $contrib_pkgs"
# wrk: the HTTP load generator of the exporter benchmark (50 concurrent scrapers)
bench_pkgs="python3 wrk"
# The Debian packages (debian/, docs/packaging.md) and their test: dpkg-buildpackage (dpkg-dev)
# with debhelper and dh-python, lintian, systemd-analyze (systemd); make fresh-check: debootstrap
# and git (git archive of HEAD).
pkg_pkgs="python3 dpkg-dev debhelper dh-python lintian systemd debootstrap git"
# apt's sources directory (/etc/apt/sources.list.d/ unless APT_CONFIG says otherwise)
sourceparts=/etc/apt/sources.list.d/
eval "$(apt-config shell sourceparts Dir::Etc::sourceparts/d 2>/dev/null)" || true
sources_file="${sourceparts%/}/gpuctl-contrib-non-free.sources"

case "${1:-all}" in
build) want="$build_pkgs" ;;
test | all) want="$build_pkgs $test_pkgs" ;;
bench) want="$build_pkgs $bench_pkgs" ;;
sources) want="" ;;
pkg) want="$build_pkgs $pkg_pkgs" ;;
*)
	echo "scripts/deps.sh: unknown set '$1' (expected build, test, bench, pkg, all or sources)" >&2
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

# Prints the deb822 stanzas that would enable contrib and non-free alongside every `main` entry
# of this Debian release (CODENAME, CODENAME-updates, CODENAME-security) that lacks them; prints
# nothing when they are all enabled, when our file exists, or when this is not Debian. apt itself
# reads the sources (deb822 or one-line format) through `apt-get indextargets --no-release-info`,
# which lists what is configured whether or not `apt-get update` has run.
contrib_stanzas() {
	id="" codename=""
	# shellcheck disable=SC1091
	[ -r /etc/os-release ] && id=$(. /etc/os-release && echo "${ID:-}") &&
		codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ "$id" = debian ] && [ -n "$codename" ] && [ ! -e "$sources_file" ] || return 0
	keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	# shellcheck disable=SC2016 # apt's own $(FIELD) placeholders, not shell
	apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
		'Created-By: Packages' |
		sort -u | awk -v c="$codename" '
		$2 == c || $2 == c "-updates" || $2 == c "-security" {
			key = $1 " " $2; have[key, $3] = 1; if ($3 == "main") main[key] = 1
		}
		END {
			for (key in main) {
				comps = ""
				if (!have[key, "contrib"]) comps = "contrib"
				if (!have[key, "non-free"]) comps = comps (comps == "" ? "" : " ") "non-free"
				if (comps != "") print key, comps
			}
		}' | sort | while read -r uri suite comps; do
		printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\n' "$uri" "$suite" "$comps"
		[ ! -r "$keyring" ] || printf 'Signed-By: %s\n' "$keyring"
		echo
	done
}

if [ "${1:-all}" = sources ]; then
	contrib_stanzas
	exit 0
fi
[ -z "$missing" ] && exit 0

needs_contrib=""
for p in $missing; do
	case " $contrib_pkgs " in *" $p "*) needs_contrib=1 ;; esac
done
stanzas=""
[ -n "$needs_contrib" ] && stanzas=$(contrib_stanzas)

if [ "$(id -u)" -ne 0 ]; then
	echo "gpuctl: missing Debian packages:$missing" >&2
	if [ -n "$stanzas" ]; then
		echo "gpuctl: they need Debian's contrib and non-free components; as root write" \
			"$sources_file with:" >&2
		printf '%s\n' "$stanzas" | sed 's/^/    /' >&2
		echo "gpuctl: then run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	elif ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
		echo "gpuctl: run: sudo apt-get install -y$missing" >&2
	else
		# a fresh machine (a container, debootstrap) has empty package lists: update first
		echo "gpuctl: run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	fi
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
updated=""
if [ -n "$stanzas" ]; then
	echo "gpuctl: enabling Debian's contrib and non-free components in $sources_file" >&2
	tmp="$sources_file.tmp.$$"
	{
		echo "# Written by gpuctl's scripts/deps.sh: Debian's contrib and non-free components"
		echo "# of the archive this machine uses, for the NVML clients gpuctl's tests run"
		echo "# (nvtop, gpustat, python3-pynvml) and NVIDIA's libnvidia-ml1. Delete to undo."
		echo
		printf '%s\n' "$stanzas"
	} >"$tmp"
	chmod 0644 "$tmp"
	mv -f "$tmp" "$sources_file"
	apt-get update -q >/dev/null
	updated=1
fi
echo "gpuctl: installing Debian packages:$missing" >&2
# shellcheck disable=SC2086 # word splitting of the package list is intended
apt-get install -y -q $missing >/dev/null 2>&1 || {
	[ -n "$updated" ] || apt-get update -q >/dev/null
	apt-get install -y -q $missing
}
