#!/usr/bin/env bash
# The validation campaign behind the README's accuracy table (issue 14): real gloo training on the
# emulated cluster (one network namespace per rank, the server's link -- ring: every worker's --
# shaped with tc), three models, four architectures, W = 1..4, two link rates, three runs a point.
# Needs root and an otherwise idle machine; about 90 minutes on 2 cores (each validation pools
# three one-worker profile runs and measures the link's duplex limit first).
#
#   bash scenarios/validation_campaign.sh [OUT_DIR]     (default results/campaign)
#
# Each (model, rate, overlap) lands in OUT_DIR/MODEL-RATE-OVERLAP/ with the scenario's CSV,
# figures and validate-runs.json.gz, and compacted (a few hundred kB, see
# profilers.distributed.measurements.compacted) in OUT_DIR/kept/MODEL-RATE-OVERLAP.json.gz: the
# folder to ship (simcore/data/validation/NAME/) and to assess again in seconds with
#   python scenarios/validation_campaign.py --from-runs OUT_DIR/kept
# Environment: MODELS, RATES (Mbit/s), STEPS, WARMUP override the defaults below.
set -euo pipefail
out=${1:-results/campaign}
steps=${STEPS:-24}
warmup=${WARMUP:-4}
here=$(cd "$(dirname "$0")" && pwd)
keep() {  # keep OUT_DIR/$1/validate-runs.json.gz compacted as OUT_DIR/kept/$1.json.gz
  mkdir -p "$out/kept"
  python -c 'import sys
from profilers.distributed.measurements import compacted, load_measurements, save_measurements
save_measurements(compacted(load_measurements(sys.argv[1])), sys.argv[2], overwrite=True)' \
    "$out/$1/validate-runs.json.gz" "$out/kept/$1.json.gz"
}
for model in ${MODELS:-resnet8 cnn mlp}; do
  for rate in ${RATES:-300 500}; do
    common=(--model "$model" --testbed "${rate}Mbit/s" --workers-max 4 --repetitions 3
            --steps "$steps" --warmup "$warmup" --quiet)
    echo "== $model at $rate Mbit/s, per-layer overlap: PS async, PS sync, ring ($(date -u +%H:%M))"
    python "$here/validate.py" "${common[@]}" --overlap layerwise \
      --arch ps-async --arch ps-sync --arch allreduce --out "$out/$model-$rate-layerwise"
    keep "$model-$rate-layerwise"
    echo "== $model at $rate Mbit/s, strict phases: PS sync ($(date -u +%H:%M))"
    python "$here/validate.py" "${common[@]}" --overlap strict \
      --arch ps-sync --out "$out/$model-$rate-strict"
    keep "$model-$rate-strict"
  done
done
echo "== done ($(date -u +%H:%M))"
