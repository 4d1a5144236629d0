//! An analytical cost model of the CPU kernels, for the tuner's `model` strategy: it ranks a
//! whole space and only the best-ranked points are measured.
//!
//! It mirrors the micro-kernels of `cpu::kernels`: per stored entry and row chunk, `U` vector
//! FMAs against `U` vector loads of B plus a broadcast and index loads; the cost of a step is the
//! larger of the FMA time (slowed when fewer than latency × throughput accumulator chains are
//! in flight), the load-port time and the L2 time of the B rows that miss L1 (which depends on
//! whether a K chunk's B rows fit L1); then C traffic per K chunk, B packing, the L2 fit of a B
//! tile, and the thread split.
//! Units are seconds at a nominal clock; only the ranking matters to the tuner.

use std::sync::OnceLock;

use crate::cpu::panel_layout::{self, Layout, Path};
use crate::space::accumulator_budget;
use crate::{isa, FormatSignature, Isa, ParamPoint, PatternKind};

/// Nominal clock (Hz) used to turn cycles into seconds.
const CLOCK_HZ: f64 = 3.5e9;
/// L2 bytes per cycle for rows of B that miss L1.
const L2_BYTES_PER_CYCLE: f64 = 32.0;
/// Packing bandwidth, bytes per cycle (read + write).
const PACK_BYTES_PER_CYCLE: f64 = 16.0;

/// Per-ISA port throughputs: (vector FMAs per cycle, vector loads per cycle).
fn ports(isa: Isa) -> (f64, f64) {
    match isa {
        // Zen 4 runs 512-bit operations as two 256-bit halves.
        Isa::Avx512 => (1.0, 1.0),
        Isa::Avx2 => (2.0, 2.0),
        Isa::Scalar => (2.0, 2.0),
    }
}

/// The L2 size of this CPU (sysfs), 1 MiB if unknown.
pub(crate) fn l2_bytes() -> f64 {
    static L2: OnceLock<f64> = OnceLock::new();
    *L2.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
            .ok()
            .and_then(|s| {
                let s = s.trim();
                let (num, mult) = match s.strip_suffix('K') {
                    Some(x) => (x, 1024.0),
                    None => (s.strip_suffix('M').unwrap_or(s), 1024.0 * 1024.0),
                };
                num.parse::<f64>().ok().map(|v| v * mult)
            })
            .unwrap_or(1024.0 * 1024.0)
    })
}

/// Parallel efficiency of `t` threads over `chunks` independent row chunks.
fn parallel_factor(t: f64, chunks: f64) -> f64 {
    if t <= 1.0 {
        return 1.0;
    }
    let per_thread = (chunks / t).ceil().max(1.0);
    // Imbalance from whole chunks, and ~8 % lost to shared L3/memory and scheduling.
    (per_thread / chunks.max(1.0)) / 0.92
}

/// FMA latency in cycles: `latency × FMA throughput` independent accumulator chains are needed
/// to keep the FMA ports busy.
const FMA_LATENCY: f64 = 4.0;
/// Extra cost per vector of an N tile beyond 4 (measured, see `predicted_cost`).
const WIDE_PENALTY: f64 = 0.12;
/// Slowdown of kernels that read B rows in place instead of from packed panels (measured on
/// Zen 3 with B off its cache lines; N:M uses [`NM_ALIASING_PENALTY`] since 2026-12-06).
const UNPACKED_PENALTY: f64 = 1.8;
/// N:M read in place: slowdown per halving of the L1 sets a tile's B rows share
/// ([`set_aliasing`]), fitted on the 2026-12-06 dumps replayed through the engine's own
/// calibration samples (`spmm-bench --rescore --calibrate-from`).
const NM_ALIASING_PENALTY: f64 = 0.2;
/// Cycles per row and K chunk: C reload, loop and cursor set-up (N:M, V:N:M, vector-wise).
const CHUNK_CYCLES: f64 = 20.0;
/// The same for CSR, which also binary-searches each row's chunk end.
const CSR_CHUNK_CYCLES: f64 = 60.0;
/// L1 data cache bytes the model lets a K chunk's B rows use.
const L1_BUDGET: f64 = 24.0 * 1024.0;

