#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-layers.py: libgpuctl's rooms use only the rooms below them, and the CLI is a client of
the public API (docs/ARCHITECTURE.md, "Layers").

Usage: check-layers.py READELF SOURCE_DIR --order ROOM;ROOM;... --lib OBJECT... --cli OBJECT...
  READELF      the readelf program (CMake's CMAKE_READELF)
  SOURCE_DIR   the source root
  --order      the rooms of src/lib, lowest first, as src/lib/CMakeLists.txt lists them
               (GPUCTL_LIB_LAYERS); the room "top" is the folder src/lib itself
  --lib        libgpuctl's object files, --cli the command-line program's; an argument may hold
               several joined by ';' (as CMake passes $<TARGET_OBJECTS:...>)

Fails (exit 1, one line per problem) when
- an object of one room calls (or reads) a global symbol defined in a room above it;
- objects call each other in a cycle, inside one room or across rooms (a cycle is one concept
  cut in two, or a helper in the wrong room);
- a source of src/lib includes a header of a room above its own;
- a file outside src/lib/nvml includes nvml-abi.h, or outside src/lib/cuda includes cuda-abi.h
  (only the loaders know the driver ABIs);
- a source of src/cli includes an internal header not in CLI_MAY_INCLUDE, or a CLI object uses
  a hidden (internal) symbol of libgpuctl defined outside the sources of those headers.

Calls are read from the objects' symbol tables (a global symbol one object leaves undefined and
another defines), so a declaration in a shared header cannot hide a call. Calls through function
pointers are not seen: the one that crosses rooms, the context's nvml_free (core/ctx.h), is set
by the NVML loader itself.
"""
import collections
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# the driver ABIs and the one room allowed to include each
ABI_HEADERS = {"nvml-abi.h": "nvml", "cuda-abi.h": "cuda"}
# The internal headers the CLI may include, and why: pure helpers with no context or snapshot,
# which the public API has no reason to carry (as curl's tool uses its curlx functions).
CLI_MAY_INCLUDE = {
    "parse.h": "checked number, size, duration and list parsing (basic/parse.c)",
    "utf8.h": "text for JSON out of any bytes (basic/utf8.c)",
    "util.h": "_cleanup_ attributes and small inline helpers (basic/util.h)",
    "nss.h": "the passwd lookup of a uid (basic/nss.c)",
    "sbuf.h": "a growing text with printf-style appends (basic/sbuf.c)",
    "gres.h": "Slurm's gres.conf reader for gpuctl slurm (devices/gres.c)",
}


def room_of(rel):
    """'model' for src/lib/model/snapshot.c, 'top' for src/lib/alloc.c, None outside src/lib"""
    parts = rel.split("/")
    if parts[:2] != ["src", "lib"] or len(parts) < 3:
        return None
    return parts[2] if len(parts) > 3 else "top"


def object_source(obj):
    """src/lib/model/snapshot.c for .../src/lib/CMakeFiles/gpuctl_model.dir/model/snapshot.c.o"""
    norm = obj.replace(os.sep, "/")
    m = re.search(r"/(src/[^/]+)/CMakeFiles/[^/]+\.dir/(.+)\.o$", norm)
    if not m:
        raise SystemExit("check-layers: cannot tell the source of object %s" % obj)
    return m.group(1) + "/" + m.group(2)


def symbols(readelf, obj):
    """({defined global symbol: visibility}, {undefined symbols}) of one object."""
    out = subprocess.run([readelf, "-s", "--wide", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = {}, set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 8 or not parts[0].endswith(":"):
            continue
        _, _, _, kind, bind, vis, ndx, name = parts
        if bind not in ("GLOBAL", "WEAK") or kind in ("FILE", "SECTION"):
            continue
        if ndx == "UND":
            undefined.add(name)
        else:
            defined[name] = vis
    return defined, undefined


def strongly_connected(graph):
    """Tarjan's components of more than one node (each a sorted list), or of one with a self
    edge; graph: {node: iterable of nodes}."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_lib(readelf, order, objects):
    problems = []
    rank = {room: i for i, room in enumerate(order)}
    defs, undefs = {}, {}
    for obj in objects:
        src = object_source(obj)
        room = room_of(src)
        if room not in rank:
            problems.append("%s: room '%s' is not in the order %s" % (src, room, ";".join(order)))
            continue
        defs[src], undefs[src] = symbols(readelf, obj)
    owner = {sym: src for src, syms in defs.items() for sym in syms}
    graph = collections.defaultdict(dict)
    for src, syms in sorted(undefs.items()):
        for sym in sorted(syms):
            callee = owner.get(sym)
            if callee and callee != src:
                graph[src].setdefault(callee, []).append(sym)
    for src, callees in sorted(graph.items()):
        for callee, syms in sorted(callees.items()):
            if rank[room_of(callee)] > rank[room_of(src)]:
                problems.append("%s (room %s) calls %s in %s, a room above it" %
                                (src, room_of(src), ", ".join(syms[:3]), callee))
    for comp in strongly_connected({s: list(c) for s, c in graph.items()}):
        edges = []
        for a in comp:
            for b in comp:
                if b in graph.get(a, {}):
                    edges.append("%s -> %s (%s)" % (a, b, ", ".join(graph[a][b][:2])))
        problems.append("a cycle of calls: %s" % "; ".join(edges))
    return problems, defs, graph


