//! The Hopper V:N:M kernel (`spmm_vnm_wgmma_f16`, sparse `wgmma`, sm_90a): its configurations,
//! their constraints and costs in threads and shared memory (its launch: `wgmma_launch.rs`). Pure data: no
//! CUDA needed.
//!
//! A thread block is one producer warpgroup (cp.async gathers of B rows, and of A and metadata
//! or bulk copies of them (`BULK`), into a `STAGES`-deep ring, signalled through mbarriers) and `BM / 64` consumer warpgroups, each
//! owning 64 rows × BN columns of C and issuing `wgmma.mma_async.sp.m64n{BN}k32` per 32
//! gathered columns, leaving up to `KEEP` groups in flight while it loads the next tile (with
//! `PINGPONG`, the two consumer warpgroups of BM = 128 own whole tiles instead, in turn). The
//! block's rows must share their column locations: BM divides V.

use std::fmt;

use super::wgmma_exclude::wgmma_param_values;
use super::CudaError;

/// Rows per thread block (64 per consumer warpgroup).
pub const WGMMA_BM: [usize; 2] = [64, 128];
/// Columns of C per thread block: the `wgmma` N.
pub const WGMMA_BN: [usize; 3] = [64, 128, 256];
/// Gathered reduction columns per pipeline stage (`BK / 32` `wgmma`s per stage).
pub const WGMMA_BK: [usize; 3] = [32, 64, 128];
/// Pipeline depths.
pub const WGMMA_STAGES: [usize; 4] = [2, 3, 4, 6];
/// wgmma groups a consumer leaves in flight while it loads the next tile (1 needs 3+ stages:
/// the stage still read by the group in flight is released one tile late).
pub const WGMMA_KEEP: [usize; 2] = [0, 1];
/// How A's rows and the metadata arrive: 16-byte `cp.async` (0) or one `cp.async.bulk` per row
/// or 16-row metadata tile, by the TMA unit (1).
pub const WGMMA_BULK: [usize; 2] = [0, 1];
/// B's layout in shared memory: 8 × 8 core matrices without swizzle (0), or 64-column groups of
/// 128-byte rows under the 128-byte swizzle (1: a gathered row's columns come from 128
/// contiguous bytes of B; the layout TMA tensor copies write).
pub const WGMMA_SWIZZLE: [usize; 2] = [0, 1];
/// How B's stages arrive with the 128-byte swizzle: gathered by 16-byte `cp.async` (0) or,
/// for M = 4 only (2:4: a k-tile's gathered rows are consecutive rows of B, a tile of B is a
/// box), by TMA tensor copies of a host-encoded tensor map, one per 64-column group (1, with
/// `BULK` = 1: the producer's copies all by the TMA unit; with 16-byte `cp.async` for A the
/// producer spilled in its 56 registers at BM = 128).
pub const WGMMA_TMA: [usize; 2] = [0, 1];
/// Tile orders: C's column tiles fastest (0) or its row blocks fastest (1: the blocks resident
/// at once share B's column tiles). A launch-time choice, like split-K.
pub const WGMMA_RASTER: [usize; 2] = [0, 1];
/// Persistent blocks: one block per tile (0), or one per SM walking the tiles in turn (1: the
/// producer fills the next tile's stages while the consumers store the last one, so short
/// reductions, e.g. 2:16 at K = 768, are not one pipeline fill and drain per tile). A
/// launch-time choice, like split-K.
pub const WGMMA_PERSISTENT: [usize; 2] = [0, 1];
/// Thread-block clusters along C's rows: 1 (none), or 2 or 4 for TMA configurations (2:4): the
/// cluster's row blocks share B's tiles, each block loads its share (BK / CLUSTER rows) of
/// every stage's boxes and multicasts it into all of them, so B crosses from L2 once per
/// cluster. Four halve B's L2 bytes again (at BM 128 × BN 256, ~49 → ~33 bytes per
/// tensor-core cycle with A's) at the price of four blocks in step at every stage and an SM
/// or more per GPC that no cluster of four can take.
pub const WGMMA_CLUSTER: [usize; 3] = [1, 2, 4];
/// Thread-block clusters along C's columns: 1 (none), or 2 with bulk copies of A and B
/// gathered (not TMA, whose 2:4 tiles of B share better along the rows, `CLUSTER`): the
/// cluster's column tiles share A's rows and metadata, each block bulk-copies its share (BM /
/// CLUSTER_N rows, BM / 16 / CLUSTER_N metadata tiles) of every stage and multicasts it into
/// both. Where M > 4 nothing multicasts B (the gathered rows differ between row blocks), so A
/// is the one stream left to share: at BM 128 × BN 128, ~100 bytes a tensor-core cycle from
/// L2 without, ~84 with pairs (~76 with fours, which the kernel takes but the list leaves out:
/// they would add ~400 programs to the ~1,400 every device check compiles).
pub const WGMMA_CLUSTER_N: [usize; 2] = [1, 2];
/// The consumers' schedule with two consumer warpgroups (BM = 128): cooperative (0: each owns
/// 64 rows of every tile, both store it at once while the tensor cores wait), or ping-pong
/// (1: each owns whole tiles, BM × BN, the block's tiles alternating between them, their main
/// loops taking turns through two named barriers, so that one's epilogue runs under the
/// other's wgmmas; BN ≤ 128 for the BM × BN accumulators of one warpgroup, at
/// BN 128 × BK 128 no group kept in flight (registers), and persistent blocks only: with a
/// block per tile the second warpgroup would have nothing to do).
pub const WGMMA_PINGPONG: [usize; 2] = [0, 1];
/// Split-K factors: blocks along K (grid z), for products whose grid has fewer blocks than the
/// device has SMs. A launch-time choice: every factor runs the same compiled program.
pub const WGMMA_SPLIT_K: [usize; 3] = [1, 2, 4];
/// Shared memory a block may opt in to on sm_90 (227 KiB).
pub const SM90_MAX_SHARED_BYTES: usize = 227 * 1024;
/// The row-block heights V the kernel serves (BM divides V).
pub const WGMMA_BLOCK_ROWS: [usize; 2] = [64, 128];
/// Registers per thread the producer warpgroup keeps (`setmaxnreg.dec`) when there are two
/// consumer warpgroups (the kernel's `setmaxnreg_dec<56>`).
pub const WGMMA_PRODUCER_REGISTERS: usize = 56;
/// Registers per thread each of two consumer warpgroups takes (`setmaxnreg_inc<224>`).
pub const WGMMA_CONSUMER_REGISTERS: usize = 224;

