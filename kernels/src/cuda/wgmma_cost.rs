//! A cost model of the Hopper V:N:M kernel (`cuda-vnm-wgmma`), for the tuner's ranking of its
//! space. **A prior, not fitted:** no device has measured this kernel yet (issue 19), so its
//! constants are the H200's published rates and the `mma.sp` model's fitted L2 and copy
//! constants; fit it to the first device table (`kernels/tests/cuda_bench_wgmma.rs` writes
//! one) as `scripts/fit_cuda_cost.py` did for `mma.sp`. The tuner ranks each kernel's space by
//! its own model and measures the top of each ([`crate::cuda::cuda_spaces`]), so this model's
//! scale against the `mma.sp` model's does not decide which kernel wins; measurements do.
//!
//! A k-tile step of one block costs the larger of
//! - its throughput: sparse tensor work (`BM/64` consumer warpgroups sharing the SM's tensor
//!   cores at 8,192 dense-equivalent fp16 FLOP per cycle), the producer's `cp.async` issue, and
//!   the L2 → shared-memory bytes of A, metadata and the gathered B rows;
//! - its latency (mbarrier hand-off, the `wgmma` drain when `KEEP` = 0, the copy latency left
//!   after `STAGES − 1` tiles in flight) divided by the blocks resident on the SM.
//!
//! Split-K divides the k-tiles over more blocks, then pays the f32 partials' traffic and the
//! reduction's launch.

use super::cost::{blocks_per_sm, GpuModel, COPY_ISSUE, COPY_LATENCY, L2_BYTES_PER_CYCLE, SYNC};
use super::wgmma::WgmmaConfig;

/// Dense-equivalent fp16 FLOP per cycle per SM of sparse `wgmma` (H100/H200: 4,096 dense,
/// doubled by 2:4 sparsity).
const SPARSE_FLOP_PER_CYCLE: f64 = 8192.0;
/// Cycles from a `wgmma` group's issue to its completion that a consumer waits when it keeps
/// no group in flight across tiles (`KEEP` = 0).
const WGMMA_DRAIN: f64 = 120.0;
/// DRAM bytes per cycle per SM (H200: ~4.8 TB/s over 132 SMs at 1.7 GHz).
const DRAM_BYTES_PER_CYCLE: f64 = 21.0;
/// Cycles of the split-K reduction's launch behind the product's.
const REDUCE_LAUNCH: f64 = 2000.0;
/// Registers per thread of a block with two consumer warpgroups: `setmaxnreg` gives the
/// producer 40 and each consumer 232, the whole register file (128·40 + 256·232 = 64,512).
const TWO_CONSUMER_REGISTERS: usize = 168;

/// Estimated registers per thread of a one-consumer block (no `setmaxnreg`): its accumulators
/// (`BN / 2` per consumer thread) and ~48 more (ptxas reported 82–194 at BN 64–256).
fn one_consumer_registers(cfg: &WgmmaConfig) -> usize {
    cfg.bn / 2 + 48
}

/// Predicted cycles of the Hopper kernel with `cfg` for a `rows × cols` matrix of pattern 2:M
/// times `n` columns on `gpu` (see the module's notes).
pub fn wgmma_cycles(
    cfg: &WgmmaConfig,
    (rows, cols, m): (usize, usize, usize),
    n: usize,
    gpu: &GpuModel,
) -> f64 {
    let f = |x: usize| x as f64;
    let groups = cols.div_ceil(m.max(1));
    // Kept values padded to a multiple of BK / 2 (`pack_vnm`); gathered columns are twice that.
    let slots = (2 * groups).div_ceil(cfg.bk / 2) * (cfg.bk / 2);
    let ktiles = 2 * slots / cfg.bk;
    let split = cfg.split_k.max(1);
    let tiles_per_block = f(ktiles.div_ceil(split));
    let blocks = (rows / cfg.bm).max(1) * n.div_ceil(cfg.bn) * split;
    let registers = if cfg.bm > 64 {
        TWO_CONSUMER_REGISTERS
    } else {
        one_consumer_registers(cfg)
    };
    let shared = cfg.shared_bytes() + (4 * groups).div_ceil(16) * 16;
    let resident = blocks_per_sm(gpu, cfg.threads() / 32, registers, shared) as f64;
    let per_sm = f(blocks) / f(gpu.multiprocessors.max(1));
    let overlapped = resident.min(per_sm.max(1.0));

    let tensor = 2.0 * f(cfg.bm * cfg.bk * cfg.bn) / SPARSE_FLOP_PER_CYCLE;
    let bytes = f(cfg.bm * cfg.bk + cfg.bm * cfg.bk / 8 + 2 * cfg.bk * cfg.bn);
    // 16-byte copies spread over the producer's 4 warps (one per sub-partition).
    let issue = bytes / 16.0 / 128.0 * COPY_ISSUE;
    let throughput = tensor.max(issue).max(bytes / L2_BYTES_PER_CYCLE);
    let drain = if cfg.keep == 0 { WGMMA_DRAIN } else { 0.0 };
    let latency = SYNC + drain + tensor + COPY_LATENCY / f(cfg.stages.saturating_sub(1).max(1));
    let step = (latency / overlapped).max(throughput);
    let product = per_sm.ceil() * tiles_per_block * step;

    // C: fp16 written once, or f32 partials written, read back and reduced.
    let c = f(rows * n);
    let reduce = if split > 1 {
        let traffic = c * (4.0 * f(split) * 2.0 + 2.0);
        REDUCE_LAUNCH + traffic / (DRAM_BYTES_PER_CYCLE * f(gpu.multiprocessors.max(1)))
    } else {
        0.0
    };
    product + reduce
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::wgmma_configs;

    fn best(shape: (usize, usize, usize), n: usize) -> WgmmaConfig {
        let gpu = GpuModel::h200();
        *wgmma_configs(128)
            .iter()
            .min_by(|a, b| {
                wgmma_cycles(a, shape, n, &gpu).total_cmp(&wgmma_cycles(b, shape, n, &gpu))
            })
            .unwrap()
    }

    #[test]
    fn every_configuration_has_a_finite_positive_cost() {
        let gpu = GpuModel::h200();
        for cfg in wgmma_configs(128) {
            for (shape, n) in [
                ((3072, 768, 8), 4096),
                ((768, 768, 4), 16),
                ((128, 40, 8), 7),
            ] {
                let c = wgmma_cycles(&cfg, shape, n, &gpu);
                assert!(c.is_finite() && c > 0.0, "{cfg} {shape:?} {n}: {c}");
            }
        }
    }

    #[test]
    fn split_k_pays_where_the_grid_is_small_and_not_where_it_is_large() {
        // 768 × 768 at 16 columns: 6–12 row blocks × 1 column tile for 132 SMs.
        assert!(best((768, 3072, 8), 16).split_k > 1);
        // 3072 × 768 at 16,384 columns: thousands of blocks.
        assert_eq!(best((3072, 768, 8), 16384).split_k, 1);
    }

    #[test]
    fn the_cost_grows_with_the_work() {
        let gpu = GpuModel::h200();
        let cfg = best((3072, 768, 8), 4096);
        let at = |rows, cols, m, n| wgmma_cycles(&cfg, (rows, cols, m), n, &gpu);
        assert!(at(3072, 768, 8, 8192) > at(3072, 768, 8, 4096));
        assert!(at(3072, 768, 4, 4096) > at(3072, 768, 8, 4096));
        assert!(at(3072, 1536, 8, 4096) > at(3072, 768, 8, 4096));
    }
}