/// Predicted seconds of [`crate::spmm`] for a matrix of signature `sig` times `n` columns with
/// point `p`; `f64::INFINITY` for a point outside the space's parameters.
pub fn predicted_cost(sig: &FormatSignature, n: usize, p: &ParamPoint) -> f64 {
    if sig.kind == PatternKind::Dense {
        return dense_predicted_cost(sig.rows, sig.cols, n, p);
    }
    let get = |k: &str| p.0.get(k).map(|&v| v as f64);
    let (Some(t), Some(w), Some(pack), Some(kc)) =
        (get("threads"), get("tile_n"), get("pack_b"), get("k_chunk"))
    else {
        return f64::INFINITY;
    };
    let r = get("rows").unwrap_or(1.0);
    let isa = isa();
    let lanes = isa.lanes() as f64;
    let u = (w / lanes).max(1.0);
    if r * u > accumulator_budget(isa) as f64 {
        return f64::INFINITY;
    }
    if let Some(path) = panel_layout::signature_path(sig, n, isa) {
        return panel_path_cost(sig, n, t, path, isa);
    }
    let (fma_tp, load_tp) = ports(isa);
    let (rows, k, nf) = (sig.rows as f64, sig.cols as f64, n as f64);
    let m = sig.m.max(1) as f64;
    // The tiles as `cpu::spmm` runs them: over the columns the tile kernels take, the point's
    // tile narrowed to them where it is wider. A last tile narrower than that runs at its own
    // width on B in place where it can (unpacked B, whole vectors of an instantiated width):
    // its share of a tile. Otherwise it runs as a whole tile, on a padded copy of its columns
    // made on every call.
    let width = crate::cpu::tile_columns(isa, n);
    let fitted = crate::cpu::fitted_tile(isa, r as usize, width, w as usize) as f64;
    let width = width as f64;
    let rest = width - (width / fitted).floor() * fitted;
    let rest_in_place =
        pack < 0.5 && rest > 0.0 && crate::cpu::rest_in_place(isa, r as usize, rest as usize);
    let tiles = if rest_in_place {
        (width / fitted).floor() + rest / fitted
    } else {
        (width / fitted).ceil()
    }
    .max(1.0);
    let rest_copy = if pack < 0.5 && rest > 0.0 && !rest_in_place {
        k * fitted * 8.0 / PACK_BYTES_PER_CYCLE
    } else {
        0.0
    };
    let row_bytes = w * 4.0;
    let kc = if kc <= 0.0 || kc >= k {
        k.max(1.0)
    } else {
        (kc / m).ceil() * m
    };
    let chunks = (k / kc).ceil().max(1.0);
    // Too few independent accumulators leave the FMA ports waiting on latency.
    let chains = r * u;
    let fma_rate = fma_tp * (chains / (FMA_LATENCY * fma_tp + 1.0)).min(1.0);
    // Misses to L2 (or L3 when the whole B tile does not fit L2) cost bandwidth; unpacked B is
    // strided by n and prefetches worse.
    let l2_factor = if k * row_bytes > 0.75 * l2_bytes() {
        2.0
    } else {
        1.0
    };
    let unpacked = pack < 0.5 && nf > w;
    let stride_factor = if unpacked { 1.25 } else { 1.0 };
    let l2 = |bytes: f64| bytes * l2_factor * stride_factor / L2_BYTES_PER_CYCLE;
    let density = sig.density();
    // Measured on Zen 3 (spmm-bench --dump): tiles wider than 4 vectors lose 10–15 % per extra
    // vector although their loads per FMA are no worse; reading B rows in place (unpacked)
    // halved the speed of the kernels that read B directly (CSR, vector-wise; N:M's is
    // re-measured below).
    // Row pairs (V:N:M, R = 2) amortise each entry's 4 broadcasts and decode over the tile:
    // their best tiles are 4–8 vectors wide (spmm-bench, Zen 4), so wide tiles cost them less.
    let pairs = r == 2.0
        && match sig.kind {
            PatternKind::Vnm => sig.v.is_multiple_of(2),
            PatternKind::Nm => crate::format::nm_pairs_fit(sig.rows, sig.cols, sig.n, sig.m),
            _ => false,
        };
    // N:M's pairs read B in place rather than from a gathered panel: their best tiles were 8
    // vectors wide at every quickstart shape (spmm-bench --dump, Intel Xeon EMR, AVX-512).
    let nm_pairs = pairs && sig.kind == PatternKind::Nm;
    let wide_penalty = if nm_pairs {
        0.0
    } else if pairs {
        WIDE_PENALTY / 2.0
    } else {
        WIDE_PENALTY
    };
    let wide = 1.0 + wide_penalty * (u - 4.0).max(0.0);
    let direct = if unpacked { UNPACKED_PENALTY } else { 1.0 };
    let step = |fmas: f64, loads: f64, miss_bytes: f64| {
        wide * (fmas / fma_rate).max(loads / load_tp).max(l2(miss_bytes))
    };
    // Per-row cost of a K chunk: reload and store C (the first chunk only stores).
    let c_traffic = rows * (2.0 * chunks - 1.0) * u / load_tp;
    let cycles_per_tile = match sig.kind {
        PatternKind::Unstructured => {
            let nnz = rows * k * density;
            let fits = kc * row_bytes <= L1_BUDGET;
            let miss = if fits { 0.05 } else { 0.8 };
            // Lock-step rows pay a binary search per (row, chunk) and leave tails alone.
            let tail = (r - 1.0) * (nnz / rows).sqrt() * rows / r;
            (nnz + tail) * step(u, u + 2.0, row_bytes * miss) * direct
                + c_traffic
                + rows * chunks * CSR_CHUNK_CYCLES
        }
        PatternKind::Nm => {
            let nn = sig.n as f64;
            let slots = rows * (k / m).ceil() * nn;
            let fits = kc * row_bytes <= L1_BUDGET;
            let unique = m * (1.0 - (1.0 - nn / m).powf(r)) / (r * nn);
            let miss = if fits { 0.05 } else { unique.min(1.0) };
            // In row pairs (2:M, R = 2; `NmMatrix::as_row_pairs`) two rows share a column in
            // the fraction 1 − C(M−2, 2)/C(M, 2) of groups (5/6 at 2:4, 13/28 at 2:8): 3 loads
            // for 4 FMAs there, plus one entry load per 4 slots, as V:N:M's pairs.
            let loads = if pairs {
                let share = 1.0 - (m - 2.0) * (m - 3.0) / (m * (m - 1.0));
                u * (1.0 - 0.25 * share) + 0.75
            } else {
                u + 2.0
            };
            // Unpacked, B's rows lie n floats apart, and with B on a line what that costs is
            // how few of L1's sets a tile's rows fall into: against packed (with its copy),
            // reading in place took a median 0.9× at n = 64, 1.05× at 128, 1.1× at 256 and
            // 1.2–1.3× at 512 for tiles of up to 64 columns, the row loop and the pairs alike
            // (spmm-bench --dump, Intel Xeon EMR; kernels/BENCH.md, 2026-12-06). Those ratios
            // include the packed side's copy of B, which the model charges apart; the 0.2 was
            // fitted on the tuners' regret replayed on that dump, not on the ratios.
            let direct = if unpacked {
                1.0 + NM_ALIASING_PENALTY * set_aliasing(nf, w).log2()
            } else {
                1.0
            };
            slots * step(u, loads, row_bytes * miss) * direct
                + c_traffic
                + rows * chunks * CHUNK_CYCLES
        }
        PatternKind::Vnm => {
            // Per (V-block, chunk) the block's 4 columns per group are gathered into a panel
            // (loads and stores from L2), then every row's 2 slots per group read it.
            let v = sig.v.max(1) as f64;
            let groups = (k / m).ceil();
            let slots = rows * groups * 2.0;
            let fits = kc / m * 4.0 * row_bytes <= L1_BUDGET;
            let miss = if fits { 0.02 } else { 0.5 };
            // Where B's tile is packed, the pairs read its rows in place and nothing is gathered
            // (`RowPairs::with_direct`: M ≤ 16, K < 65,536 and a multiple of M).
            // A B of one tile is copied (`pack_b` or not) and read in place too.
            // At V = 2 they read B in place packed or not (`cpu::kernels::vnm`).
            let in_place =
                pairs && (!unpacked || sig.v == 2) && m <= 16.0 && k < 65_536.0 && k % m == 0.0;
            let gather = if in_place {
                0.0
            } else {
                rows / v * groups * 4.0 * (2.0 * u / load_tp + l2(row_bytes) * 0.5)
            };
            // Rows in pairs (R = 2, even V; `cpu::kernels::vnm`) load a column the two rows
            // share in a group once for both: 3 loads for 4 FMAs in the ~91 % of groups where
            // matched rows share one (random codes, `format::row_pairs`), 4 in the rest, plus
            // one entry load per 4 slots.
            let loads = if pairs {
                u * (0.91 * 0.75 + 0.09) + 0.75
            } else {
                u + 0.5
            };
            slots * step(u, loads, row_bytes * miss)
                + gather * direct.sqrt()
                + c_traffic
                + rows * chunks * CHUNK_CYCLES
        }
        PatternKind::Vector => {
            let v = sig.v.max(1) as f64;
            let vectors = rows / v * k * density;
            let fits = kc * row_bytes <= L1_BUDGET;
            let miss = if fits { 0.1 } else { 1.0 };
            let per_chunk = step(r * u, u + r + 1.0, row_bytes * miss);
            vectors * (v / r).ceil() * per_chunk * direct.sqrt()
                + c_traffic
                + rows * chunks * CHUNK_CYCLES
        }
        PatternKind::Dense => unreachable_dense(),
    };
    let pack_cycles = if pack > 0.5 {
        k * nf * 8.0 / PACK_BYTES_PER_CYCLE
    } else {
        rest_copy
    };
    let work_units = match sig.kind {
        PatternKind::Vnm | PatternKind::Vector => rows / sig.v.max(1) as f64,
        _ => rows,
    };
    (tiles * cycles_per_tile * parallel_factor(t, work_units) + pack_cycles) / CLOCK_HZ
        + pool_call_s(t)
}

