//! A cost model of the Hopper V:N:M kernel (`cuda-vnm-wgmma`), for the tuner's ranking of its
//! space. **A prior, not fitted:** no device has measured this kernel yet (issue 19), so its
//! constants are the H200's published rates and the `mma.sp` model's fitted L2 and copy
//! constants ([`WgmmaConstants::PRIOR`]); fit them to the first device table
//! (`kernels/tests/cuda_bench_wgmma.rs` writes one) with `cuda-model-check --fit-wgmma`
//! ([`crate::cuda::fit_wgmma`]). The tuner ranks each kernel's space by
//! its own model and measures the top of each ([`crate::cuda::cuda_spaces`]), so this model's
//! scale against the `mma.sp` model's does not decide which kernel wins; measurements do.
//!
//! A k-tile step of one block costs the larger of
//! - its throughput: sparse tensor work (`BM/64` consumer warpgroups sharing the SM's tensor
//!   cores at 8,192 dense-equivalent fp16 FLOP per cycle), the producer's `cp.async` issue (one
//!   per 16 bytes, or per row of A and 16-row metadata tile with `BULK`, per 64-column group of
//!   B with `TMA`), and the L2 →
//!   shared-memory bytes of A, metadata and the gathered B rows (B's once per cluster along
//!   the rows, `CLUSTER`, A's and the metadata's once per cluster along the columns,
//!   `CLUSTER_N`: each block fetches its share and multicasts it to the cluster);
//! - its latency (mbarrier hand-off, longer across a cluster's SMs, the `wgmma` drain when
//!   `KEEP` = 0, the copy latency left after `STAGES − 1` tiles in flight) divided by the
//!   blocks resident on the SM.
//!
//! Each tile also pays its pipeline's fill (a copy latency), hidden only by other resident
//! blocks; with `PERSISTENT` blocks once per SM; and its epilogue (C's bytes at the L2 rate),
//! hidden by other resident blocks or, with `PINGPONG` consumers in persistent blocks, under
//! the other consumer's main loop.
//!
//! Split-K divides the k-tiles over more blocks, then pays the f32 partials' traffic and the
//! reduction's launch. The whole product takes at least the time to stream B from DRAM: once
//! when B fits in L2 or the tile order walks row blocks fastest (`RASTER` 1), otherwise once
//! per wave of resident row blocks.

use super::cost::{blocks_per_sm, GpuModel, COPY_ISSUE, COPY_LATENCY, L2_BYTES_PER_CYCLE, SYNC};
use super::wgmma::WgmmaConfig;

/// The model's constants: what a fit to a device's table adjusts ([`super::fit_wgmma`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WgmmaConstants {
    /// Dense-equivalent fp16 FLOP per cycle per SM of sparse `wgmma`.
    pub sparse_flop_per_cycle: f64,
    /// Cycles from a `wgmma` group's issue to its completion that a consumer waits when it
    /// keeps no group in flight across tiles (`KEEP` = 0).
    pub wgmma_drain: f64,
    /// DRAM bytes per cycle per SM.
    pub dram_bytes_per_cycle: f64,
    /// Cycles of the split-K reduction's launch behind the product's.
    pub reduce_launch: f64,
    /// Issue cycles of one warp's 16-byte `cp.async`.
    pub copy_issue: f64,
    /// L2 → shared-memory bytes per cycle per SM.
    pub l2_bytes_per_cycle: f64,
    /// Cycles of a stage hand-off (mbarrier arrive and wait).
    pub sync: f64,
    /// Cycles of a copy's latency, hidden over `STAGES − 1` tiles in flight.
    pub copy_latency: f64,
    /// Cycles a thread-block cluster adds to a stage's hand-off: releases arrive on the peers'
    /// barriers across SMs, and a stage is refilled only once the slowest block of the cluster
    /// has released it.
    pub cluster_sync: f64,
}

impl WgmmaConstants {
    /// The prior: the H200's published rates (4,096 dense fp16 FLOP per cycle per SM, doubled
    /// by 2:4 sparsity; ~4.8 TB/s over 132 SMs at 1.7 GHz), a guessed drain, reduction launch
    /// and cluster hand-off (of the order of a load from a peer SM's shared memory), and the
    /// `mma.sp` model's fitted copy, L2 and hand-off constants.
    pub const PRIOR: WgmmaConstants = WgmmaConstants {
        sparse_flop_per_cycle: 8192.0,
        wgmma_drain: 120.0,
        dram_bytes_per_cycle: 21.0,
        reduce_launch: 2000.0,
        copy_issue: COPY_ISSUE,
        l2_bytes_per_cycle: L2_BYTES_PER_CYCLE,
        sync: SYNC,
        copy_latency: COPY_LATENCY,
        cluster_sync: 200.0,
    };