def includes_of(path):
    with open(path, encoding="utf-8") as f:
        return INCLUDE_RE.findall(f.read())


def header_rooms(source_dir):
    """{header name: room} for every header under src/lib"""
    rooms = {}
    for root, _, files in os.walk(os.path.join(source_dir, "src", "lib")):
        for fn in files:
            if fn.endswith(".h"):
                rooms[fn] = room_of(os.path.relpath(os.path.join(root, fn), source_dir))
    return rooms


def check_includes(source_dir, order):
    problems = []
    rank = {room: i for i, room in enumerate(order)}
    hrooms = header_rooms(source_dir)
    for top in ("src", "fuzz", "examples", "bench", "sim", "tests"):
        for root, _, files in os.walk(os.path.join(source_dir, top)):
            for fn in sorted(files):
                if not fn.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, fn)
                rel = os.path.relpath(path, source_dir).replace(os.sep, "/")
                room = room_of(rel)
                for name in includes_of(path):
                    if name.startswith("gpuctl/"):
                        continue  # a public header (include/gpuctl/), whatever its base name
                    base = os.path.basename(name)
                    if base in ABI_HEADERS and hrooms.get(base) == ABI_HEADERS[base] and \
                            room != ABI_HEADERS[base]:
                        problems.append('%s includes "%s": only src/lib/%s/ knows that ABI' %
                                        (rel, name, ABI_HEADERS[base]))
                    if room is not None and room in rank and base in hrooms and \
                            rank.get(hrooms[base], -1) > rank[room]:
                        problems.append('%s (room %s) includes "%s" of room %s, above it' %
                                        (rel, room, name, hrooms[base]))
                    if rel.startswith("src/cli/") and base in hrooms and \
                            base not in CLI_MAY_INCLUDE:
                        problems.append('%s includes "%s": the CLI may include of src/lib only '
                                        '%s (scripts/check-layers.py CLI_MAY_INCLUDE)' %
                                        (rel, name, ", ".join(sorted(CLI_MAY_INCLUDE))))
    return problems


def check_cli(readelf, source_dir, cli_objects, lib_defs):
    """The CLI's objects take from libgpuctl only public symbols and those of the sources behind
    CLI_MAY_INCLUDE."""
    problems = []
    hrooms = header_rooms(source_dir)
    allowed_sources = set()
    for header in CLI_MAY_INCLUDE:
        stem = header[:-2]
        room = hrooms.get(header)
        if room:
            sub = "" if room == "top" else room + "/"
            allowed_sources.add("src/lib/%s%s.c" % (sub, stem))
    hidden_owner = {sym: src for src, syms in lib_defs.items()
                    for sym, vis in syms.items() if vis != "DEFAULT"}
    for obj in cli_objects:
        src = object_source(obj)
        _, undefined = symbols(readelf, obj)
        for sym in sorted(undefined):
            owner = hidden_owner.get(sym)
            if owner and owner not in allowed_sources:
                problems.append("%s uses %s, internal to libgpuctl (%s): the CLI is a client of "
                                "the public API" % (src, sym, owner))
    return problems


def split_args(argv):
    order, lib, cli, mode = [], [], [], None
    for arg in argv:
        if arg in ("--order", "--lib", "--cli"):
            mode = arg
            continue
        items = [a for a in arg.split(";") if a]
        if mode == "--order":
            order += items
        elif mode == "--lib":
            lib += items
        elif mode == "--cli":
            cli += items
        else:
            raise SystemExit("check-layers: unexpected argument %r" % arg)
    return order, lib, cli


def main(argv):
    if len(argv) < 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    readelf, source_dir = argv[1], argv[2]
    order, lib, cli = split_args(argv[3:])
    if not order or not lib or not cli:
        print("check-layers: --order, --lib and --cli each need at least one item",
              file=sys.stderr)
        return 2
    problems, lib_defs, graph = check_lib(readelf, order, lib)
    problems += check_includes(source_dir, order)
    problems += check_cli(readelf, source_dir, cli, lib_defs)
    for p in problems:
        print("gpuctl: layers: " + p, file=sys.stderr)
    if problems:
        return 1
    edges = sum(len(c) for c in graph.values())
    print("check-layers: %d objects in %d rooms (%s), %d calls between objects, all downward "
          "and without a cycle; %d CLI objects use only the public API and %s" %
          (len(lib), len(order), " < ".join(order), edges, len(cli),
           ", ".join(sorted(CLI_MAY_INCLUDE))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
