#!/usr/bin/env python3
"""The consumer k-block loop of every gemm_sm90_kernel in a cuobjdump -sass listing (dev/gemm_sm90/README.md,
"Plan (session 9 study): the consumer loop"): its length (SASS instructions, loop head to back-edge) and
what each instruction feeds, by a backward slice over two copies of the loop body:
wgmma (HGMMA/QGMMA, WARPGROUP.*), sync (SYNCS.*), branch, desc (feeds only the wgmma descriptor registers),
bar (only barrier addresses, parities, the arrive predicate), loop (only the back-edge), ring (several).
    cuobjdump -sass x.o > x.sass; python3 dev/gemm_sm90/consumer_sass.py [-v] x.sass [y.sass ...]"""
import re, sys, collections
def funcs(path):
    cur=None; out=collections.OrderedDict()
    for line in open(path):
        m=re.search(r'Function : (\S+)', line)
        if m: cur=m.group(1); out[cur]=[]; continue
        m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m and cur: out[cur].append((int(m.group(1),16), m.group(2).strip()))
    return out
def name(f):
    m=re.search(r'ILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E', f)
    bn,st,kind,ta,tb,cl,pp=m.groups()
    op={('0','0'):'NT',('0','1'):'NN',('1','1'):'TN',('1','0'):'TT'}[(ta,tb)]
    kd=['bf16','f16','tf32','e4m3','e5m2'][int(kind)]
    return f"<{bn},{st},{op},c{cl}>" if kd=='bf16' and pp=='0' else f"<{bn},{st},{kd},{op},c{cl}{',pp' if pp=='1' else ''}>"
def loop(body):
    """the innermost loop holding 4 wgmmas: the shortest [target, backward branch] range with >= 4"""
    addrs=[a for a,_ in body]; idx={a:i for i,a in enumerate(addrs)}
    best=None
    for i,(a,t) in enumerate(body):
        m=re.search(r'BRA (0x[0-9a-f]+)', t)
        if not m: continue
        tgt=int(m.group(1),16)
        if tgt>=a or tgt not in idx: continue
        j=idx[tgt]
        if sum('GMMA.' in x for _,x in body[j:i+1])>=4 and (best is None or i-j<best[1]-best[0]): best=(j,i)
    return None if best is None else body[best[0]:best[1]+1]
REG=re.compile(r'\b(U?R\d+|U?P\d+|UPT|PT)\b')
def regs(s):
    out=set()
    for r in REG.findall(s):
        if r in ('PT','UPT'): continue
        out.add(r)
    return out
def parse(t):
    pred=None
    m=re.match(r'@(!?)(U?P\d+)\s+(.*)',t)
    if m: pred=m.group(2); t=m.group(3)
    parts=t.split(None,1); op=parts[0]; args=parts[1] if len(parts)>1 else ''
    ops=[a.strip() for a in args.split(',')]
    dst=set(); src=set()
    if op.startswith(('HGMMA','QGMMA')):
        m=re.search(r'gdesc\[UR(\d+)\]',t); n=int(m.group(1)); src|={f'UR{n+i}' for i in range(4)}
    elif op.startswith(('SYNCS','BRA','WARPGROUP','NOP')):
        src|=regs(args)
        if 'TRYWAIT' in op: dst.add(ops[0]); src-= {ops[0]}
    elif op.startswith(('ISETP','UISETP','FSETP','VOTEU')):
        dst|=regs(ops[0]); 
        if op.startswith(('ISETP','UISETP')) : dst|=regs(ops[1]) ; src|=regs(','.join(ops[2:]))
        else: src|=regs(','.join(ops[1:]))
    else:
        if ops and ops[0]:
            dst|=regs(ops[0]); src|=regs(','.join(ops[1:]))
            if op.startswith(('IMAD.WIDE','UIMAD.WIDE','CS2R')):
                r=list(regs(ops[0]))[0]; k=r.rstrip('0123456789'); n=int(r[len(k):]); dst.add(f'{k}{n+1}')
    if pred: src.add(pred)
    src.discard('RZ'); src.discard('URZ'); dst.discard('RZ'); dst.discard('URZ')
    return op,dst,src
def classify_loop(L):
    body=[t for a,t in L]; n=len(body)
    P=[parse(t) for t in body]*2
    need=[set() for _ in range(2*n)]
    live={}  # reg -> set of sink kinds needing it
    for i in range(2*n-1,-1,-1):
        op,dst,src=P[i]
        kinds=set()
        if op.startswith(('HGMMA','QGMMA')): kinds={'desc'}
        elif op.startswith('SYNCS'): kinds={'bar'}
        elif op.startswith('BRA'): kinds={'bar'} if i%n!=n-1 else {'loop'}
        else:
            for d in dst: kinds|=live.get(d,set())
        need[i]=kinds
        for d in dst: live.pop(d,None)
        for s_ in src: live.setdefault(s_,set()).update(kinds)
    out=[]
    for i in range(n):
        op=P[i][0]
        if op.startswith(('HGMMA','QGMMA','WARPGROUP')): c='wgmma'
        elif op.startswith('SYNCS'): c='sync'
        elif op.startswith('BRA'): c='branch'
        else:
            k=need[i]
            c='other' if not k else (list(k)[0] if len(k)==1 else 'ring')
        out.append(c)
    return out
CATS=('wgmma','sync','branch','desc','bar','loop','ring','other')
if __name__=='__main__':
    verbose='-v' in sys.argv
    for path in [p for p in sys.argv[1:] if p!='-v']:
        print('==',path)
        for f,body in funcs(path).items():
            if 'gemm_sm90_kernel' not in f: continue
            L=loop(body)
            if L is None: continue
            c=classify_loop(L); cnt=collections.Counter(c)
            print(f"{name(f):16s} {len(L):3d}  " + " ".join(f"{k}={cnt[k]}" for k in CATS))
            if verbose:
                for (a,t),k in zip(L,c): print(f"   {a:#06x} {k:6s} {t}")
