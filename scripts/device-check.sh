#!/usr/bin/env bash
# The one prepared check of the CUDA backend on a GPU machine (kernels/cuda/NOTES.md): find the
# CUDA libraries; on an sm_90 device first the Hopper kernel (sparse wgmma): its layout probe
# and correctness tests, then its benchmark against cuBLAS fp16 and the mma.sp kernel on the
# BERT shapes, and NVIDIA's 2:4 path through PyTorch (scripts/peer_2to4.py) beside it; then the
# other CUDA correctness tests (every kernel against the CPU reference) and the mma.sp benchmark
# (quick), writing CSV (and Parquet where pandas+pyarrow exist) and printing compact tables, and
# score the cost model on it; last, run experiments/cuda-smoke.toml through `cotune` on the cuda
# backend (train, prune, tune, evaluate on the GPU; scripts/cuda_smoke_check.py reads its
# tables) and once more on the same store (it must compute nothing); at the end, issue 19's
# checks against their goals (scripts/hopper_verdict.py, into verdict.txt). Budget: 560 s in
# all (each step's timeout is cut to what is left).
#
#   scripts/device-check.sh prepare   # here, with Rust: build the release test binaries and a
#                                     # `cotune` with --features cuda into .devbin/ (git-ignored:
#                                     # the device tool takes it along with carry [".devbin"])
#   scripts/device-check.sh smoke     # there: libraries, correctness tests, one benchmark point,
#                                     # the cuda-smoke experiment
#   scripts/device-check.sh full      # there: the same with the whole benchmark (on an
#                                     # H200: issue 19's goals are its figures, and the
#                                     # verdict says NOT MET for any other card; the device
#                                     # tool starts an H100 unless told kind nvidia-h200)
#   scripts/device-check.sh dry-run   # anywhere: the same steps; without a GPU every test fails
#                                     # and the cuda-smoke run reports why its trials failed
#
# Where cargo exists and a binary is missing from .devbin/, smoke/full build them first (in
# $CARGO_TARGET_DIR or target/). Results go to target/device-check/ (every log, CSV and
# Parquet, and the cuda-smoke run's store and tables), its console output to console.log
# there. The device tool returns at most 8 files from $OUT, so where $OUT is set the results
# are packed into $OUT/device-check.tar.gz (less the cuda-smoke store) beside console.log
# and the summary CSVs (see `pack`).
set -uo pipefail
MODE=${1:-full}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${DEVBIN:-$ROOT/.devbin}
RES=${DEVICE_CHECK_RESULTS:-$ROOT/target/device-check}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
log() { echo "[device-check $(date -u +%H:%M:%S)] $*"; }

# The whole script stays inside BUDGET seconds: each step's timeout is its cap, cut to what is
# left after the time the later steps reserve.
START=$(date +%s)
BUDGET=${DEVICE_CHECK_BUDGET_S:-560}
limit() {  # $1 = the step's cap, $2 = seconds reserved for later steps; prints the timeout
  local left=$(( BUDGET - ($(date +%s) - START) - $2 )) want=$1
  [ "$left" -lt "$want" ] && want=$left
  [ "$want" -lt 1 ] && want=1
  echo "$want"
}