/// Cycles per stored value of the batch-1 kernels (one thread), which stream A once: N:M and
/// V:N:M, CSR (a column index per value), vector-wise (one per V values). Measured with
/// `spmm-bench --shapes 256x64x1,256x256x1,768x768x1,3072x768x1,768x3072x1 --reps 20` (AMD
/// Zen 4, AVX-512; kernels/BENCH.md, "The thread count in the cost model"): 0.17–0.21,
/// 0.36–0.49 and 0.14–0.18 cycles at 3.5 GHz over the shapes from 768×768.
const STREAM_CYCLES: [f64; 3] = [0.18, 0.4, 0.15];
/// Cycles per stored value and column of the few-column panel kernels (N:M and V:N:M, CSR),
/// from the same runs at 4, 8 and 17 columns: 0.11–0.14 and 0.19–0.23.
const COLUMN_CYCLES: [f64; 2] = [0.115, 0.22];
/// Cycles per stored value and column that gathering each V-block's columns of x adds, times V
/// (V:N:M's gathered panels and its kernel along K): 16:2:16 against 2:16 at 768×768×4 and ×8,
/// 64:2:16 and 128:2:16 alike, ≈ 3.3 / V.
const GATHER_CYCLES: f64 = 3.3;
/// Cycles per call of the batch-1 and few-column kernels besides the values: x's padding or
/// layout and the call (256×64×1 2:8, 4096 values, took 0.33–0.42 µs on one thread).
const PANEL_CALL_CYCLES: f64 = 500.0;

