#!/usr/bin/env bash
# End-to-end: `camel train mlp` must reach a test accuracy on real data.
#   train_mlp.sh CAMEL DATA_DIR MIN_ACCURACY LOG [extra camel flags...]
# Skips (exit 77) when the data directory is absent.
set -euo pipefail
camel=$1 data=$2 min=$3 log=$4
shift 4
if [ ! -d "$data" ]; then
  echo "skipped: $data not found"
  exit 77
fi
"$camel" train mlp --data "$data" --log "$log" "$@"
python3 - "$log" "$min" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
final = records[-1]
assert final["event"] == "final", "the log must end with a final record"
epochs = [r for r in records if r["event"] == "epoch"]
assert len(epochs) == final["epochs"], "one record per epoch"
acc, need = final["test_accuracy"], float(sys.argv[2])
print(f"test accuracy {acc:.4f} (need >= {need}), wall {final['wall_seconds']:.1f} s")
sys.exit(0 if acc >= need else 1)
PY