    /// Field names, in the order of [`Self::to_array`].
    pub const NAMES: [&'static str; 9] = [
        "sparse_flop_per_cycle",
        "wgmma_drain",
        "dram_bytes_per_cycle",
        "reduce_launch",
        "copy_issue",
        "l2_bytes_per_cycle",
        "sync",
        "copy_latency",
        "cluster_sync",
    ];

    /// The constants in [`Self::NAMES`]' order.
    pub fn to_array(&self) -> [f64; 9] {
        [
            self.sparse_flop_per_cycle,
            self.wgmma_drain,
            self.dram_bytes_per_cycle,
            self.reduce_launch,
            self.copy_issue,
            self.l2_bytes_per_cycle,
            self.sync,
            self.copy_latency,
            self.cluster_sync,
        ]
    }

    /// The constants from [`Self::NAMES`]' order.
    pub fn from_array(a: [f64; 9]) -> WgmmaConstants {
        WgmmaConstants {
            sparse_flop_per_cycle: a[0],
            wgmma_drain: a[1],
            dram_bytes_per_cycle: a[2],
            reduce_launch: a[3],
            copy_issue: a[4],
            l2_bytes_per_cycle: a[5],
            sync: a[6],
            copy_latency: a[7],
            cluster_sync: a[8],
        }
    }
}

/// The H100's and H200's L2 (50 MB): a B that fits is read from DRAM once in any tile order.
const L2_BYTES: f64 = 50e6;

/// Registers per thread of a block with two consumer warpgroups: `setmaxnreg` gives the
/// producer 56 and each consumer 224, the whole register file (128·56 + 256·224 = 64,512).
const TWO_CONSUMER_REGISTERS: usize = 168;

/// Estimated registers per thread of a one-consumer block (no `setmaxnreg`): its accumulators
/// (`BN / 2` per consumer thread) and ~48 more (ptxas reported 82–194 at BN 64–256).
fn one_consumer_registers(cfg: &WgmmaConfig) -> usize {
    cfg.bn / 2 + 48
}

/// Predicted cycles of the Hopper kernel with `cfg` for a `rows × cols` matrix of pattern 2:M
/// times `n` columns on `gpu` (see the module's notes), with the prior's constants.
pub fn wgmma_cycles(
    cfg: &WgmmaConfig,
    shape: (usize, usize, usize),
    n: usize,
    gpu: &GpuModel,
) -> f64 {
    wgmma_cycles_with(&WgmmaConstants::PRIOR, cfg, shape, n, gpu)
}

