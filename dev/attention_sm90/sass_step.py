"""Session 8, part 3 (README): the SASS instructions of one consumer step (per warp), counted along one
path of the loop: from the loop head HEAD_HEX along the given branch decisions (T taken, N not) to the
back edge; an mbarrier wait's retry branch (after SYNCS.PHASECHK) counts as not taken; an undecided
branch stops the walk and prints its context. Opcode classes are printed with the total.
  cuobjdump -sass -fun KERNEL x.cubin > k.sass; sass_step.py k.sass HEAD_HEX 'addr:T,addr:N,...' [-v]
The decisions of the README's counts (bwd_harness.cu -DHD=128 -cubin, this tree):
  lib  (VAR 32):   530 '730:N,c00:N,c80:T,2dc0:N,3800:T,4740:N,4a00:T,4ac0:T,5530:T'
  diet (VAR 7712): 450 '650:N,6a0:T,1470:T,3310:N,3540:T,3f90:N,4270:T,4370:T,4b50:T'
(a steady full step: not the end, not a tile's first or last, a dQ product deferred, no mask, not
causal; lib 4a00:N / diet 1470:N,4270:N give the masked causal step). Those decisions are for 60fa81e's
harness (its lib / diet lists); session 9's D = 256 counts (README "Session 9 (helper h9a)") walked
bwd_harness.cu -DHD=256 -cubin of c1fd092 (both consumer loops, decisions by hand the same way)."""
import re, sys, collections
ins = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m: ins.append((int(m.group(1), 16), m.group(2).strip()))
addr = {a: i for i, (a, _) in enumerate(ins)}
head = int(sys.argv[2], 16)
dec = {}
for kv in filter(None, sys.argv[3].split(',')):
    a, d = kv.split(':'); dec[int(a, 16)] = d
verbose = '-v' in sys.argv
i = addr[head]; path = []; steps = 0
while True:
    a, t = ins[i]
    steps += 1
    if steps > 5000: print("too long"); break
    m = re.match(r"(@!?U?P\w+\s+)?(BRA(?:\.\S+)?)\s+(0x[0-9a-f]+)", t)
    if m:
        tgt = int(m.group(3), 16)
        if m.group(1) is None:
            if tgt == head: path.append((a, t)); break
            path.append((a, t)); i = addr[tgt]; continue
        if a not in dec and 'SYNCS.PHASECHK' in ins[i - 1][1]:
            dec[a] = 'N' # an mbarrier wait that succeeds at once (its retry loop is out of line)
        if a not in dec:
            print("UNDECIDED %x: %s" % (a, t))
            for b, u in ins[max(0, i - 8):i + 3]: print("    %x %s" % (b, u))
            break
        path.append((a, t))
        if dec[a] == 'T':
            if tgt == head: break
            i = addr[tgt]; continue
        i += 1; continue
    if t.startswith('EXIT') or 'EXIT' == t.split()[-1]:
        print("hit EXIT at %x" % a); break
    path.append((a, t)); i += 1
c = collections.Counter()
for a, t in path:
    op = re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split('.')[0]
    c[op] += 1
print("total", len(path))
print(" ".join("%s %d" % kv for kv in c.most_common()))
if verbose:
    for a, t in path: print("%05x %s" % (a, t))
