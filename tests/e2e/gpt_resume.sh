#!/usr/bin/env bash
# `camel train gpt` through checkpoints: a run stopped part-way (--stop-at) and
# resumed (--resume) must end bitwise identical to an uninterrupted run (model and
# optimizer state, and the logged losses); then `camel sample` from the checkpoint.
#   gpt_resume.sh CAMEL TEXT_FILE WORK_DIR
set -euo pipefail
camel=$1 data=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
trap 'echo "failed; stderr of the runs:"; cat "$work/stderr.txt"' ERR
common=(--preset char-tiny --data "$data" --steps 12 --batch 4 --warmup 2 --eval-every 4 --eval-iters 2
        --sample-every 0 --sample-chars 0 --seed 5 --threads 1)
"$camel" train gpt "${common[@]}" --checkpoint-dir "$work/a" --log "$work/a.jsonl" >/dev/null 2>>"$work/stderr.txt"
"$camel" train gpt "${common[@]}" --checkpoint-dir "$work/b" --log "$work/b1.jsonl" --stop-at 6 >/dev/null 2>>"$work/stderr.txt"
"$camel" train gpt "${common[@]}" --checkpoint-dir "$work/b" --log "$work/b2.jsonl" --resume 2>>"$work/stderr.txt" | grep "resumed from"
python3 - "$work" <<'PY'
import json, struct, sys
work = sys.argv[1]

def tensors(path):
    """The tensor entries of a safetensors file: name -> (dtype, shape, bytes); metadata ignored."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}

for name in ("model.safetensors", "state.safetensors"):
    a, b = tensors(f"{work}/a/{name}"), tensors(f"{work}/b/{name}")
    assert a.keys() == b.keys(), f"{name}: different entries"
    diff = [k for k in a if a[k] != b[k]]
    assert not diff, f"{name}: resumed run differs in {diff[:5]}"
    print(f"{name}: {len(a)} tensors bitwise identical")

def evals(path):
    return {r["step"]: (r["train_loss"], r["val_loss"]) for r in map(json.loads, open(path)) if r["event"] == "eval"}

a, b1, b2 = evals(f"{work}/a.jsonl"), evals(f"{work}/b1.jsonl"), evals(f"{work}/b2.jsonl")
assert sorted(a) == [4, 8, 12] and sorted(b1) == [4] and sorted(b2) == [8, 12], (a, b1, b2)
assert all(a[s] == {**b1, **b2}[s] for s in a), "logged losses differ"
print("losses at steps 4, 8, 12 identical")
PY
out=$("$camel" sample --checkpoint "$work/a" --prompt "ROMEO:" --tokens 40 --seed 3 2>/dev/null)
again=$("$camel" sample --checkpoint "$work/a" --prompt "ROMEO:" --tokens 40 --seed 3 2>/dev/null)
[ "$out" = "$again" ] || { echo "sample: same seed, different text"; exit 1; }
case "$out" in ROMEO:*) ;; *) echo "sample must start with the prompt: $out"; exit 1 ;; esac
[ "${#out}" -eq 46 ] || { echo "sample: expected 46 characters, got ${#out}"; exit 1; }
if "$camel" sample --checkpoint "$work/a" --prompt "ROMEO@" 2>"$work/err.txt"; then
  echo "a prompt outside the vocabulary must fail"; exit 1
fi
grep -q "'@' (position 5) is not in the model's vocabulary" "$work/err.txt" || { cat "$work/err.txt"; exit 1; }
if "$camel" sample --checkpoint "$work/missing" 2>/dev/null; then echo "a missing checkpoint must fail"; exit 1; fi
echo "sample: ok"
