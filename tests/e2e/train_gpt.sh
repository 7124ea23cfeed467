#!/usr/bin/env bash
# End-to-end: `camel train gpt` (the README's main job) must reach a validation loss.
#   train_gpt.sh CAMEL MAX_VAL_LOSS LOG [extra camel flags...]
set -euo pipefail
camel=$1 max=$2 log=$3
shift 3
# Idle OpenMP threads sleep instead of spinning: the same speed on an idle machine, and no
# collapse when other jobs share the cores (measured 5x slower spinning on 2 busy cores).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$camel" train gpt --log "$log" "$@"
python3 - "$log" "$max" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
final = records[-1]
assert final["event"] == "final", "the log must end with a final record"
evals = [r for r in records if r["event"] == "eval"]
assert evals and evals[-1]["step"] == final["steps"], "an eval record at the last step"
assert all(a["step"] < b["step"] for a, b in zip(evals, evals[1:])), "eval steps increase"
loss, need = final["val_loss"], float(sys.argv[2])
print(f"val loss {loss:.4f} (need < {need}), {final['steps']} steps, "
      f"{final['tokens_per_s']:.0f} tokens/s, wall {final['wall_seconds']:.1f} s")
sys.exit(0 if loss < need else 1)
PY
