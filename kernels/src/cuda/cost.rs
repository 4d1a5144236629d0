//! An analytical cost model of the CUDA kernels, for the tuner's `model` strategy: it ranks a
//! whole space without compiling anything, and only the best-ranked points are compiled and
//! measured. Plain Rust: it needs neither feature `cuda` nor a device.
//!
//! **V:N:M (`mma.sp`).** Occupancy comes first: blocks per SM from registers (the `ptxas -v`
//! table shipped in `kernels/cuda/ptxas_resources.csv` for sm_80 and sm_90, else
//! [`super::VnmConfig::estimated_registers`]), shared memory, warps and blocks. A k-tile step of
//! one block then costs the larger of
//! - its throughput on the SM's 4 sub-partitions: tensor work, issued instructions (`mma.sp`,
//!   `ldmatrix`, `cp.async`) and L2 → shared-memory bytes, and
//! - its latency (barrier, fragment loads, its warps' `mma` chain, the copy latency left after
//!   `STAGES − 1` tiles in flight) divided by the blocks resident on the SM, which overlap it.
//!
//! The constants are cycles (bytes per cycle for L2), fitted to every configuration measured on
//! the H200 (`kernels/cuda/results/h200_run3_bench.csv`, 84 points × 72–96 configurations) by
//! minimising the regret of a 10 % budget (`scripts/fit_cuda_cost.py`). With each BERT shape
//! held out of the fit in turn, the held-out regret was 0.9–2.3 % on average (at most 9.6 %);
//! the test `cuda_cost_model` pins the fitted model's figures.
//!
//! **CSR (row split).** One warp per row and `32 · cols_per_lane` columns: per kept weight a
//! lane loads the value and column once and B `cols_per_lane` times, and fewer resident warps
//! hide less latency unless each lane has several columns in flight.
//!
//! Units are seconds at a nominal clock; only the ranking within one space matters.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::config::{CsrConfig, VnmConfig};
use super::wgmma::WgmmaConfig;
use super::wgmma_cost::wgmma_cycles;
use crate::{FormatSignature, ParamPoint, PatternKind};

/// Nominal SM clock (Hz) used to turn cycles into seconds.
const CLOCK_HZ: f64 = 1.7e9;

/// Fitted cycles per `mma.sp` instruction issued by a warp.
const MMA_ISSUE: f64 = 2.24;
/// Fitted cycles per `ldmatrix` issued by a warp.
const LDMATRIX_ISSUE: f64 = 3.516;
/// Fitted cycles per 16-byte `cp.async` (with its address arithmetic) issued by a warp.
pub(super) const COPY_ISSUE: f64 = 8.135;
/// Fitted tensor-core cycles per m16n8k16 `mma.sp` on one sub-partition.
const TENSOR: f64 = 6.414;
/// Fitted L2 → shared-memory bytes per cycle per SM.
pub(super) const L2_BYTES_PER_CYCLE: f64 = 40.226;
/// Fitted cycles of a k-tile's barrier and loop.
pub(super) const SYNC: f64 = 198.439;
/// Fitted latency cycles per `MMA_K` step of a k-tile (fragment loads before the `mma`s).
const FRAGMENT_LATENCY: f64 = 142.144;
/// Fitted latency cycles of a k-tile's copies, spread over the `STAGES − 1` tiles in flight.
pub(super) const COPY_LATENCY: f64 = 349.494;
/// Shared memory the driver reserves per block, in bytes.
const RESERVED_SHARED: usize = 1024;

/// The limits of one GPU that the model uses.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuModel {
    /// The NVRTC target, e.g. "sm_90": which register table applies.
    pub arch: String,
    /// Streaming multiprocessors.
    pub multiprocessors: usize,
    /// Shared memory per SM, in bytes.
    pub shared_per_sm: usize,
    /// 32-bit registers per SM.
    pub registers_per_sm: usize,
    /// Resident warps per SM.
    pub max_warps_per_sm: usize,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: usize,
}

