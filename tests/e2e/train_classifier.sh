#!/usr/bin/env bash
# End-to-end: `camel train mlp|cnn` must reach a test accuracy on real data.
#   train_classifier.sh CAMEL MODEL DATA_DIR MIN_ACCURACY LOG [extra camel flags...]
# Skips (exit 77) when the data directory is absent.
set -euo pipefail
camel=$1 model=$2 data=$3 min=$4 log=$5
shift 5
if [ ! -d "$data" ]; then
  echo "skipped: $data not found"
  exit 77
fi
"$camel" train "$model" --data "$data" --log "$log" "$@"
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