/// One configuration of the Hopper V:N:M kernel; each field becomes a `#define` of the same
/// upper-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WgmmaConfig {
    /// Rows per thread block: 64 per consumer warpgroup; divides the format's V.
    pub bm: usize,
    /// Columns of C per thread block (the `wgmma` N).
    pub bn: usize,
    /// Gathered reduction columns per pipeline stage.
    pub bk: usize,
    /// Pipeline stages.
    pub stages: usize,
    /// wgmma groups left in flight across tiles: 0 or 1.
    pub keep: usize,
    /// Blocks along K, each writing f32 partials that a second kernel sums: 1, 2 or 4.
    pub split_k: usize,
    /// A and metadata by bulk copies (1) or 16-byte `cp.async` (0).
    pub bulk: usize,
    /// B's shared-memory layout: no swizzle (0) or the 128-byte swizzle (1).
    pub swizzle: usize,
    /// B by TMA tensor copies (1; needs `swizzle` = 1 and `bulk` = 1, and M = 4 at launch) or
    /// gathered (0).
    pub tma: usize,
    /// Tile order: column tiles fastest (0) or row blocks fastest (1).
    pub raster: usize,
    /// Blocks: one per tile (0) or one per SM, walking the tiles (1).
    pub persistent: usize,
    /// Blocks per thread-block cluster along C's rows (1, or 2 or 4 with `tma` = 1: B's boxes
    /// multicast to the cluster's row blocks, which share them).
    pub cluster: usize,
    /// Blocks per cluster along C's columns (1, or 2 with `bulk` = 1, `tma` = 0 and `cluster`
    /// = 1: A's and the metadata's bulk copies multicast to the cluster's column tiles).
    pub cluster_n: usize,
    /// Consumers cooperative on each tile (0) or taking whole tiles in turn (1: ping-pong;
    /// BM = 128, BN ≤ 128, persistent).
    pub pingpong: usize,
}