impl GpuModel {
    /// The limits of a typical card of `arch` (sm_80: A100; sm_86/sm_89: RTX 30/40 series;
    /// sm_90 and later: H100/H200), for when no device can be asked.
    pub fn for_arch(arch: &str) -> Self {
        let (sms, shared_kib, warps, blocks) = match arch {
            "sm_80" => (108, 164, 64, 32),
            "sm_86" | "sm_87" => (82, 100, 48, 16),
            "sm_89" => (128, 100, 48, 24),
            _ => (132, 228, 64, 32),
        };
        GpuModel {
            arch: arch.to_string(),
            multiprocessors: sms,
            shared_per_sm: shared_kib * 1024,
            registers_per_sm: 65536,
            max_warps_per_sm: warps,
            max_blocks_per_sm: blocks,
        }
    }

    /// The limits of the device `info` describes (warp and block limits by its arch).
    pub fn for_device(info: &super::DeviceInfo) -> Self {
        let positive = |x: i32, default: usize| {
            usize::try_from(x)
                .ok()
                .filter(|&v| v > 0)
                .unwrap_or(default)
        };
        let typical = Self::for_arch(info.arch);
        GpuModel {
            multiprocessors: positive(info.multiprocessors, typical.multiprocessors),
            shared_per_sm: positive(info.shared_per_sm, typical.shared_per_sm),
            registers_per_sm: positive(info.registers_per_sm, typical.registers_per_sm),
            ..typical
        }
    }

    /// The H200 the model was fitted on (132 SMs, sm_90).
    pub fn h200() -> Self {
        Self::for_arch("sm_90")
    }
}

/// Where a configuration's register count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterSource {
    /// The shipped `ptxas -v` table for this arch.
    Ptxas,
    /// [`VnmConfig::estimated_registers`]: no table entry for this arch or configuration.
    Estimated,
}

type RegisterTable = HashMap<(String, VnmConfig), usize>;

/// The shipped `ptxas -v` registers per (arch, configuration).
fn register_table() -> &'static RegisterTable {
    static TABLE: OnceLock<RegisterTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let text = include_str!("../../cuda/ptxas_resources.csv");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let mut table = HashMap::new();
        for line in lines {
            let fields: Vec<&str> = line.split(',').collect();
            let value = |name: &str| {
                let i = header.iter().position(|h| *h == name)?;
                fields.get(i)?.trim().parse::<i64>().ok()
            };
            let point = ParamPoint::from_pairs(
                VnmConfig::PARAMS
                    .iter()
                    .filter_map(|&k| Some((k, value(k)?))),
            );
            let (Ok(cfg), Some(registers), Some(arch)) = (
                VnmConfig::from_point(&point),
                value("registers"),
                fields.first(),
            ) else {
                continue;
            };
            table.insert((arch.to_string(), cfg), registers as usize);
        }
        table
    })
}

/// Registers per thread of `cfg` on `arch`, and where the number came from.
pub fn vnm_registers(cfg: &VnmConfig, arch: &str) -> (usize, RegisterSource) {
    match register_table().get(&(arch.to_string(), *cfg)) {
        Some(&r) => (r, RegisterSource::Ptxas),
        None => (cfg.estimated_registers(), RegisterSource::Estimated),
    }
}

/// Blocks of `warps` warps using `registers` per thread and `shared` bytes that fit one SM.
pub(super) fn blocks_per_sm(
    gpu: &GpuModel,
    warps: usize,
    registers: usize,
    shared: usize,
) -> usize {
    // Registers are allocated per warp in units of 256.
    let per_warp = (registers * 32).div_ceil(256) * 256;
    let by_registers = gpu.registers_per_sm / (warps * per_warp).max(1);
    let by_shared = gpu.shared_per_sm / (shared + RESERVED_SHARED).max(1);
    let by_warps = gpu.max_warps_per_sm / warps.max(1);
    by_registers
        .min(by_shared)
        .min(by_warps)
        .min(gpu.max_blocks_per_sm)
        .max(1)
}

