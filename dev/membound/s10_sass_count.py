#!/usr/bin/env python3
"""SASS instructions per element of the vectorized to-fp8 convert loops (s10 study, helper h9m2):
python3 s10_sass_count.py OBJ, OBJ from
  nvcc -DCML_HAVE_CUDA=1 -Isrc -Iinclude -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[compute_90a,sm_90a]
       -x cu -c src/kernels/cuda/ewise/convert_scaled.cu -o OBJ
The executed count per step (16 elements a thread) = the outer loop (the backward branch spanning
the most code) minus the NaN slow path (from the VOTE's branch target to the fast path's jump over
it). YT / XT: dtype enum values (0 f32, 1 f16, 2 bf16, 3 e4m3, 4 e5m2)."""
import os
import re
import subprocess
import sys
obj = sys.argv[1]
CUOBJDUMP = os.environ.get('CUOBJDUMP', '/opt/cudatools/nvidia/cu13/bin/cuobjdump')
out = subprocess.run([CUOBJDUMP, '-sass', obj], capture_output=True, text=True).stdout
for f in re.split(r'\n\s+Function : ', out)[1:]:
    name = f.split('\n', 1)[0].strip()
    m = re.search(r'vec_kernelILi([34])ELi([012])ELb([01])', name)
    if not m: continue
    ins = [(int(a, 16), t.strip()) for a, t in re.findall(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);', f)]
    back = []
    for a, t in ins:
        b = re.search(r'BRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)', t)
        if b and int(b.group(1), 16) <= a: back.append((int(b.group(1), 16), a))
    lo, hi = max(back, key=lambda r: r[1] - r[0])
    body = [(a, t) for a, t in ins if lo <= a <= hi]
    slow = 0
    vote = [i for i, (a, t) in enumerate(body) if t.startswith('VOTE')]
    if vote:
        i = vote[0]
        br = next(t for a, t in body[i + 1:] if 'BRA' in t)
        x = int(re.search(r'0x([0-9a-f]+)', br).group(1), 16)
        # the fast path's jump over the slow path: last unconditional BRA before x
        y = max(int(re.search(r'0x([0-9a-f]+)', t).group(1), 16) for a, t in body if a < x and t.startswith('BRA'))
        slow = len([1 for a, t in body if x <= a < y])
    ops = {}
    for a, t in body:
        op = re.sub(r'^@!?U?P\w+\s+', '', t).split()[0].split('.')[0]
        ops[op] = ops.get(op, 0) + 1
    n = len(body) - slow
    print(f'YT={m.group(1)} XT={m.group(2)} amax={m.group(3)}: loop {len(body)} static, slow path {slow}, executed {n} per 16 = {n/16:.2f}/element')
