#!/usr/bin/env bash
# The paper's protocol with real weights, on a machine with CUDA and a network, in one command:
#   benchmarks/gpu_check.sh [--dataset=PATH_OR_hf:REPO] [--dry-run]
# 1. the cost table of the 21 paper metrics on the GPU (real parameters, downloaded by pyiqa),
#    printed next to the CPU table measured on the project's machine (benchmarks/bench_metrics_cpu.md);
# 2. the suite over the 21 metrics, steps 5/10/20 against step 1, on --dataset (default: the
#    embedded set; pass Banana100 for the paper's 12 seed images x 5 runs).
# 3. the VLM metrics (VisualQuality-R1 and Q-Align, ~17 GB each from the hub; RALI, a CLIP model)
#    through the same protocol: the paper's two positive controls (VisualQuality-R1, RALI) and Q-Align.
# 4. every GPU: the VLM run again with one xdist worker per visible GPU (`-n k --device=cuda`,
#    worker gwI on cuda:I mod k), its run facts naming each worker's GPU and its Δs identical to
#    the one-GPU run's; then `--device=cuda:N` on the last GPU.
# Without CUDA, or with --dry-run, it does a tiny run on CPU instead (PIQE, which needs no files;
# small images; two seed images; the three VLM adapters on tiny random models, all of
# tests/test_vlm_adapters.py, Q-Align's subprocess included), so the script itself is tested
# offline (tests/test_gpu_check.py).
# $PYTHON picks the interpreter (default python), $GPU_CHECK_REPORTS the JUnit folder (reports).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
REPORTS=${GPU_CHECK_REPORTS:-reports}
DATASET=fixtures/emulated
DRY=0
for arg in "$@"; do
    case "$arg" in
        --dataset=*) DATASET=${arg#--dataset=} ;;
        --dry-run) DRY=1 ;;
        *) echo "usage: $0 [--dataset=PATH] [--dry-run]" >&2; exit 2 ;;
    esac
done
if [[ $DRY == 0 ]] && ! "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    echo "gpu_check: no CUDA here: a dry run on CPU instead" >&2
    DRY=1
fi
if [[ $DRY == 1 ]]; then
    DEVICE=cpu METRICS=piqe SIZES=64x64,128x96 SELECT=(--seed-image=astronaut --seed-image=brick)
else
    DEVICE=cuda METRICS=all SIZES=512x512,2048x1152 SELECT=()
    unset HF_HUB_OFFLINE  # pyiqa and transformers download the real parameters
fi
VLM_METRICS=visualquality_r1,rali,qalign
if [[ $METRICS == all ]]; then
    METRICS=$("$PYTHON" -c 'from metrics_under_test.registry import PAPER_METRICS as P; print(",".join(p.pyiqa_name for p in P))')
fi

echo "== cost on $DEVICE (real parameters) =="
"$PYTHON" benchmarks/bench_metrics.py --real --device "$DEVICE" --metrics "$METRICS" --sizes "$SIZES" || true
echo
echo "== cost on the project's CPU (from benchmarks/bench_metrics_cpu.md) =="
cat benchmarks/bench_metrics_cpu.md
echo
echo "== the paper's protocol on $DEVICE: $DATASET =="
"$PYTHON" -m pytest --pyargs banana_tests -p no:cacheprovider -q --no-cache --metric="$METRICS" \
    --device="$DEVICE" --dataset="$DATASET" --steps=5,10,20 --reference-step=1 "${SELECT[@]}" \
    --junitxml="$REPORTS/gpu_check-$DEVICE.xml" -k test_detects_degradation || true
echo
echo "== the VLM metrics on $DEVICE =="
if [[ $DRY == 1 ]]; then
    BANANA_PAPER_METRICS=1 "$PYTHON" -m pytest tests/test_vlm_adapters.py -p no:cacheprovider -p no:randomly -q || true
else
    "$PYTHON" -m pytest --pyargs banana_tests -p no:cacheprovider -q --no-cache --metric="$VLM_METRICS" \
        --device="$DEVICE" --dataset="$DATASET" --steps=5,10,20 --reference-step=1 \
        --junitxml="$REPORTS/gpu_check-vlm-$DEVICE.xml" -k test_detects_degradation || true
    GPUS=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')
    echo
    echo "== every GPU: $GPUS worker(s), one per GPU =="
    "$PYTHON" -m pytest --pyargs banana_tests -p no:cacheprovider -q --no-cache --metric="$VLM_METRICS" \
        --device=cuda -n "$GPUS" --dataset="$DATASET" --steps=5,10,20 --reference-step=1 \
        --junitxml="$REPORTS/gpu_check-vlm-gpus.xml" -k test_detects_degradation || true
    "$PYTHON" -m pytest --pyargs banana_tests -p no:cacheprovider -q --no-cache --metric="$VLM_METRICS" \
        --device="cuda:$((GPUS - 1))" --dataset="$DATASET" --steps=5,10,20 --reference-step=1 \
        --junitxml="$REPORTS/gpu_check-vlm-last-gpu.xml" -k test_detects_degradation || true
    "$PYTHON" - "$REPORTS/gpu_check-vlm-$DEVICE.xml" "$REPORTS/gpu_check-vlm-gpus.xml" "$REPORTS/gpu_check-vlm-last-gpu.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

for path in sys.argv[1:]:
    root = ET.parse(path).getroot()
    facts = {p.get("name"): p.get("value") for p in root.iter("property") if p.get("name") == "device"}
    deltas = {
        tc.get("name"): next((p.get("value") for p in tc.iter("property") if p.get("name") == "delta"), None)
        for tc in root.iter("testcase")
    }
    print(f"{path}: device {facts.get('device')}; {len(deltas)} cases")
    if path == sys.argv[1]:
        first = deltas
    elif deltas != first:
        print(f"  Δ differs from {sys.argv[1]} in {sum(deltas.get(k) != v for k, v in first.items())} case(s)")
PY
fi
echo "gpu_check: done ($DEVICE)"
