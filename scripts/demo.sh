#!/bin/sh
# make demo: gpuctl on a simulated DGX A100 (sim/scenarios/dgx-a100.json). The simulated machine
# gets a little life first (load on some GPUs, one compute process) so the views show something.
# Leases go to a private temporary directory with a small configuration (two pools), never to
# /run/gpuctl or /etc/gpuctl.
set -eu
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-demo-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cat >"$tmp/gpuctl.conf" <<'EOF'
# the demo's configuration (docs/config.md): GPUs 6 and 7 belong to the training team
busy_memory = 1GiB
[pool training]
description = the training team's GPUs
gpus = 6-7
users = root, alice
EOF
GPUCTL_LEASE_DIR="$tmp/leases" GPUCTL_CONFIG="$tmp/gpuctl.conf" \
"$bin/nvsim" exec dgx-a100 -- sh -eu -c '
	# This shell registers itself as a compute process on GPU 2 (the simulator drops it when it ends).
	"$0/nvsim" set -i 0,1 utilization.gpu=97 utilization.memory=61 memory.used=71GiB power.draw=380 temperature=61
	"$0/nvsim" set -i 2 utilization.gpu=35 temperature=44
	"$0/nvsim" proc add --pid $$ -i 2 --mem 12GiB
	echo "\$ gpuctl list"; "$0/gpuctl" list; echo
	echo "\$ gpuctl topo"; "$0/gpuctl" topo; echo
	echo "\$ gpuctl info"; "$0/gpuctl" info; echo
	echo "\$ gpuctl select -n 2 --min-free-mem 20GiB --hold 600 --label demo"
	"$0/gpuctl" select -n 2 --min-free-mem 20GiB --hold 600 --label demo; echo
	echo "\$ gpuctl select -n 1 --share --mem 16GiB --hold 600 --label notebook   # twice"
	"$0/gpuctl" select -n 1 --share --mem 16GiB --hold 600 --label notebook
	"$0/gpuctl" select -n 1 --share --mem 16GiB --hold 600 --label notebook; echo
	echo "\$ gpuctl run -n 2 --pool training -- sh -c '\''echo \$CUDA_VISIBLE_DEVICES'\''"
	"$0/gpuctl" run -n 2 --pool training -- sh -c "echo \$CUDA_VISIBLE_DEVICES"; echo
	echo "\$ gpuctl ps"; "$0/gpuctl" ps; echo
	echo "\$ gpuctl watch -c 2 -d 0.5 -i 0,1,2,3 -s pucm"
	"$0/gpuctl" watch -c 2 -d 0.5 -i 0,1,2,3 -s pucm; echo
	echo "\$ gpuctl top --once   # (gpuctl top: the same, live and full screen)"
	COLUMNS=120 "$0/gpuctl" top --once; echo
	echo "\$ gpuctl release --all"; "$0/gpuctl" release --all
' "$bin"