/// Predicted seconds of a product that runs on the batch-1 or few-column kernels (`path`), on
/// `threads` threads: none of the tile parameters apply, so every point of one thread count
/// costs the same, and what the model has to get right is the thread count.
fn panel_path_cost(sig: &FormatSignature, n: usize, threads: f64, path: Path, isa: Isa) -> f64 {
    let values = sig.rows as f64 * sig.cols as f64 * sig.density();
    let nf = n as f64;
    let (stream, column) = match sig.kind {
        PatternKind::Unstructured => (STREAM_CYCLES[1], COLUMN_CYCLES[1]),
        // Vector-wise takes the kernel along K at batch 1 only (no few-column panels).
        PatternKind::Vector => (STREAM_CYCLES[2], COLUMN_CYCLES[0]),
        _ => (STREAM_CYCLES[0], COLUMN_CYCLES[0]),
    };
    let gathers = matches!(path, Path::Panels(Layout::VnmRows))
        || (path == Path::Gemv && sig.kind == PatternKind::Vnm);
    let gather = if gathers {
        GATHER_CYCLES / sig.v.max(1) as f64
    } else {
        0.0
    };
    let work = values * (stream.max(nf * column) + nf * gather);
    // Threads split the rows in whole panels (of the lanes) or V-blocks.
    let unit = match path {
        Path::Panels(Layout::VnmRows) => sig.v,
        Path::Panels(_) => isa.lanes(),
        Path::Gemv if matches!(sig.kind, PatternKind::Vnm | PatternKind::Vector) => sig.v,
        Path::Gemv => 1,
    };
    let units = (sig.rows / unit.max(1)).max(1) as f64;
    (work * parallel_factor(threads, units) + PANEL_CALL_CYCLES) / CLOCK_HZ + pool_call_s(threads)
}

