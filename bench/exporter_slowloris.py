#!/usr/bin/env python3
"""`gpuctl exporter`'s memory and scrape time under slowloris (issue 16; not part of `make bench`,
which measures the exporter in exporter_bench.py).

Starts `nvsim exec dgx-a100 -- gpuctl exporter --interval 1` (8 GPUs) on a loopback port,
scrapes it 20 times, reads RSS and PSS (/proc/PID/smaps_rollup: shared library pages divided
among the processes that map them) once idle; then opens 200 slowloris connections from 200
loopback addresses (127.0.0.2-201, one each, so the per-address limit does not stop them), each
sending a request line and then a header line every 0.3 s, and for 4 s scrapes /metrics every
0.3 s, reporting the slowest scrape and the peak RSS and PSS.
Usage: python3 bench/exporter_slowloris.py --build build [--port 19431]
"""
import argparse
import os
import socket
import subprocess
import time
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--port", type=int, default=19431)
    a = ap.parse_args()
    port, b = a.port, os.path.abspath(a.build)
    url = "http://127.0.0.1:%d" % port
    ex = subprocess.Popen([os.path.join(b, "bin", "nvsim"), "exec", "dgx-a100", "--",
                           os.path.join(b, "bin", "gpuctl"), "exporter", "--listen",
                           "127.0.0.1:%d" % port, "--interval", "1", "--lease-dir",
                           "/nonexistent/gpuctl-bench"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socks = []
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        pid = int(subprocess.check_output(
            ["pgrep", "-f", "gpuctl exporter --listen 127.0.0.1:%d" % port]).split()[-1])

        def mem():
            d = {}
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    k, v = line.split(":", 1)
                    if k in ("Rss", "Pss"):
                        d[k] = int(v.split()[0]) / 1024
            return d
        for _ in range(20):
            urllib.request.urlopen(url + "/metrics").read()
        time.sleep(1.5)
        idle = mem()
        for i in range(2, 202):
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=5,
                                             source_address=("127.0.0.%d" % i, 0))
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                socks.append(c)
            except OSError:
                pass
        peak, worst, t0 = {"Rss": 0, "Pss": 0}, 0.0, time.monotonic()
        while time.monotonic() - t0 < 4:
            for c in socks:
                try:
                    c.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass
            t = time.monotonic()
            urllib.request.urlopen(url + "/metrics", timeout=5).read()
            worst = max(worst, time.monotonic() - t)
            m = mem()
            peak = {k: max(peak[k], m[k]) for k in peak}
            time.sleep(0.3)
        print("| scenario | RSS MiB idle | PSS MiB idle | slowloris conns | peak RSS MiB | "
              "peak PSS MiB | slowest scrape ms |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print("| dgx-a100 | %.1f | %.1f | %d | %.1f | %.1f | %.1f |" % (
            idle["Rss"], idle["Pss"], len(socks), peak["Rss"], peak["Pss"], worst * 1000))
    finally:
        for c in socks:
            c.close()
        ex.terminate()
        ex.wait()


if __name__ == "__main__":
    main()
