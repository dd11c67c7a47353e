#!/bin/sh
# make demo: gpuctl on a simulated DGX A100 (sim/scenarios/dgx-a100.json). The simulated machine
# gets a little life first (load on some GPUs, one compute process) so the views show something.
set -eu
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
exec "$bin/nvsim" exec dgx-a100 -- sh -eu -c '
	# This shell registers itself as a compute process on GPU 2 (the simulator drops it when it ends).
	"$0/nvsim" set -i 0,1 utilization.gpu=97 utilization.memory=61 memory.used=71GiB power.draw=380 temperature=61
	"$0/nvsim" set -i 2 utilization.gpu=35 temperature=44
	"$0/nvsim" proc add --pid $$ -i 2 --mem 12GiB
	echo "\$ gpuctl list"; "$0/gpuctl" list; echo
	echo "\$ gpuctl topo"; "$0/gpuctl" topo; echo
	echo "\$ gpuctl info"; "$0/gpuctl" info
' "$bin"