/// How many times fewer of L1's 64 sets a tile of `w` columns of B uses read in place (rows `n`
/// floats apart) than packed: a row starts `4n/64` lines past the last, and with that step a
/// multiple of a large power of two the rows fall into few sets (at n = 256 and `w` = 32, a
/// K chunk's rows share 8 of the 64 sets: 1 KiB apart, 2 lines each). Rows off the lines
/// (4n not a multiple of 64) spread over the sets: 1. It takes the packed tile to cover every
/// set (a K chunk of at least 4 KiB), so a small chunk's ratio is overstated. Every x86 L1
/// data cache these kernels target has 64 sets of 64-byte lines (32 KiB × 8 ways, 48 KiB × 12).
fn set_aliasing(n: f64, w: f64) -> f64 {
    let row = (n * 4.0) as u64;
    if row == 0 || !row.is_multiple_of(64) {
        return 1.0;
    }
    // gcd(0, 64) = 64: rows a multiple of 4 KiB apart all start in one set.
    let g = gcd((row / 64) % 64, 64);
    let lines = ((w * 4.0) / 64.0).ceil().max(1.0) as u64;
    g as f64 / lines.min(g) as f64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Handing a product to the thread pool and waiting for it, per worker: what 2 threads take
/// beyond half of 1 thread's time, less the 8 % `parallel_factor` already charges. The batch-1
/// kernels put it at 0.3–0.4 µs (256×64×1 and 256×256×1 N:M 2:8, one thread 0.42 and 0.89 µs,
/// two 0.57 and 0.86 µs; `spmm-bench --reps 20`, Zen 4), `examples/handoff_cost` at 0.5–3 µs
/// for a 2–100 µs product (the pool's workers spin between calls, so back to back and after
/// 200 µs of host work alike). One thread runs on the caller and pays nothing. It was 30 µs while the kernels
/// ran on rayon (a parked worker's wake-up), which after the pool changed ranked two threads
/// behind one for every product under ~60 µs: the engine's tunings, which rank both thread
/// counts together, missed the best point by 20–35 % at budget 8 on the quickstart's shapes
/// (`spmm-bench --rescore`'s `t*` tunings; kernels/BENCH.md, "The thread count in the cost
/// model"); from 0 to 2 µs the regret there moves by less than a point.
fn pool_call_s(threads: f64) -> f64 {
    // Per thread beyond the caller: measured with two threads only, and a worker that joins
    // late costs each call its wait.
    0.5e-6 * (threads - 1.0).max(0.0)
}

/// Dense signatures are answered by [`dense_predicted_cost`] before the match.
fn unreachable_dense() -> f64 {
    f64::INFINITY
}

/// Predicted seconds of [`crate::dense_gemm`]: FLOPs at ~90 % of the FMA peak per thread.
pub fn dense_predicted_cost(rows: usize, cols: usize, n: usize, p: &ParamPoint) -> f64 {
    let Some(&t) = p.0.get("threads") else {
        return f64::INFINITY;
    };
    let (fma_tp, _) = ports(isa());
    let flops_per_cycle = 2.0 * fma_tp * isa().lanes() as f64;
    let flops = 2.0 * rows as f64 * cols as f64 * n as f64;
    let eff = if t > 1 { 0.85 * t as f64 } else { 0.92 };
    // Small products pay a fixed start-up (packing, dispatch) of a few microseconds, and the
    // pool hand-off with more than one thread.
    flops / (flops_per_cycle * eff * CLOCK_HZ) + 3e-6 + pool_call_s(t as f64)
}

/// Regret of tuning by a cost model with `budget` measurements: the best measured time among the
/// `budget` best-predicted points (ties in input order, at least one) over the best of all, − 1.
pub fn regret_at_budget(pred: &[f64], meas: &[f64], budget: usize) -> f64 {
    let mut order: Vec<usize> = (0..pred.len()).collect();
    order.sort_by(|&a, &b| pred[a].total_cmp(&pred[b]));
    let best = meas.iter().cloned().fold(f64::INFINITY, f64::min);
    let chosen = order[..budget.clamp(1, pred.len())]
        .iter()
        .map(|&i| meas[i])
        .fold(f64::INFINITY, f64::min);
    chosen / best - 1.0
}

/// Spearman's rank correlation of predicted and measured costs (ties take their mean rank); NaN
/// with fewer than 3 points or when either side is constant.
pub fn spearman(pred: &[f64], meas: &[f64]) -> f64 {
    fn ranks(x: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..x.len()).collect();
        idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
        let mut r = vec![0.0; x.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
                j += 1;
            }
            for &k in &idx[i..=j] {
                r[k] = (i + j) as f64 / 2.0;
            }
            i = j + 1;
        }
        r
    }
    if pred.len() < 3 {
        return f64::NAN;
    }
    let (a, b) = (ranks(pred), ranks(meas));
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    if va == 0.0 || vb == 0.0 {
        return f64::NAN;
    }
    cov / (va * vb).sqrt()
}