impl fmt::Display for WgmmaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wgmma")?;
        for (name, value) in Self::PARAMS.iter().zip(self.values()) {
            write!(f, " {}={value}", name.to_uppercase())?;
        }
        Ok(())
    }
}

impl WgmmaConfig {
    /// Checks every parameter against its list and the shared-memory budget of sm_90.
    pub fn validate(&self) -> Result<(), CudaError> {
        let fail = |reason: String| {
            Err(CudaError::Config {
                kernel: "spmm_vnm_wgmma_f16",
                config: self.to_string(),
                reason,
            })
        };
        if !WGMMA_BM.contains(&self.bm) {
            return fail(format!("BM must be one of {WGMMA_BM:?}"));
        }
        if !WGMMA_BN.contains(&self.bn) {
            return fail(format!("BN must be one of {WGMMA_BN:?}"));
        }
        if !WGMMA_BK.contains(&self.bk) {
            return fail(format!("BK must be one of {WGMMA_BK:?}"));
        }
        if !(2..=8).contains(&self.stages) {
            return fail("STAGES must be 2..=8".into());
        }
        if !WGMMA_KEEP.contains(&self.keep) || (self.keep == 1 && self.stages < 3) {
            return fail("KEEP must be 0, or 1 with STAGES of 3 or more".into());
        }
        if !WGMMA_SPLIT_K.contains(&self.split_k) {
            return fail(format!("SPLIT_K must be one of {WGMMA_SPLIT_K:?}"));
        }
        if !WGMMA_BULK.contains(&self.bulk) {
            return fail(format!("BULK must be one of {WGMMA_BULK:?}"));
        }
        if !WGMMA_SWIZZLE.contains(&self.swizzle) {
            return fail(format!("SWIZZLE must be one of {WGMMA_SWIZZLE:?}"));
        }
        if !WGMMA_TMA.contains(&self.tma) || (self.tma == 1 && (self.swizzle, self.bulk) != (1, 1))
        {
            return fail(
                "TMA must be 0, or 1 with SWIZZLE = 1 (tensor copies write the swizzle) and BULK = 1"
                    .into(),
            );
        }
        if !WGMMA_RASTER.contains(&self.raster) {
            return fail(format!("RASTER must be one of {WGMMA_RASTER:?}"));
        }
        if !WGMMA_PERSISTENT.contains(&self.persistent) {
            return fail(format!("PERSISTENT must be one of {WGMMA_PERSISTENT:?}"));
        }
        // Each block's share of a stage's boxes is whole 8-row swizzle atoms.
        if !WGMMA_CLUSTER.contains(&self.cluster)
            || (self.cluster > 1 && (self.tma != 1 || self.bk / self.cluster < 8))
        {
            return fail(format!(
                "CLUSTER must be 1, or one of {:?} with TMA = 1 (the cluster multicasts B's \
                 boxes, BK / CLUSTER >= 8 rows each)",
                &WGMMA_CLUSTER[1..]
            ));
        }
        if !WGMMA_CLUSTER_N.contains(&self.cluster_n)
            || (self.cluster_n > 1 && (self.bulk != 1 || self.tma != 0 || self.cluster != 1))
        {
            return fail(format!(
                "CLUSTER_N must be 1, or one of {:?} with BULK = 1 (the cluster multicasts A's \
                 bulk copies), TMA = 0 and CLUSTER = 1",
                &WGMMA_CLUSTER_N[1..]
            ));
        }
        if !WGMMA_PINGPONG.contains(&self.pingpong)
            || (self.pingpong == 1 && (self.bm != 128 || self.bn > 128 || self.persistent != 1))
        {
            return fail(
                "PINGPONG must be 0, or 1 with BM = 128 (two consumer warpgroups), BN <= 128 (a \
                 warpgroup's BM x BN accumulators) and PERSISTENT = 1 (the turns are within a \
                 block's tiles: a block per tile leaves one warpgroup idle)"
                    .into(),
            );
        }
        // A ping-pong warpgroup holds 2 x BN / 2 accumulators and, per fragment set, 2 x BK /
        // 32 x 5 fragment registers: at BN 128, BK 128 two sets make 208, and ptxas then
        // serialises the wgmmas (one set, 168, as the cooperative BN 256 tiles, does not).
        if self.pingpong == 1 && self.bn == 128 && self.bk == 128 && self.keep == 1 {
            return fail(
                "PINGPONG at BN = 128 and BK = 128 needs KEEP = 0 (two fragment sets beside the \
                 accumulators serialise the wgmmas)"
                    .into(),
            );
        }
        if self.shared_bytes() > SM90_MAX_SHARED_BYTES {
            return fail(format!(
                "{} bytes of shared memory, at most {SM90_MAX_SHARED_BYTES}",
                self.shared_bytes()
            ));
        }
        Ok(())
    }