prepare() {
  local built
  built=$(mktemp)
  log "building release test binaries with --features cuda"
  (cd "$ROOT" && cargo test -p kernels --features cuda --release --no-run 2>&1 | tee "$built" \
    | tail -3) || return 1
  log "building cuda-model-check with --features cuda"
  (cd "$ROOT" && cargo build -p kernels --features cuda --release --bin cuda-model-check 2>&1 \
    | tail -3) || return 1
  log "building cotune with --features cuda"
  (cd "$ROOT" && cargo build -p pipeline --features cuda --release --bin cotune 2>&1 | tail -3) \
    || return 1
  log "building the engine's cuda test (pipeline cuda_backend) with --features cuda"
  (cd "$ROOT" && cargo test -p pipeline --features cuda --release --test cuda_backend --no-run \
    2>&1 | tee -a "$built" | tail -3) || return 1
  mkdir -p "$BIN"
  # The binaries cargo names for these builds (a plain build of the same test may be newer).
  for t in cuda_device cuda_device_wgmma cuda_bench cuda_bench_wgmma cuda_compile cuda_backend; do
    f=$(sed -n "s|.*Executable tests/$t\.rs (\(.*\))\$|\1|p" "$built" | tail -1)
    [ -n "$f" ] || { log "no binary for $t"; return 1; }
    case $f in /*) ;; *) f="$ROOT/$f" ;; esac
    cp "$f" "$BIN/$t" && strip "$BIN/$t" 2>/dev/null
  done
  rm -f "$built"
  for b in cotune cuda-model-check; do
    cp "$TARGET/release/$b" "$BIN/$b" && strip "$BIN/$b" 2>/dev/null
  done
  (cd "$ROOT" && echo "$(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (uncommitted changes)')" \
    > "$BIN/COMMIT")
  ls -la "$BIN"
}

if [ "$MODE" = prepare ]; then prepare; exit $?; fi
rm -rf "$RES" && mkdir -p "$RES"

# The device tool's $OUT returns 8 files at most: everything packed in one archive (the
# cuda-smoke store summarised in store.txt, not packed), and the summary tables beside it (the
# console goes there as it is written). Called after the benchmark too, so that a run killed
# later still returns its tables.
pack() {
  [ -n "${OUT:-}" ] && [ -d "$OUT" ] || return 0
  [ -d "$RES/cuda-smoke/store" ] && (cd "$RES/cuda-smoke/store" && du -sh . && \
    echo "files: $(find . -type f | wc -l), programs cached: $(find ptx -name '*.ptx' \
      2>/dev/null | wc -l) PTX, $(find ptx -name '*.cubin' 2>/dev/null | wc -l) cubins" \
    && ls ptx 2>/dev/null | head -20) > "$RES/cuda-smoke/store.txt"
  tar czf "$OUT/device-check.tar.gz" -C "$RES" --exclude=./cuda-smoke/store .
  for f in wgmma_summary.csv wgmma_ablation.csv wgmma_neighbours.csv peer_2to4.csv \
    cuda-smoke/engine_latency.csv; do
    [ -s "$RES/$f" ] && cp "$RES/$f" "$OUT/"
  done
}

main() {
for b in cuda_device cuda_device_wgmma cuda_bench cuda_bench_wgmma cuda_backend cotune \
  cuda-model-check; do
  [ -x "$BIN/$b" ] && continue
  command -v cargo >/dev/null && { prepare || exit 2; break; }
  log "no $b in $BIN and no cargo"; exit 2
done

# cudarc (built with cuda-12080) dlopens libnvrtc.so / libnvrtc.so.12 and libcublas.so /
# libcublas.so.12; a CUDA 13 machine has .so.13 (same C API for the calls used), so link them
# under the plain names in a private folder. Prefer the newest major version found.
LIBDIR=$(mktemp -d)
roots="/usr/local/cuda /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu /opt"
for p in $(python3 -c 'import sys; print(" ".join(sys.path))' 2>/dev/null); do
  [ -d "$p/nvidia" ] && roots="$roots $p/nvidia"
done
find_lib() {  # $1 = library stem; prints the newest real file, skipping builtins/Lt/alt
  find $roots -maxdepth 4 -name "$1.so.*" 2>/dev/null | grep -v -e builtins -e '\.alt\.' \
    | awk -F/ '{print $NF "\t" $0}' | sort -V | tail -1 | cut -f2
}
NVRTC=$(find_lib libnvrtc); CUBLAS=$(find_lib libcublas)
log "nvrtc: ${NVRTC:-not found}"; log "cublas: ${CUBLAS:-not found}"
[ -n "$NVRTC" ] && ln -sf "$NVRTC" "$LIBDIR/libnvrtc.so" && NVRTC_DIR=$(dirname "$NVRTC")
[ -n "$CUBLAS" ] && ln -sf "$CUBLAS" "$LIBDIR/libcublas.so" && CUBLAS_DIR=$(dirname "$CUBLAS")
export LD_LIBRARY_PATH="$LIBDIR:${NVRTC_DIR:-}:${CUBLAS_DIR:-}:${LD_LIBRARY_PATH:-}"
log "binaries built from $(cat "$BIN/COMMIT" 2>/dev/null || echo 'an unrecorded commit')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$RES/gpu.txt"

status=0
if [ "$MODE" = smoke ] || [ "$MODE" = dry-run ]; then export COTUNE_BENCH_QUICK=1; fi
# The kernels' device tests and benchmarks share one PTX cache (outside the packed results), so
# that their processes compile each program once between them, and the driver keeps what it
# builds from PTX in its own cache; the engine's steps run without it (their PTX goes to the
# store, which is what they check).
export COTUNE_PTX_CACHE="$TARGET/device-check-ptx" CUDA_CACHE_MAXSIZE=4294967296
# The Hopper kernel first: it is what a device run is scarce for. The probe finds which
# reading of the wgmma layouts the device takes (the kernel as written first; it stops at the
# first that agrees) and every later step builds the kernel with it (COTUNE_WGMMA_READING), so
# that one wrong guess in the emulator's reading still leaves a benchmark table and an engine
# run; the source and the emulator are then fixed to it off the device.
log "Hopper kernel: layout probe (cuda_device_wgmma wgmma_layout_probe)"
rm -f "$RES/wgmma-reading.txt"
# (Each test writes its log to a file that is read afterwards: a `| head` on a live pipe would
# end the test with a broken pipe once it had printed enough.)
COTUNE_BENCH_OUT="$RES" timeout "$(limit 90 440)" "$BIN/cuda_device_wgmma" --ignored --exact \
  wgmma_layout_probe --nocapture > "$RES/probe-wgmma.log" 2>&1
grep -e 'probe' -e 'reading' -e 'panicked' "$RES/probe-wgmma.log" | head -24
READING=$(cat "$RES/wgmma-reading.txt" 2>/dev/null)
if [ -z "$READING" ]; then
  status=1; log "HOPPER LAYOUT PROBE: NO READING AGREES (or it did not finish)"
elif [ "$READING" != none ]; then
  export COTUNE_WGMMA_READING="$READING"
  log "THE DEVICE TAKES ANOTHER wgmma READING: $READING; the later steps use it (fix the kernel and emulator)"
fi
# Each feature of the kernel in a small test of its own process under a short timeout (a fault
# ends the process's context, a wrong barrier count hangs it): the features that fail are left
# out of every later step (COTUNE_WGMMA_EXCLUDE; the device fingerprint names them), so that
# one feature the device rejects costs neither the benchmark's table nor the engine's run.
# The list is FEATURES in kernels/tests/cuda_device_wgmma.rs.
# A feature is tested with those already found failing left out (two consumers first: every
# other feature is tried at both heights), and is left alone if too little time is left to test
# it fairly.
EXCLUDE=${COTUNE_WGMMA_EXCLUDE:-}
for f in bm=128 bulk=1 swizzle=1 keep=1 split_k=2,split_k=4 persistent=1 tma=1 cluster=2 cluster=4 \
    cluster_n=2 pingpong=1; do
  T=$(limit 30 400)
  if [ "$T" -lt 20 ]; then log "Hopper feature $f: not tested (${T} s left for it)"; continue; fi
  COTUNE_WGMMA_EXCLUDE="$EXCLUDE" COTUNE_WGMMA_FEATURE=$f timeout "$T" \
    "$BIN/cuda_device_wgmma" --ignored --exact wgmma_feature --nocapture \
    > "$RES/feature-${f//,/_}.log" 2>&1
  code=$?
  if [ $code = 0 ]; then
    log "Hopper feature $f: agrees"
  else
    status=1; EXCLUDE="${EXCLUDE:+$EXCLUDE,}$f"
    log "HOPPER FEATURE $f FAILED (exit $code$([ $code = 124 ] && echo ': timed out'); left out from here on):"
    grep -m 3 -e 'disagree' -e 'panicked' -e 'x.* V=' "$RES/feature-${f//,/_}.log"
  fi
done
if [ -n "$EXCLUDE" ]; then
  export COTUNE_WGMMA_EXCLUDE="$EXCLUDE"
  log "COTUNE_WGMMA_EXCLUDE=$COTUNE_WGMMA_EXCLUDE"
fi
log "Hopper kernel: correctness tests (cuda_device_wgmma, reading ${READING:-unknown})"
timeout "$(limit 150 330)" "$BIN/cuda_device_wgmma" --ignored --test-threads=1 --nocapture \
  --skip wgmma_layout_probe --skip wgmma_tma --skip wgmma_cluster --skip wgmma_feature \
  > "$RES/tests-wgmma.log" 2>&1
code=$?
grep -e '^test ' -e 'disagree' -e 'panicked' -e 'compiled and loaded' -e 'device ptxas' \
  "$RES/tests-wgmma.log" | head -40
[ $code = 0 ] || { status=1; log "HOPPER CORRECTNESS TESTS FAILED (exit $code)"; }
# A feature's configurations in a process of their own: a malformed tensor map faults the
# context for every later launch, a refused cluster launch or a multicast that never completes
# hangs. If the test fails, the later steps leave the feature out.
excluded() { [[ ",${COTUNE_WGMMA_EXCLUDE:-}," == *,$1,* ]]; }
isolated() {  # $1 = the test (a cuda_device_wgmma filter), $2 = the feature, $3 = cap, $4 = reserve
  log "Hopper kernel: $2 configurations (cuda_device_wgmma $1)"
  timeout "$(limit "$3" "$4")" "$BIN/cuda_device_wgmma" --ignored --test-threads=1 --nocapture \
    "$1" > "$RES/tests-$1.log" 2>&1
  local code=$?
  grep -e '^test ' -e 'disagree' -e 'panicked' -e 'at once' -e 'compiled and loaded' \
    -e 'device ptxas' "$RES/tests-$1.log" | head -20
  if [ $code != 0 ]; then
    status=1; export COTUNE_WGMMA_EXCLUDE="${COTUNE_WGMMA_EXCLUDE:+$COTUNE_WGMMA_EXCLUDE,}$2"
    log "HOPPER $2 TESTS FAILED: COTUNE_WGMMA_EXCLUDE=$COTUNE_WGMMA_EXCLUDE from here on"
  fi
}
# B by TMA tensor copies (2:4 only), then clusters of two and four multicasting its boxes (if
# TMA is still in).
excluded tma=1 || isolated wgmma_tma tma=1 60 300
excluded tma=1 || excluded cluster=2 || isolated wgmma_cluster2 cluster=2 60 280
excluded tma=1 || excluded cluster=4 || isolated wgmma_cluster4 cluster=4 45 260
# Pairs along n multicasting A's bulk copies (any M), likewise on their own.
excluded cluster_n=2 || isolated wgmma_cluster_n2 cluster_n=2 45 240

log "Hopper benchmark ($MODE)"
# It starts no new point after its deadline, so that the table and ablations of what it
# measured still come inside the timeout.
T=$(limit 150 200)
COTUNE_BENCH_DEADLINE_S=$(( T > 60 ? T - 35 : T / 2 )) COTUNE_BENCH_OUT="$RES" timeout "$T" \
  "$BIN/cuda_bench_wgmma" --ignored --nocapture --test-threads=1 > "$RES/bench-wgmma.log" 2>&1
[ $? = 0 ] || { status=1; log "HOPPER BENCHMARK FAILED"; tail -20 "$RES/bench-wgmma.log"; }
grep -A5 -e 'programs refused' "$RES/bench-wgmma.log"  # did not compile or load: left out
grep -e 'device ptxas' "$RES/bench-wgmma.log"  # its programs: wgmma_programs.csv
grep -v -e '^running' -e '^test ' -e '^$' "$RES/bench-wgmma.log" | tail -130
pack

log "2:4 peer: PyTorch semi-structured sparsity (cuSPARSELt / CUTLASS)"
NS=$([ -n "${COTUNE_BENCH_QUICK:-}" ] && echo 4096 || echo 4096,16384)
timeout "$(limit 60 160)" python3 "$ROOT/scripts/peer_2to4.py" "$RES" "$NS" 2>&1 | tail -16

log "correctness tests (cuda_device)"
timeout "$(limit 120 130)" "$BIN/cuda_device" --ignored --test-threads=1 > "$RES/tests.log" 2>&1
code=$?
tail -25 "$RES/tests.log"
[ $code = 0 ] || { status=1; log "CORRECTNESS TESTS FAILED (exit $code)"; }

log "mma.sp benchmark (quick: the wgmma benchmark above has its rows beside the Hopper kernel's)"
COTUNE_BENCH_QUICK=1 COTUNE_BENCH_OUT="$RES" timeout "$(limit 60 110)" "$BIN/cuda_bench" --ignored \
  --nocapture --test-threads=1 bench_vnm > "$RES/bench.log" 2>&1
[ $? = 0 ] || { status=1; log "BENCHMARK FAILED"; tail -20 "$RES/bench.log"; }

timeout 30 python3 - "$RES" <<'PY' 2>/dev/null && log "parquet written"
import os, sys, pandas as pd
for name in ("bench", "summary", "wgmma", "wgmma_summary", "wgmma_ablation", "peer_2to4"):
    if os.path.exists(f"{sys.argv[1]}/{name}.csv"):
        pd.read_csv(f"{sys.argv[1]}/{name}.csv").to_parquet(f"{sys.argv[1]}/{name}.parquet")
PY
grep -v -e '^running' -e '^test ' -e '^$' "$RES/bench.log" | tail -20

# How well the cost model (fitted to the H200's run 3) ranks this device's measurements.
[ -s "$RES/bench.csv" ] && timeout 30 "$BIN/cuda-model-check" "$RES/bench.csv" > "$RES/model-check.txt" 2>&1
cat "$RES/model-check.txt" 2>/dev/null
# And how the Hopper kernel's unfitted prior ranks its configurations (the `wgmma` rows). Fit
# it afterwards, off the device: cuda-model-check --fit-wgmma <the returned wgmma.csv>.
[ -s "$RES/wgmma.csv" ] && timeout 30 "$BIN/cuda-model-check" "$RES/wgmma.csv" \
  > "$RES/model-check-wgmma.txt" 2>&1
tail -1 "$RES/model-check-wgmma.txt" 2>/dev/null

# The engine's own GPU test: a 16:2:4 MLP tuned on the device and evaluated end to end, its
# rows carrying the device fingerprint and its PTX cached in the store.
log "engine test on the GPU (pipeline cuda_backend)"
COTUNE_BIN="$BIN/cotune" env -u COTUNE_PTX_CACHE timeout "$(limit 60 80)" "$BIN/cuda_backend" \
  --ignored --nocapture \
  --exact on_a_gpu_a_vnm_shape_is_tuned_and_the_model_evaluated_end_to_end \
  > "$RES/tests-engine.log" 2>&1
code=$?
grep -e '^test ' -e 'panicked' -e 'assert' "$RES/tests-engine.log" | head -10
[ $code = 0 ] || { status=1; log "ENGINE GPU TEST FAILED (exit $code)"; }

# The engine on the cuda backend: train, prune, tune (model, budget 4) and evaluate on the GPU.
# Without a GPU (dry-run) its cuda trials fail with the reason and the step only reports it.
log "cuda-smoke experiment through cotune"
SMOKE="$RES/cuda-smoke"
mkdir -p "$SMOKE"
env -u COTUNE_PTX_CACHE timeout "$(limit 150 20)" "$BIN/cotune" run \
  "$ROOT/experiments/cuda-smoke.toml" --store "$SMOKE/store" --out "$SMOKE/out" -q \
  > "$SMOKE/run.log" 2>&1
code=$?
tail -20 "$SMOKE/run.log"
# Hopper points measured and rejected, each format's best point, the evaluate rows, and each
# evaluate row's latency beside the sum of its layers' kernel-tune latencies.
timeout 30 python3 "$ROOT/scripts/cuda_smoke_check.py" "$SMOKE" > "$SMOKE/check.txt" 2>&1
tail -40 "$SMOKE/check.txt"
if [ "$code" = 0 ]; then
  log "cuda-smoke: all trials ok"
elif [ "$MODE" = dry-run ] && ! nvidia-smi >/dev/null 2>&1; then
  log "cuda-smoke: no GPU here; its cuda trials failed with the reason above (exit $code), as expected"
else
  status=1; log "CUDA-SMOKE FAILED (exit $code)"
fi
# The same experiment again on the same store: every instance is found, nothing is computed.
log "cuda-smoke again (the second run computes nothing)"
env -u COTUNE_PTX_CACHE timeout "$(limit 30 0)" "$BIN/cotune" run \
  "$ROOT/experiments/cuda-smoke.toml" --store "$SMOKE/store" --out "$SMOKE/out" -q \
  > "$SMOKE/run2.log" 2>&1
code2=$?
head -12 "$SMOKE/run2.log"
# Executed instances: the stage table's second column (the Pareto front printed after it has
# numeric columns too).
executed=$(awk '/^stage +executed/ { t = 1; next } /^wall time/ { t = 0 }
  t && $2 ~ /^[0-9]+$/ { s += $2 } END { print s + 0 }' "$SMOKE/run2.log")
if [ "$code" = 0 ] && { [ "$code2" != 0 ] || [ "$executed" != 0 ]; }; then
  status=1; log "CUDA-SMOKE SECOND RUN: exit $code2, $executed instance(s) executed (expected 0, 0)"
else
  log "cuda-smoke second run: exit $code2, $executed instance(s) executed"
fi
# Issue 19's checks, each against its goal, from the tables above (a report: never a failure).
log "issue 19's checks (scripts/hopper_verdict.py)"
timeout 30 python3 "$ROOT/scripts/hopper_verdict.py" "$RES" 2>&1 | tee "$RES/verdict.txt"
return $status
}

# The console to the results and, where the device tool's folder is set, straight there too.
main 2>&1 | tee "$RES/console.log" ${OUT:+"$OUT/console.log"}
status=${PIPESTATUS[0]}
pack
[ -n "${OUT:-}" ] && ls -la "$OUT"
exit "$status"
