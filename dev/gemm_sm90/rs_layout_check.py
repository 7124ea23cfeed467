#!/usr/bin/env python3
"""Session 13 (helper h13b): index-level check of the tf32 RS launch (gemm_sm90_kernel.cuh, cml__sm90_rs_chunk,
cml__sm90_rs_kblock, cml__sm90_tma_epilogue_f32t): every fragment load reads K row 8k + t (+4) of the column its
fragment row stands for, the 64 rows of a consumer are a permutation of its 64 N columns, the epilogue writes each
accumulator to the D row / column it holds, and a half warp's 8-byte loads and stores hit 32 distinct banks.
usage: python3 dev/gemm_sm90/rs_layout_check.py  (prints "all checks passed")"""
def chunk_of(warp, g):
    pair = g >> 1; x = 2 * (warp & 1) + (pair >> 1)
    return x ^ 5 if pair & 1 else x
def unswz(off):  # byte offset inside a 1024-aligned 128B-swizzled region -> (row, logical byte in row)
    row = off // 128; phys = (off % 128) // 16; within = off % 16
    return row, ((phys ^ (row % 8)) * 16 + within)
ok = True
for consumer in range(2):
    rows_seen = {}
    for warp in range(4):
        banks = {}
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            ch = chunk_of(warp, g)
            box = (2 * consumer + (warp >> 1)) * 4096 + 8 * (g & 1)
            frag0 = box + 128 * t + ((ch ^ t) << 4)
            frag1 = box + 128 * (t + 4) + ((ch ^ (t + 4)) << 4)
            for k in range(4):
                for which, base in ((0, frag0), (1, frag1)):
                    addr = base + 1024 * k
                    bx = addr // 4096; off = addr % 4096
                    krow, lb = unswz(off)
                    n0 = bx * 32 + lb // 4  # the N column (within the stage's 128) of the lo word
                    # expected: a[2*which] = row g, K t + 4*which; a[2*which+1] = row g+8
                    exp_k = 8 * k + t + 4 * which
                    if krow != exp_k: ok = False; print("K mismatch", consumer, warp, lane, k, which, krow, exp_k)
                    for h in range(2):
                        frow = 16 * warp + g + 8 * h  # fragment row in the consumer's 64
                        n = n0 + h
                        key = (consumer, frow)
                        if rows_seen.setdefault(key, n) != n: ok = False; print("row maps to 2 n", key)
                    # banks per half warp (LDS.64), k = 0 only
                    if k == 0:
                        half = lane // 16
                        for wd in range(2):
                            b = ((addr // 4) + wd) % 32
                            banks.setdefault((which, half), []).append(b)
        for key, bl in banks.items():
            if len(set(bl)) != 32: ok = False; print("LDS conflict", consumer, warp, key, sorted(bl))
    ns = sorted(rows_seen[(consumer, r)] for r in range(64))
    if ns != list(range(64 * consumer, 64 * consumer + 64)): ok = False; print("rows not a permutation", consumer, ns)
    # epilogue: acc row frow -> n (within the consumer: rows_seen - 64c), the stored n must be the same
    for c in range(8):  # BN = 256: 8 blocks
        for warp in range(4):
            for x in range(2):
                for i in range(4):
                    banks = {}
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        ch = chunk_of(warp, g)
                        n_epi = 32 * (warp >> 1) + 4 * ch + 2 * (g & 1)  # cml__sm90_tma_epilogue_f32t's n - n0
                        for h in range(2):
                            if rows_seen[(consumer, 16 * warp + g + 8 * h)] - 64 * consumer != n_epi + h:
                                ok = False; print("epilogue n mismatch")
                        row = 8 * i + 2 * t + x
                        sub = 4096 * (warp >> 1) + 8 * (g & 1)
                        a = sub + row * 128 + ((ch ^ (2 * t + x)) << 4)
                        bx = a // 4096; r, lb = unswz(a % 4096)
                        # D element: row r of block c = D row m0 + 32c + r, column n0 + 32*bx + lb/4 (+1)
                        q = 4 * c + i; col_acc = 8 * q + 2 * t + x  # accumulator column of acc[4q + x] = D row - m0
                        if 32 * c + r != col_acc: ok = False; print("epilogue m mismatch", c, i, t, x, r)
                        if 32 * bx + lb // 4 != n_epi: ok = False; print("epilogue n addr mismatch")
                        for wd in range(2):
                            banks.setdefault(lane // 16, []).append(((a // 4) + wd) % 32)
                    for hw, bl in banks.items():
                        if len(set(bl)) != 32: ok = False; print("staging conflict", c, warp, x, i, hw)
print("all checks", "passed" if ok else "FAILED")

# the non-transposed RS launch (TN / TT: A stored K x M from registers, D = A B; cml__sm90_stage_f32p): fragment row
# 16w + g + 8h holds D row R0 + h (within the consumer's 64), R0 = 32 (w / 2) + 4 chunk + 2 (g % 2); the staging
# block is 64 rows x 32 columns (128-byte rows, 128-byte swizzle), block c = accumulator columns 32c..
ok2 = True
for warp in range(4):
    for i in range(4):
        for h in range(2):
            banks = {}
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                R0 = 32 * (warp >> 1) + 4 * chunk_of(warp, g) + 2 * (g & 1)
                if rows_seen[(1, 16 * warp + g + 8 * h)] - 64 != R0 + h: ok2 = False; print("p row mismatch")
                R = R0 + h
                a = R * 128 + (((2 * i + t // 2) ^ (R & 7)) << 4) + 8 * (t & 1)
                r, lb = unswz(a)
                if r != R or lb // 4 != 8 * i + 2 * t: ok2 = False; print("p addr mismatch", warp, lane, i, h)
                for wd in range(2):
                    banks.setdefault(lane // 16, []).append(((a // 4) + wd) % 32)
            for hw, bl in banks.items():
                if len(set(bl)) != 32: ok2 = False; print("p staging conflict", warp, i, h, hw, sorted(bl))
print("non-transposed staging checks", "passed" if ok2 else "FAILED")
