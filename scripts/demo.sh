#!/bin/sh
# make demo: gpuctl on a simulated DGX A100 (sim/scenarios/dgx-a100.json). The simulated machine
# gets a little life first, each load with a process that explains it: a two-GPU training job
# on GPUs 0 and 1 and an inference server on GPU 2. They are stand-ins (copies of sleep named
# train and serve, in a private bin directory), registered with the simulator as compute
# processes, so every GPU at work shows who works on it; they are ended before the demo ends.
# Leases go to a private temporary directory with a small configuration (two pools), never to
# /run/gpuctl or /etc/gpuctl.
# Every command is introduced by "#" lines that say what to look at. `gpuctl top --once` is
# printed at DEMO_COLUMNS columns (default 140: top cuts its lines at the width, and the shared
# GPU's holders need about 130), then the legend of its symbols.
# tests/cli/test_demo.py runs this script and checks those promises.
set -eu
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuctl-demo-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/bin"
cp "$(command -v sleep)" "$tmp/bin/train"
cp "$(command -v sleep)" "$tmp/bin/serve"
cat >"$tmp/gpuctl.conf" <<'EOF'
# the demo's configuration (docs/config.md): GPUs 6 and 7 belong to the training team
busy_memory = 1GiB
[pool training]
description = the training team's GPUs
gpus = 6-7
users = root, alice
EOF
PATH="$tmp/bin:$PATH" GPUCTL_LEASE_DIR="$tmp/leases" GPUCTL_CONFIG="$tmp/gpuctl.conf" \
DEMO_COLUMNS="${DEMO_COLUMNS:-140}" \
"$bin/nvsim" exec dgx-a100 -- sh -eu -c '
	bin=$0
	# the stand-in jobs: started here, registered with the simulator, ended on any exit
	train 3600 & t0=$!
	train 3600 & t1=$!
	serve 3600 & s2=$!
	trap "kill $t0 $t1 $s2 2>/dev/null || :" EXIT
	"$bin/nvsim" set -i 0,1 utilization.memory=61 power.draw=380 temperature=61
	"$bin/nvsim" set -i 2 power.draw=160 temperature=44
	"$bin/nvsim" proc add --pid $t0 -i 0 --mem 71GiB --util 97
	"$bin/nvsim" proc add --pid $t1 -i 1 --mem 71GiB --util 97
	"$bin/nvsim" proc add --pid $s2 -i 2 --mem 12GiB --util 35
	echo "# A simulated DGX A100: 8 GPUs. Three processes started without gpuctl already compute:"
	echo "# train on GPUs 0 and 1, serve on GPU 2 (stand-ins: copies of sleep the simulator counts)."
	echo
	echo "# The GPUs with their load, memory, power, health and the processes on each."
	echo "\$ gpuctl list"; "$bin/gpuctl" list; echo
	echo "# How the GPUs connect (as nvidia-smi topo -m): NV12 = 12 NVLinks between two GPUs."
	echo "\$ gpuctl topo"; "$bin/gpuctl" topo; echo
	echo "# Driver, libraries, each GPU in full, and the pools of the demo'\''s configuration."
	echo "\$ gpuctl info"; "$bin/gpuctl" info; echo
	echo "# Choose 2 free GPUs with 20 GiB free and hold them for 10 minutes (a lease): 0-2 are busy."
	echo "\$ gpuctl select -n 2 --min-free-mem 20GiB --hold 600 --label demo"
	"$bin/gpuctl" select -n 2 --min-free-mem 20GiB --hold 600 --label demo; echo
	echo "# Two notebooks share one GPU, each declaring the 16 GiB it will use."
	echo "\$ gpuctl select -n 1 --share --mem 16GiB --hold 600 --label notebook   # twice"
	"$bin/gpuctl" select -n 1 --share --mem 16GiB --hold 600 --label notebook
	"$bin/gpuctl" select -n 1 --share --mem 16GiB --hold 600 --label notebook; echo
	echo "# Run a command on 2 GPUs of the training pool (6 and 7): it sees only those."
	echo "\$ gpuctl run -n 2 --pool training -- sh -c '\''echo \$CUDA_VISIBLE_DEVICES'\''"
	"$bin/gpuctl" run -n 2 --pool training -- sh -c "echo \$CUDA_VISIBLE_DEVICES"; echo
	echo "# Who holds what: the leases above, and foreign = processes that hold no lease."
	echo "\$ gpuctl ps"; "$bin/gpuctl" ps; echo
	echo "# Two samples of GPUs 0-3 half a second apart, as nvidia-smi dmon: p(ower/temperature),"
	echo "# u(tilisation: sm, mem, enc, dec), c(locks), m(emory: fb = used MB); - = not reported."
	echo "\$ gpuctl watch -c 2 -d 0.5 -i 0,1,2,3 -s pucm"
	"$bin/gpuctl" watch -c 2 -d 0.5 -i 0,1,2,3 -s pucm; echo
	echo "# One frame of the live view, $DEMO_COLUMNS columns wide; its symbols are explained below it."
	echo "\$ gpuctl top --once   # (gpuctl top: the same, live and full screen)"
	COLUMNS=$DEMO_COLUMNS "$bin/gpuctl" top --once
	echo "# Legend: the title line names the host, the counts, the refresh interval and the sort."
	echo "# Each GPU has two lines. The first: bars for utilisation, memory used, power and"
	echo "# temperature; HLTH its health. The second: \"util\" and \"mem\" each followed by the"
	echo "# history of utilisation and of memory used, one character per refresh, from _ (0%)"
	echo "# through .:-=+* to # (100%); --once has one refresh, so one character. Then the pool,"
	echo "# and who holds the GPU:"
	echo "# free, held by USER '\''LABEL'\'' AGE, shared by N (room left), or FOREIGN: processes of"
	echo "# no lease. In the process list, ! before the GPU marks such a process, and WORKLOAD"
	echo "# says what the kernel'\''s cgroups put it in: a Slurm step, a pod, a container, a"
	echo "# systemd unit or login session, or bare (none of these)."
	echo
	echo "# Give back every lease this user holds."
	echo "\$ gpuctl release --all"; "$bin/gpuctl" release --all
' "$bin"