    /// The parameters' values, in the order of [`WgmmaConfig::PARAMS`].
    pub fn values(&self) -> [usize; 14] {
        [
            self.bm,
            self.bn,
            self.bk,
            self.stages,
            self.keep,
            self.split_k,
            self.bulk,
            self.swizzle,
            self.tma,
            self.raster,
            self.persistent,
            self.cluster,
            self.cluster_n,
            self.pingpong,
        ]
    }

    /// The configuration of `values`, in the order of [`WgmmaConfig::PARAMS`] (unchecked).
    pub fn from_values(v: [usize; 14]) -> Self {
        let [bm, bn, bk, stages, keep, split_k, bulk, swizzle, tma, raster, persistent, cluster, cluster_n, pingpong] =
            v;
        Self {
            bm,
            bn,
            bk,
            stages,
            keep,
            split_k,
            bulk,
            swizzle,
            tma,
            raster,
            persistent,
            cluster,
            cluster_n,
            pingpong,
        }
    }

    /// Threads per block: the producer warpgroup and one consumer warpgroup per 64 rows.
    pub fn threads(&self) -> usize {
        128 * (self.bm / 64 + 1)
    }

    /// Checks ptxas's register count for this program (`registers` per thread, what the block
    /// is given at launch) against the kernel's `setmaxnreg` split. With two consumer
    /// warpgroups the producer gives registers back to the block's pool and the consumers take
    /// them: a consumer's `setmaxnreg.inc` waits until the pool holds its new count, so a block
    /// launched with fewer registers than the split needs hangs there, on the device only. The
    /// split (56 + 2 × 224 over 384 threads) needs exactly the 168 that
    /// `__launch_bounds__(384, 1)` allows; a ptxas that settled for fewer is refused here
    /// rather than left to hang. One consumer warpgroup moves no registers: any count passes.
    pub fn check_register_split(&self, registers: usize) -> Result<(), String> {
        let consumers = self.bm / 64;
        if consumers < 2 {
            return Ok(());
        }
        let needed = 128 * (WGMMA_PRODUCER_REGISTERS + consumers * WGMMA_CONSUMER_REGISTERS);
        if registers * self.threads() >= needed {
            return Ok(());
        }
        Err(format!(
            "ptxas gave the kernel {registers} registers a thread, {} for the block; its \
             setmaxnreg split ({WGMMA_PRODUCER_REGISTERS} for the producer, \
             {WGMMA_CONSUMER_REGISTERS} for each of {consumers} consumer warpgroups) needs \
             {needed}, so the consumers' setmaxnreg.inc would wait forever",
            registers * self.threads()
        ))
    }

    /// Blocks per thread-block cluster, along either dimension (1 without clusters).
    pub fn cluster_size(&self) -> usize {
        self.cluster * self.cluster_n
    }

    /// Clusters (blocks without clusters) of this configuration that `multiprocessors` SMs run
    /// at once, one block per SM, if every SM can join a cluster: where the device is not
    /// asked, the bound of a persistent grid. A GPC with an odd number of SMs leaves one out
    /// of pairs, which [`crate::cuda::CudaDevice`] learns from the driver.
    pub fn resident_clusters(&self, multiprocessors: usize) -> usize {
        (multiprocessors / self.cluster_size()).max(1)
    }

    /// Bytes of one stage of B: BK × BN halves in 8 × 8 core matrices.
    pub fn b_stage_bytes(&self) -> usize {
        self.bk * self.bn * 2
    }

