#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-nvml-layer.py: the NVML loader stays the bottom layer of libgpuctl (docs/ARCHITECTURE.md,
"Data flows down").

Usage: check-nvml-layer.py NM SOURCE_DIR OBJECT...
  NM          the nm program (CMake's CMAKE_NM)
  SOURCE_DIR  the source root
  OBJECT      libgpuctl's object files; an argument may hold several joined by ';' (as CMake
              passes $<TARGET_OBJECTS:gpuctl_obj>)

Fails (exit 1, one line per problem) when
- src/lib/nvml.c includes a project header other than those below it (ALLOWED_INCLUDES);
- a file other than nvml.c includes nvml-abi.h (only the loader knows NVML);
- nvml.c calls into a file other than those below it (ALLOWED_CALLEES: the context's messages and
  the snapshot model), e.g. the bandwidth model or the XID log, which interpret what it read;
- an object nvml.c's object calls, directly or through others, calls back into nvml.c's object:
  the loader fills the model and returns; it never reaches code that calls the loader.

Calls are read from the objects' symbol tables (a global symbol one object leaves undefined and
another defines), so a declaration in a shared header cannot hide a call. Calls through function
pointers (the log hook) are not seen; none of them reaches the loader.
"""
import collections
import os
import re
import subprocess
import sys

LOADER_SOURCE = "src/lib/nvml.c"
ALLOWED_INCLUDES = {"ctx.h", "nvml-abi.h", "nvml-loader.h", "snapshot-internal.h", "util.h"}
ALLOWED_CALLEES = {"ctx-log.c", "snapshot.c"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def source_name(obj):
    """nvml.c for .../gpuctl_obj.dir/nvml.c.o"""
    base = os.path.basename(obj)
    return base[:-2] if base.endswith(".o") else base


def symbols(nm, obj):
    """(defined global symbols, undefined symbols) of one object."""
    out = subprocess.run([nm, "-g", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("U", "w", "v"):
            undefined.add(parts[1])
        elif len(parts) == 3:
            defined.add(parts[2])
    return defined, undefined


def call_graph(nm, objects):
    """{source: {callee source: [symbols]}} between the given objects."""
    defs, undefs = {}, {}
    for obj in objects:
        defs[source_name(obj)], undefs[source_name(obj)] = symbols(nm, obj)
    owner = {sym: src for src, syms in defs.items() for sym in syms}
    graph = {}
    for src, syms in undefs.items():
        edges = collections.defaultdict(list)
        for sym in sorted(syms):
            callee = owner.get(sym)
            if callee and callee != src:
                edges[callee].append(sym)
        graph[src] = edges
    return graph


def path_back(graph, start):
    """A call path start -> ... -> start, or None."""
    parent = {}
    queue = collections.deque()
    for callee in graph.get(start, {}):
        parent[callee] = None
        queue.append(callee)
    while queue:
        node = queue.popleft()
        if node == start:
            path = [node]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            path.append(start)
            path.reverse()
            return path
        for callee in graph.get(node, {}):
            if callee not in parent:
                parent[callee] = node
                queue.append(callee)
    return None


def check_includes(source_dir):
    problems = []
    loader = os.path.join(source_dir, LOADER_SOURCE)
    with open(loader, encoding="utf-8") as f:
        for name in INCLUDE_RE.findall(f.read()):
            if name not in ALLOWED_INCLUDES:
                problems.append('%s includes "%s": the loader may include only %s' %
                                (LOADER_SOURCE, name, ", ".join(sorted(ALLOWED_INCLUDES))))
    for top in ("src", "fuzz", "examples", "bench"):
        for root, _, files in os.walk(os.path.join(source_dir, top)):
            for fn in files:
                path = os.path.join(root, fn)
                rel = os.path.relpath(path, source_dir)
                if not fn.endswith((".c", ".h")) or rel in (LOADER_SOURCE, "src/lib/nvml-abi.h"):
                    continue
                with open(path, encoding="utf-8") as f:
                    if "nvml-abi.h" in INCLUDE_RE.findall(f.read()):
                        problems.append("%s includes nvml-abi.h: only %s knows NVML" %
                                        (rel, LOADER_SOURCE))
    return problems


def main(argv):
    if len(argv) < 4:
        print("usage: check-nvml-layer.py NM SOURCE_DIR OBJECT...", file=sys.stderr)
        return 2
    nm, source_dir = argv[1], argv[2]
    objects = [o for arg in argv[3:] for o in arg.split(";") if o]
    loader = os.path.basename(LOADER_SOURCE)
    if loader not in {source_name(o) for o in objects}:
        print("check-nvml-layer: no object of %s among the %d given" % (loader, len(objects)),
              file=sys.stderr)
        return 2
    problems = check_includes(source_dir)
    graph = call_graph(nm, objects)
    for callee, syms in sorted(graph[loader].items()):
        if callee not in ALLOWED_CALLEES:
            problems.append("%s calls %s (%s): the loader may call only %s" %
                            (loader, callee, ", ".join(syms[:3]),
                             ", ".join(sorted(ALLOWED_CALLEES))))
    path = path_back(graph, loader)
    if path:
        steps = []
        for a, b in zip(path, path[1:]):
            steps.append("%s -> %s (%s)" % (a, b, ", ".join(graph[a][b][:3])))
        problems.append("%s calls back into itself: %s" % (loader, "; ".join(steps)))
    for p in problems:
        print("gpuctl: layers: " + p, file=sys.stderr)
    if problems:
        return 1
    below = sorted(graph[loader])
    print("check-nvml-layer: %s calls %s, none of which reaches it again" %
          (loader, ", ".join(below) if below else "nothing in the library"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