/// Predicted cycles of the V:N:M kernel with `cfg` for a `rows × cols` matrix of pattern 2:M
/// times `n` columns, with `registers` per thread.
pub fn vnm_cycles(
    cfg: &VnmConfig,
    (rows, cols, m): (usize, usize, usize),
    n: usize,
    registers: usize,
    gpu: &GpuModel,
) -> f64 {
    let warps = cfg.warps().max(1);
    let groups = cols.div_ceil(m.max(1));
    // Slots padded to a multiple of BK / 2 (see `pack_vnm`); gathered columns are twice that.
    let slots = (2 * groups).div_ceil(cfg.bk / 2) * (cfg.bk / 2);
    let ktiles = (2 * slots / cfg.bk) as f64;
    let blocks = (rows / cfg.bm).max(1) * n.div_ceil(cfg.bn);
    let shared = cfg.shared_bytes() + (4 * groups).div_ceil(16) * 16;
    let resident = blocks_per_sm(gpu, warps, registers, shared) as f64;
    let per_sm = blocks as f64 / gpu.multiprocessors as f64;
    let overlapped = resident.min(per_sm.max(1.0));

    let (w, f) = (warps as f64, |x: usize| x as f64);
    let (mt, nt, steps) = (f(cfg.wm / 16), f(cfg.wn / 8), f(cfg.bk / cfg.mma_k));
    let mmas = mt * nt * steps;
    let work = mmas * f(cfg.mma_k) / 16.0;
    let fragments = (mt + nt) * steps;
    let copies = f(cfg.bm * cfg.bk / 16 + cfg.bk * cfg.bn / 8) / (w * 32.0);
    let issue_per_warp = mmas * MMA_ISSUE + fragments * LDMATRIX_ISSUE + copies * COPY_ISSUE;
    let l2_bytes = f(cfg.bm * cfg.bk + 2 * cfg.bk * cfg.bn);

    let throughput = (w * work * TENSOR / 4.0)
        .max(w * issue_per_warp / 4.0)
        .max(l2_bytes / L2_BYTES_PER_CYCLE);
    let latency = SYNC
        + FRAGMENT_LATENCY * steps
        + (w / 4.0).ceil() * work * TENSOR
        + COPY_LATENCY / f(cfg.stages.saturating_sub(1).max(1));
    let step = (latency / overlapped).max(throughput);
    per_sm.ceil() * ktiles * step
}

/// Latency-hiding warps per SM that one column per lane needs (more columns per lane need
/// proportionally fewer).
const CSR_WARPS_FOR_LATENCY: f64 = 48.0;
/// Loads of a kept weight's value and column, relative to one load of B.
const CSR_INDEX_LOADS: f64 = 0.5;

/// Predicted cycles (up to a constant) of the CSR kernel with `cfg` for a `rows`-row matrix
/// with `nnz` kept weights times `n` columns.
pub fn csr_cycles(cfg: &CsrConfig, rows: usize, nnz: usize, n: usize, gpu: &GpuModel) -> f64 {
    let cpl = cfg.cols_per_lane.max(1) as f64;
    let wpb = cfg.warps_per_block.max(1);
    let resident_warps = (gpu.max_blocks_per_sm * wpb).min(gpu.max_warps_per_sm) as f64;
    let hiding = (resident_warps * cpl / CSR_WARPS_FOR_LATENCY).min(1.0);
    let column_blocks = n.div_ceil(32 * cfg.cols_per_lane.max(1)) as f64;
    let per_row = nnz as f64 / rows.max(1) as f64;
    rows as f64 * column_blocks * per_row * (CSR_INDEX_LOADS + cpl)
        / hiding
        / gpu.multiprocessors as f64
}