    /// Bytes of one stage of A: BM rows of BK / 2 kept values, padded by 8 halves per row.
    pub fn a_stage_bytes(&self) -> usize {
        self.bm * (self.bk / 2 + 8) * 2
    }

    /// Bytes of one stage of metadata: 8 words per 16 rows and 16 kept values.
    pub fn meta_stage_bytes(&self) -> usize {
        self.bm / 16 * (self.bk / 16) * 8 * 4
    }

    /// Dynamic shared memory for the pipeline and its barriers, in bytes (as laid out by the
    /// kernel: B stages, A stages, metadata stages, then two 8-byte mbarriers per stage; the
    /// row block's column locations are read from global memory, through the cache).
    pub fn shared_bytes(&self) -> usize {
        self.stages * (self.b_stage_bytes() + self.a_stage_bytes() + self.meta_stage_bytes() + 16)
    }

    /// Whether this is the one configuration per compiled program that compiles and loads it:
    /// the launch-time choices (split-K, raster, persistent) at their first values (persistent
    /// for ping-pong, which has only that).
    pub fn is_program_canonical(&self) -> bool {
        // Ping-pong programs run persistent grids only.
        let persistent = if self.pingpong == 1 {
            1
        } else {
            WGMMA_PERSISTENT[0]
        };
        self.split_k == WGMMA_SPLIT_K[0]
            && self.raster == WGMMA_RASTER[0]
            && self.persistent == persistent
    }

    /// The `#define`s of this configuration, in a fixed order (the split-K factor, the raster
    /// and the persistent grid are launch arguments, not among them).
    pub fn defines(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("BM", self.bm),
            ("BN", self.bn),
            ("BK", self.bk),
            ("STAGES", self.stages),
            ("KEEP", self.keep),
            ("BULK", self.bulk),
            ("SWIZZLE", self.swizzle),
            ("TMA", self.tma),
            ("CLUSTER", self.cluster),
            ("CLUSTER_N", self.cluster_n),
            ("PINGPONG", self.pingpong),
        ]
    }
}

