#!/usr/bin/env python3
"""Session 11 (helper h11b): which kernels two builds of one .cu compiled to the SAME SASS.

    sass_same.py base.o new.o       (runs cuobjdump -sass; CUOBJDUMP overrides the tool's path)

Functions are matched by their mangled name up to the end of the template arguments, trailing `false`
bool arguments dropped (so a kernel that only gained a trailing parameter or a defaulted `bool X = false`
template argument still matches its old self); each function's SASS is compared with the
addresses and encodings stripped and whitespace normalised. Prints one line per function: identical /
DIFFERS (n of m instructions) / only in base / only in new."""
import os
import re
import subprocess
import sys

TOOL = os.environ.get("CUOBJDUMP", "/opt/cudatools/nvidia/cu13/bin/cuobjdump")


def functions(obj):
    out = subprocess.run([TOOL, "-sass", obj], capture_output=True, text=True, check=True).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            key = name.split("EEv")[0] if "EEv" in name else name
            while key.endswith("ELb0"):
                key = key[:-4]
            funcs[key] = (name, [])
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m and name:
            funcs[key][1].append(" ".join(m.group(1).split()))
    return funcs


def main():
    a, b = functions(sys.argv[1]), functions(sys.argv[2])
    same = 0
    for key in sorted(set(a) | set(b)):
        if key not in b:
            print("only in base: %s" % a[key][0])
        elif key not in a:
            print("only in new:  %s" % b[key][0])
        elif a[key][1] == b[key][1]:
            same += 1
            print("identical:    %s (%d instructions)" % (b[key][0], len(b[key][1])))
        else:
            x, y = a[key][1], b[key][1]
            diff = sum(1 for i in range(max(len(x), len(y))) if i >= len(x) or i >= len(y) or x[i] != y[i])
            print("DIFFERS:      %s (%d of %d / %d instructions)" % (b[key][0], diff, len(x), len(y)))
    print("%d identical of %d in both" % (same, len(set(a) & set(b))))


main()