/// Predicted seconds of the CUDA kernel at point `p` of one of [`super::cuda_spaces`]`(sig, n,
/// ..)` on `gpu` (the Hopper kernel's by [`wgmma_cycles`], a prior not yet fitted), with where
/// the registers came from (`None` for kernels whose model needs no register table);
/// `f64::INFINITY` for a point that is not a valid configuration.
pub fn cuda_predicted_cost(
    sig: &FormatSignature,
    n: usize,
    p: &ParamPoint,
    gpu: &GpuModel,
) -> (f64, Option<RegisterSource>) {
    let seconds = |cycles: f64| cycles / CLOCK_HZ;
    match sig.kind {
        PatternKind::Vnm | PatternKind::Nm if super::is_wgmma_point(p) => {
            match WgmmaConfig::from_point(p) {
                Ok(cfg) => {
                    let cycles = wgmma_cycles(&cfg, (sig.rows, sig.cols, sig.m), n, gpu);
                    (seconds(cycles), None)
                }
                Err(_) => (f64::INFINITY, None),
            }
        }
        PatternKind::Vnm | PatternKind::Nm => match VnmConfig::from_point(p) {
            Ok(cfg) => {
                let (registers, source) = vnm_registers(&cfg, &gpu.arch);
                let cycles = vnm_cycles(&cfg, (sig.rows, sig.cols, sig.m), n, registers, gpu);
                (seconds(cycles), Some(source))
            }
            Err(_) => (f64::INFINITY, None),
        },
        PatternKind::Unstructured => match CsrConfig::from_point(p) {
            Ok(cfg) => {
                let nnz = (sig.rows as f64 * sig.cols as f64 * sig.density_ppm as f64 / 1e6).round()
                    as usize;
                (seconds(csr_cycles(&cfg, sig.rows, nnz, n, gpu)), None)
            }
            Err(_) => (f64::INFINITY, None),
        },
        // One point (cuBLAS): a compute floor at ~1000 dense fp16 FLOP per cycle per SM.
        PatternKind::Dense => (
            seconds(2.0 * (sig.rows * sig.cols * n) as f64 / (1000.0 * gpu.multiprocessors as f64)),
            None,
        ),
        PatternKind::Vector => (f64::INFINITY, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::{vnm_configs, VNM_BLOCK_ROWS};

    #[test]
    fn the_register_table_covers_every_configuration_on_both_ci_archs() {
        for arch in crate::cuda::CI_ARCHS {
            for v in VNM_BLOCK_ROWS {
                for c in vnm_configs(v) {
                    let (r, source) = vnm_registers(&c, arch);
                    assert_eq!(source, RegisterSource::Ptxas, "{c} {arch}");
                    assert!((32..=255).contains(&r), "{c} {arch}: {r}");
                }
            }
        }
        let c = vnm_configs(64)[0];
        assert_eq!(vnm_registers(&c, "sm_89").1, RegisterSource::Estimated);
    }

    /// FNV-1a of the kernel source `ptxas_resources.csv` was generated from, or of a later
    /// source whose PTX is byte-identical for every configuration on both archs (2026-11-30:
    /// the PTX instructions moved into helpers for the host emulator; all 624 programs compared).
    const TABLE_SOURCE_FNV1A: u64 = 0x7fb4_25ff_aa71_55be;

    fn fnv1a(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    #[test]
    fn the_register_table_matches_the_kernel_source() {
        let now = fnv1a(crate::cuda::KernelSource::SpmmVnmF16.text().as_bytes());
        assert_eq!(
            now, TABLE_SOURCE_FNV1A,
            "spmm_vnm_f16.cu changed since kernels/cuda/ptxas_resources.csv was generated: \
             regenerate it (cargo run --release -p kernels --features cuda --example \
             cuda_resources > kernels/cuda/ptxas_resources.csv, with a ptxas at hand) and set \
             TABLE_SOURCE_FNV1A to {now:#x}"
        );
    }

    #[test]
    fn occupancy_is_limited_by_the_scarcest_resource() {
        let gpu = GpuModel::h200();
        // 4 warps of 160 registers: 3 blocks by registers.
        assert_eq!(blocks_per_sm(&gpu, 4, 160, 40_000), 3);
        // 100 KB of shared memory: 2 blocks.
        assert_eq!(blocks_per_sm(&gpu, 4, 64, 100_000), 2);
        // 1 warp of 32 registers and little shared memory: the 32-block limit.
        assert_eq!(blocks_per_sm(&gpu, 1, 32, 1_000), 32);
    }

    #[test]
    fn more_columns_per_lane_are_cheaper_for_csr() {
        let gpu = GpuModel::h200();
        let cost = |wpb, cpl| {
            let cfg = CsrConfig {
                warps_per_block: wpb,
                cols_per_lane: cpl,
            };
            csr_cycles(&cfg, 768, 768 * 96, 4096, &gpu)
        };
        assert!(cost(4, 4) < cost(4, 2) && cost(4, 2) < cost(4, 1));
        // One warp per block: at most 32 warps resident, so one column per lane hides less.
        assert!(cost(1, 1) > cost(4, 1));
    }
}