/// Every valid configuration for row blocks of `v` rows (BM dividing V), in a fixed order: the
/// product of the parameters' lists in [`WgmmaConfig::PARAMS`] order, the last fastest (an
/// odometer over the value indices); empty for V the kernel does not serve.
pub fn wgmma_configs(v: usize) -> Vec<WgmmaConfig> {
    let lists: [&[usize]; 14] = WgmmaConfig::PARAMS
        .map(|p| wgmma_param_values(p).expect("every parameter has a list of values"));
    let mut index = [0usize; 14];
    let mut out = Vec::new();
    loop {
        let c = WgmmaConfig::from_values(std::array::from_fn(|p| lists[p][index[p]]));
        if v.is_multiple_of(c.bm) && c.validate().is_ok() {
            out.push(c);
        }
        // The next index tuple: the last parameter turns fastest, carrying to the one before.
        let mut p = lists.len();
        loop {
            if p == 0 {
                return out;
            }
            p -= 1;
            index[p] += 1;
            if index[p] < lists[p].len() {
                break;
            }
            index[p] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_register_split_is_the_kernels_and_needs_its_whole_launch_count() {
        let text = crate::cuda::KernelSource::SpmmVnmWgmmaF16.text();
        assert!(text.contains(&format!("setmaxnreg_dec<{WGMMA_PRODUCER_REGISTERS}>()")));
        assert!(text.contains(&format!("setmaxnreg_inc<{WGMMA_CONSUMER_REGISTERS}>()")));
        let all = wgmma_configs(128);
        let two = all.iter().find(|c| c.bm == 128).unwrap();
        let one = all.iter().find(|c| c.bm == 64).unwrap();
        assert_eq!(two.check_register_split(168), Ok(()));
        let refused = two.check_register_split(160).unwrap_err();
        assert!(
            refused.contains("61440") && refused.contains("64512"),
            "{refused}"
        );
        assert_eq!(one.check_register_split(40), Ok(()));
    }

    #[test]
    fn the_configurations_come_in_odometer_order() {
        // Each configuration's value indices, in PARAMS order, come after the one before's:
        // the order the device check's feature configurations break ties by.
        let indices = |c: &WgmmaConfig| -> Vec<usize> {
            WgmmaConfig::PARAMS
                .iter()
                .zip(c.values())
                .map(|(p, v)| {
                    let list = wgmma_param_values(p).unwrap();
                    list.iter().position(|x| *x == v).unwrap()
                })
                .collect()
        };
        let all = wgmma_configs(128);
        assert!(all.windows(2).all(|w| indices(&w[0]) < indices(&w[1])));
        assert!(all
            .iter()
            .all(|c| WgmmaConfig::from_values(c.values()) == *c));
    }

    #[test]
    fn every_listed_config_is_valid_and_fits_sm90() {
        assert!(wgmma_configs(16).is_empty());
        assert!(wgmma_configs(32).is_empty());
        let v64 = wgmma_configs(64);
        let v128 = wgmma_configs(128);
        assert!(v64.iter().all(|c| c.bm == 64));
        assert!(v128.iter().any(|c| c.bm == 64) && v128.iter().any(|c| c.bm == 128));
        for c in v64.iter().chain(&v128) {
            c.validate().unwrap();
            assert!(c.shared_bytes() <= SM90_MAX_SHARED_BYTES, "{c}");
            assert!(c.threads() == 256 || c.threads() == 384);
        }
        // Each compiled program (its #defines) has exactly one canonical configuration, the one
        // that compiles and loads it (ping-pong's is persistent).
        let mut programs = std::collections::BTreeMap::new();
        for c in &v128 {
            *programs.entry(c.defines()).or_insert(0) += usize::from(c.is_program_canonical());
        }
        assert!(
            programs.values().all(|&n| n == 1),
            "a program without (or with two) canonical"
        );
        assert_eq!(programs.len(), 1332);
        // The largest stage (BM 128, BN 256, BK 128: 84 KiB with 64 KiB of B) fits 2 stages.
        let big = |stages| WgmmaConfig {
            bm: 128,
            bn: 256,
            bk: 128,
            stages,
            keep: 0,
            split_k: 1,
            bulk: 0,
            swizzle: 0,
            tma: 0,
            raster: 0,
            persistent: 0,
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        };
        assert!(big(2).validate().is_ok());
        assert!(big(3).validate().is_err());
        // A group left in flight holds its stage one tile longer: two stages cannot.
        let shallow = WgmmaConfig {
            bm: 64,
            bn: 64,
            bk: 32,
            stages: 2,
            keep: 1,
            split_k: 1,
            bulk: 0,
            swizzle: 0,
            tma: 0,
            raster: 0,
            persistent: 0,
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        };
        assert!(shallow.validate().is_err());
        assert!(WgmmaConfig {
            stages: 3,
            ..shallow
        }
        .validate()
        .is_ok());
    }

    /// The display is what `wgmma.csv`'s `config` column holds and `cuda-model-check` reads
    /// back: every parameter, upper-case, in a fixed order.
    #[test]
    fn the_display_names_every_parameter() {
        let c = WgmmaConfig {
            bm: 64,
            bn: 128,
            bk: 64,
            stages: 3,
            keep: 1,
            split_k: 2,
            bulk: 0,
            swizzle: 1,
            tma: 0,
            raster: 1,
            persistent: 0,
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        };
        assert_eq!(
            c.to_string(),
            "wgmma BM=64 BN=128 BK=64 STAGES=3 KEEP=1 SPLIT_K=2 BULK=0 SWIZZLE=1 TMA=0 RASTER=1 PERSISTENT=0 CLUSTER=1 CLUSTER_N=1 PINGPONG=0"
        );
    }

    #[test]
    fn shared_memory_matches_the_kernel_layout() {
        let c = WgmmaConfig {
            bm: 64,
            bn: 64,
            bk: 32,
            stages: 2,
            keep: 0,
            split_k: 1,
            bulk: 0,
            swizzle: 0,
            tma: 0,
            raster: 0,
            persistent: 0,
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        };
        // B 32 x 64 halves, A 64 x (16 + 8) halves, metadata 4 tiles x 2 steps x 8 words,
        // two mbarriers; two stages.
        assert_eq!(
            c.shared_bytes(),
            2 * (32 * 64 * 2 + 64 * 24 * 2 + 4 * 2 * 8 * 4 + 16)
        );
    }
}
