#!/usr/bin/env bash
# The one prepared check of the CUDA backend on a GPU machine (kernels/cuda/NOTES.md): find the
# CUDA libraries, run the CUDA correctness tests (every kernel against the CPU reference), then
# benchmark V:N:M (mma.sp) against cuBLAS fp16 on the BERT shapes, writing CSV (and Parquet
# where pandas+pyarrow exist) and printing a compact table last. Budget: under 8 minutes.
#
#   scripts/device-check.sh prepare   # here, with Rust: build the release test binaries into .devbin/
#   scripts/device-check.sh smoke     # there: libraries, correctness tests, one benchmark point
#   scripts/device-check.sh full      # there: libraries, correctness tests, the whole benchmark
#   scripts/device-check.sh dry-run   # anywhere: the same steps; without a GPU every test skips
#
# Where cargo exists and .devbin/ does not, smoke/full build the binaries first. Results go to
# $OUT (the device tool's folder) or target/device-check/.
set -uo pipefail
MODE=${1:-full}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${DEVBIN:-$ROOT/.devbin}
OUT=${OUT:-$ROOT/target/device-check}
mkdir -p "$OUT"
log() { echo "[device-check $(date -u +%H:%M:%S)] $*"; }

prepare() {
  log "building release test binaries with --features cuda"
  (cd "$ROOT" && cargo test -p kernels --features cuda --release --no-run 2>&1 | tail -3) || return 1
  mkdir -p "$BIN"
  for t in cuda_device cuda_bench cuda_compile; do
    f=$(ls -t "$ROOT"/target/release/deps/$t-* 2>/dev/null | grep -v '\.d$' | head -1)
    [ -n "$f" ] || { log "no binary for $t"; return 1; }
    cp "$f" "$BIN/$t" && strip "$BIN/$t" 2>/dev/null
  done
  ls -la "$BIN"
}

if [ "$MODE" = prepare ]; then prepare; exit $?; fi
if [ ! -x "$BIN/cuda_device" ]; then
  command -v cargo >/dev/null && prepare || { log "no binaries in $BIN and no cargo"; exit 2; }
fi

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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$OUT/gpu.txt"

status=0
log "correctness tests (cuda_device)"
timeout 240 "$BIN/cuda_device" --test-threads=1 2>&1 | tee "$OUT/tests.log" | tail -25
[ "${PIPESTATUS[0]}" = 0 ] || { status=1; log "CORRECTNESS TESTS FAILED"; }

if [ "$MODE" = smoke ] || [ "$MODE" = dry-run ]; then export COTUNE_BENCH_QUICK=1; fi
log "benchmark ($MODE)"
COTUNE_BENCH_OUT="$OUT" timeout 330 "$BIN/cuda_bench" --ignored --nocapture --test-threads=1 \
  bench_ > "$OUT/bench.log" 2>&1
[ $? = 0 ] || { status=1; log "BENCHMARK FAILED"; tail -20 "$OUT/bench.log"; }

python3 - "$OUT" <<'PY' 2>/dev/null && log "parquet written"
import sys, pandas as pd
for name in ("bench", "summary"):
    pd.read_csv(f"{sys.argv[1]}/{name}.csv").to_parquet(f"{sys.argv[1]}/{name}.parquet")
PY
grep -v -e '^running' -e '^test ' -e '^$' "$OUT/bench.log" | tail -60
exit $status