#[cfg(test)]
mod tests {
    use super::{predicted_cost, regret_at_budget, set_aliasing, spearman};
    use crate::{cpu_space, FormatSignature, Pattern};
    use std::collections::BTreeMap;

    #[test]
    fn set_aliasing_counts_the_sets_a_tile_leaves_unused() {
        // 1 KiB rows: starts 16 sets apart, 4 of them; 2 lines a row use 8 sets of 64.
        assert_eq!(set_aliasing(256.0, 32.0), 8.0);
        assert_eq!(set_aliasing(256.0, 128.0), 2.0);
        // 256-byte rows with 4-line tiles cover every set; 16 KiB rows all start in one.
        assert_eq!(set_aliasing(64.0, 64.0), 1.0);
        assert_eq!(set_aliasing(4096.0, 32.0), 32.0);
        // Rows off the lines spread over the sets.
        assert_eq!(set_aliasing(100.0, 32.0), 1.0);
    }

    /// Batch 1 runs the matrix-vector kernels, which take none of the tile parameters: every
    /// point of one thread count costs the same, and two threads beat one only on a large
    /// product: not on a small MLP's layer, on a BERT layer (N:M 2:8 measured 0.42 against
    /// 0.57 µs at 256×64×1, 30.4 against 16.4 µs at 3072×768×1; Zen 4).
    #[test]
    fn batch_one_costs_by_the_thread_count_alone_and_splits_large_products() {
        if crate::isa() == crate::Isa::Scalar || crate::available_cores() < 2 {
            return; // the tile kernels run batch 1 there, or one thread is all there is
        }
        let by_threads = |rows, cols| {
            let sig =
                FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 8 }, rows, cols).unwrap();
            let mut by_threads: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
            for p in cpu_space(&sig, 1).points() {
                by_threads
                    .entry(p.0["threads"])
                    .or_default()
                    .push(predicted_cost(&sig, 1, &p));
            }
            for costs in by_threads.values() {
                assert!(costs.iter().all(|&c| c == costs[0] && c.is_finite()));
            }
            (by_threads[&1][0], by_threads[&2][0])
        };
        let (one, two) = by_threads(256, 64);
        assert!(one < two, "256x64x1: one thread {one:e} s, two {two:e} s");
        let (one, two) = by_threads(3072, 768);
        assert!(two < one, "3072x768x1: one thread {one:e} s, two {two:e} s");
    }

    #[test]
    fn spearman_of_monotone_reversed_and_tied() {
        assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
    }

    #[test]
    fn regret_takes_the_best_of_the_budget_best_predicted() {
        let (pred, meas) = ([3.0, 1.0, 2.0, 4.0], [10.0, 12.0, 11.0, 8.0]);
        assert!((regret_at_budget(&pred, &meas, 1) - 0.5).abs() < 1e-12);
        assert!((regret_at_budget(&pred, &meas, 3) - 0.25).abs() < 1e-12);
        assert_eq!(regret_at_budget(&pred, &meas, 9), 0.0);
        assert!((regret_at_budget(&pred, &meas, 0) - 0.5).abs() < 1e-12);
    }
}
