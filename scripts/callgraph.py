#!/usr/bin/env python3
"""callgraph.py -- cross-file calls inside one folder of C sources.

  scripts/callgraph.py DIR [--floors FILE]

Lists, for each .c file of DIR, the functions of other .c files of DIR it
calls. A definition is a non-static function whose name starts a line's
declaration and whose parameter list is followed by '{'; a call is a name
followed by '(' outside comments and strings. With --floors, FILE maps each source to its floor
(lines "floor-number file.c"), and the script prints every call that goes
to a higher floor and exits 1 if there is one.
"""
import os, re, sys
from collections import defaultdict

def strip(src):
    src = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), src, flags=re.S)
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
    return re.sub(r"'(\\.|[^'\\])*'", "''", src)

def main():
    d = sys.argv[1]
    floors = None
    if len(sys.argv) > 3 and sys.argv[2] == '--floors':
        floors = {}
        for line in open(sys.argv[3]):
            if line.strip() and not line.startswith('#'):
                n, f = line.split()
                floors[f] = int(n)
    files = sorted(f for f in os.listdir(d) if f.endswith('.c'))
    owner = {}
    defn = re.compile(r'^(?!static\b|typedef\b|extern\b|struct\s+\w+\s*\{)'
                      r'[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(', re.M)
    for f in files:
        src = strip(open(os.path.join(d, f)).read())
        for m in defn.finditer(src):
            depth, i = 1, m.end()
            while i < len(src) and depth:
                depth += {'(': 1, ')': -1}.get(src[i], 0)
                i += 1
            rest = src[i:].lstrip()
            if rest.startswith('{'):
                owner[m.group(1)] = f
    edges = defaultdict(lambda: defaultdict(int))
    for f in files:
        src = strip(open(os.path.join(d, f)).read())
        for m in re.finditer(r'\b([A-Za-z_]\w*)\s*\(', src):
            g = owner.get(m.group(1))
            if g and g != f:
                edges[f][(g, m.group(1))] += 1
    bad = 0
    for f in files:
        for (g, fn), n in sorted(edges[f].items()):
            up = floors is not None and floors.get(g, 0) > floors.get(f, 0)
            bad += up
            if floors is None or up:
                print(f"{f} -> {g}: {fn}" + (f" x{n}" if n > 1 else "") +
                      ("   <-- UP" if up else ""))
    if floors is not None:
        for f in files:
            if f not in floors:
                print(f"{f}: no floor"); bad += 1
        print(f"{bad} call(s) to a higher floor" if bad else
              "no call goes to a higher floor")
    sys.exit(1 if bad else 0)

main()