/// [`wgmma_cycles`] with constants `k`.
pub fn wgmma_cycles_with(
    k: &WgmmaConstants,
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
    let blocks = (rows / cfg.bm).max(1).div_ceil(cfg.cluster)
        * cfg.cluster
        * n.div_ceil(cfg.bn).div_ceil(cfg.cluster_n)
        * cfg.cluster_n
        * split;
    let registers = if cfg.bm > 64 {
        TWO_CONSUMER_REGISTERS
    } else {
        one_consumer_registers(cfg)
    };
    let shared = cfg.shared_bytes();
    let resident = blocks_per_sm(gpu, cfg.threads() / 32, registers, shared) as f64;
    let per_sm = f(blocks) / f(gpu.multiprocessors.max(1));
    let overlapped = resident.min(per_sm.max(1.0));

    let tensor = 2.0 * f(cfg.bm * cfg.bk * cfg.bn) / k.sparse_flop_per_cycle;
    let a_bytes = f(cfg.bm * cfg.bk + cfg.bm * cfg.bk / 8);
    // 16-byte copies spread over the producer's 4 warps (one per sub-partition); with BULK, A
    // and the metadata take one bulk copy per row or 16-row tile instead (one thread each;
    // a cluster along n's block, its share of them); with TMA, B one tensor copy per 64-column
    // group.
    let b_bytes_staged = f(2 * cfg.bk * cfg.bn);
    let bytes = a_bytes + b_bytes_staged;
    let copied = bytes
        - if cfg.bulk == 1 { a_bytes } else { 0.0 }
        - if cfg.tma == 1 { b_bytes_staged } else { 0.0 };
    let bulk_copies = if cfg.bulk == 1 {
        f(cfg.bm + cfg.bm / 16) / f(cfg.cluster_n.max(1))
    } else {
        0.0
    } + if cfg.tma == 1 { f(cfg.bn / 64) } else { 0.0 };
    let issue = (copied / 16.0 + bulk_copies) / 128.0 * k.copy_issue;
    // From L2: A and the metadata once per cluster along n, B's stage once per cluster along
    // the rows (each block fetches its share and multicasts it).
    let l2_bytes = a_bytes / f(cfg.cluster_n.max(1)) + b_bytes_staged / f(cfg.cluster.max(1));
    let throughput = tensor.max(issue).max(l2_bytes / k.l2_bytes_per_cycle);
    let drain = if cfg.keep == 0 { k.wgmma_drain } else { 0.0 };
    let handoff = k.sync
        + if cfg.cluster_size() > 1 {
            k.cluster_sync
        } else {
            0.0
        };
    let latency =
        handoff + drain + tensor + k.copy_latency / f(cfg.stages.saturating_sub(1).max(1));
    let step = (latency / overlapped).max(throughput);
    // A tile's pipeline fill (its first stage's copies, nothing to overlap them with but
    // another resident block): per tile with a block per tile, once per SM with persistent
    // blocks (the producer fills the next tile's stages while the consumers store the last).
    let fill = k.copy_latency + k.sync;
    // The epilogue: the tile's C (fp16; f32 partials with split-K) stored at the L2 rate while
    // the tensor cores wait, hidden only by another resident block; with ping-pong consumers
    // in a persistent block, under the other warpgroup's main loop (a tile then costs the
    // longer of the two, and the block's last epilogue shows).
    let epilogue = f(cfg.bm * cfg.bn) * if split > 1 { 4.0 } else { 2.0 } / k.l2_bytes_per_cycle;
    let main = tiles_per_block * step;
    let hidden = cfg.pingpong == 1; // persistent blocks only
    let per_tile = if hidden {
        main.max(epilogue)
    } else {
        main + epilogue / overlapped
    };
    let product = if cfg.persistent == 1 {
        per_sm.ceil() * per_tile + fill + if hidden { epilogue } else { 0.0 }
    } else {
        per_sm.ceil() * (per_tile + fill / overlapped)
    };
    // DRAM: B (K × n halves; some row block wants every row of it) once where it fits in L2 or
    // the blocks walk the row blocks fastest (RASTER 1: the resident blocks share B's column
    // tiles); walking the column tiles fastest, once per wave of the row blocks resident at a
    // time.
    let b_bytes = f(cols * n * 2);
    let waves = if cfg.raster == 1 || b_bytes <= L2_BYTES {
        1.0
    } else {
        let col_tiles = f(n.div_ceil(cfg.bn) * split);
        let resident_rows = (resident * f(gpu.multiprocessors) / col_tiles).max(1.0);
        (f((rows / cfg.bm).max(1)) / resident_rows).ceil()
    };
    let stream = waves * b_bytes / (k.dram_bytes_per_cycle * f(gpu.multiprocessors.max(1)));

    // C: fp16 written once, or f32 partials written, read back and reduced.
    let c = f(rows * n);
    let reduce = if split > 1 {
        let traffic = c * (4.0 * f(split) * 2.0 + 2.0);
        k.reduce_launch + traffic / (k.dram_bytes_per_cycle * f(gpu.multiprocessors.max(1)))
    } else {
        0.0
    };
    product.max(stream) + reduce
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::wgmma_configs;

    fn best(shape: (usize, usize, usize), n: usize) -> WgmmaConfig {
        let gpu = GpuModel::h200();
        // TMA copies serve M = 4 only.
        *wgmma_configs(128)
            .iter()
            .filter(|c| c.tma == 0 || shape.2 == 4)
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
    fn row_blocks_first_pays_where_b_exceeds_l2() {
        let gpu = GpuModel::h200();
        let cfg = best((768, 3072, 8), 16384);
        let at = |raster, n| {
            let c = WgmmaConfig { raster, ..cfg };
            wgmma_cycles(&c, (768, 3072, 8), n, &gpu)
        };
        // B is 3072 × 16,384 halves (100 MB): walking column tiles first re-reads it.
        assert!(at(0, 16384) > at(1, 16384));
        assert_eq!(best((768, 3072, 8), 16384).raster, 1);
        // At 4,096 columns (25 MB) it fits in L2 and the order does not matter.
        assert_eq!(at(0, 4096), at(1, 4096));
    }

    #[test]
    fn persistent_blocks_pay_where_tiles_outnumber_the_sms() {
        let gpu = GpuModel::h200();
        // 2:16 at K = 768: 96 gathered columns, a few k-tiles per tile, 384 tiles at 4,096
        // columns: a block per tile fills its pipeline ~3 times per SM, a persistent one once.
        let cfg = best((3072, 768, 16), 4096);
        let at = |persistent| {
            let c = WgmmaConfig { persistent, ..cfg };
            wgmma_cycles(&c, (3072, 768, 16), 4096, &gpu)
        };
        assert!(at(1) < at(0));
        assert_eq!(cfg.persistent, 1);
    }

    /// The prior without the cluster's longer hand-off: what the bytes alone say.
    const FREE_HANDOFF: WgmmaConstants = WgmmaConstants {
        cluster_sync: 0.0,
        ..WgmmaConstants::PRIOR
    };

    #[test]
    fn a_cluster_divides_b_from_l2_where_l2_bounds_the_step() {
        let gpu = GpuModel::h200();
        let with = |k: &WgmmaConstants, cfg: &WgmmaConfig, cluster, shape, n| {
            let c = WgmmaConfig { cluster, ..*cfg };
            wgmma_cycles_with(k, &c, shape, n, &gpu)
        };
        let big = (3072, 768, 4);
        let at =
            |cfg: &WgmmaConfig, cluster| with(&WgmmaConstants::PRIOR, cfg, cluster, big, 16384);
        let free = |cfg: &WgmmaConfig, cluster| with(&FREE_HANDOFF, cfg, cluster, big, 16384);
        let tma: Vec<WgmmaConfig> = wgmma_configs(128)
            .into_iter()
            .filter(|c| c.cluster == 2)
            .collect();
        // With a free hand-off never dearer (the same work, a half or a quarter of B's bytes;
        // 24 row blocks are whole clusters of either size); with the prior's, cheaper where
        // the bytes bound the step and dearer where its latency does.
        assert!(
            tma.iter()
                .all(|c| free(c, 4) <= free(c, 2) && free(c, 2) <= free(c, 1)),
            "a larger cluster moves more bytes"
        );
        assert!(tma.iter().any(|c| at(c, 2) < at(c, 1)), "a pair never pays");
        assert!(tma.iter().any(|c| at(c, 4) < at(c, 2)), "four never pay");
        assert!(
            tma.iter().any(|c| at(c, 2) > at(c, 1)),
            "the cluster's hand-off costs nothing"
        );
        // At 768 rows (6 row blocks of 128) clusters of four leave two blocks without rows.
        let at_768 =
            |cfg: &WgmmaConfig, cluster| with(&FREE_HANDOFF, cfg, cluster, (768, 768, 4), 4096);
        assert!(
            tma.iter()
                .filter(|c| c.bm == 128 && c.persistent == 0)
                .any(|c| at_768(c, 4) > at_768(c, 2)),
            "idle blocks cost nothing"
        );
    }

    #[test]
    fn a_cluster_along_n_divides_a_from_l2_where_l2_bounds_the_step() {
        let gpu = GpuModel::h200();
        let with = |k: &WgmmaConstants, cfg: &WgmmaConfig, cluster_n, n| {
            let c = WgmmaConfig { cluster_n, ..*cfg };
            wgmma_cycles_with(k, &c, (3072, 768, 8), n, &gpu)
        };
        // 2:8, 16,384 columns: whole pairs along n at every BN.
        let at = |cfg: &WgmmaConfig, cluster_n| with(&WgmmaConstants::PRIOR, cfg, cluster_n, 16384);
        let free = |cfg: &WgmmaConfig, cluster_n| with(&FREE_HANDOFF, cfg, cluster_n, 16384);
        let bulk: Vec<WgmmaConfig> = wgmma_configs(128)
            .into_iter()
            .filter(|c| c.cluster_n == 2)
            .collect();
        assert!(!bulk.is_empty());
        assert!(
            bulk.iter().all(|c| free(c, 2) <= free(c, 1)),
            "a pair along n moves more bytes"
        );
        assert!(
            bulk.iter().any(|c| at(c, 2) < at(c, 1)),
            "a pair never pays"
        );
        assert!(
            bulk.iter().any(|c| at(c, 2) > at(c, 1)),
            "the pair's hand-off costs nothing"
        );
        // 640 columns at BN 128 are 5 tiles: 3 pairs, one block without columns per row
        // block, 144 blocks of 128 rows for 132 SMs where 120 took one wave.
        let narrow = |cfg: &WgmmaConfig, cluster_n| with(&FREE_HANDOFF, cfg, cluster_n, 640);
        assert!(
            bulk.iter()
                .filter(|c| c.bm == 128 && c.bn == 128 && c.persistent == 0)
                .any(|c| narrow(c, 2) > narrow(c, 1)),
            "idle blocks cost nothing"
        );
    }

    #[test]
    fn ping_pong_hides_the_epilogue() {
        let gpu = GpuModel::h200();
        let pingpong: Vec<WgmmaConfig> = wgmma_configs(128)
            .into_iter()
            .filter(|c| c.pingpong == 1)
            .collect();
        assert!(!pingpong.is_empty());
        let at = |cfg: &WgmmaConfig, pingpong| {
            let c = WgmmaConfig { pingpong, ..*cfg };
            wgmma_cycles(&c, (3072, 768, 8), 16384, &gpu)
        };
        // Thousands of tiles, ~20 per block: all but the last epilogue hidden.
        for c in &pingpong {
            assert!(at(c, 1) < at(c, 0), "[{c}] gains nothing");
        }
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
