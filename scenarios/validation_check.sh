#!/usr/bin/env bash
# An independent check of the predictions as they are now (simcore/data/validation/check-*):
# the campaign's models at another batch size and link rate (BATCH, RATE), per-layer overlap,
# PS Async-SGD, PS Sync-SGD and ring AllReduce, W = 1..4, 3 runs a point; nothing in the model
# was chosen on these runs. Needs root and an otherwise idle machine; about 20 minutes on 2 cores.
#
#   bash scenarios/validation_check.sh [OUT_DIR]     (default results/check-RATE)
#
# Each model lands in OUT_DIR/MODEL-bBATCH-RATE-layerwise/ (the scenario's CSV, figures and runs)
# and compacted in OUT_DIR/kept/ (the folder to ship); assess it again with
#   sgdsim validate --from-runs OUT_DIR/kept
# Environment: MODELS overrides the models, BATCH the batch size (16), RATE the link rate in
# Mbit/s (400): check-250 was made with BATCH=24 RATE=250.
set -euo pipefail
batch=${BATCH:-16}
rate=${RATE:-400}
out=${1:-results/check-$rate}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/kept"
for model in ${MODELS:-mlp cnn resnet8}; do
  name="$model-b$batch-$rate-layerwise"
  echo "== $name ($(date -u +%H:%M))"
  python "$here/validate.py" --model "$model" --batch-size "$batch" --testbed "${rate}Mbit/s" \
    --workers-max 4 \
    --repetitions 3 --steps 24 --warmup 4 --quiet --overlap layerwise \
    --arch ps-async --arch ps-sync --arch allreduce --out "$out/$name"
  python -c 'import sys
from profilers.distributed.measurements import compacted, load_measurements, save_measurements
save_measurements(compacted(load_measurements(sys.argv[1])), sys.argv[2], overwrite=True)' \
    "$out/$name/validate-runs.json.gz" "$out/kept/$name.json.gz"
done
echo "== done ($(date -u +%H:%M))"
