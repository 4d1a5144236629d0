//! Compile-time configurations of the CUDA kernels: their parameters, the constraints between
//! them (the Spatha template's), the full valid space per format, and what each configuration
//! costs in threads, shared memory and (estimated) registers. Pure data: no CUDA needed.

use std::fmt;

use super::CudaError;

/// Row-block heights V the V:N:M kernel is built for (BM = V; `mma.sp` tiles are 16 rows).
pub const VNM_BLOCK_ROWS: [usize; 4] = [16, 32, 64, 128];
/// Allowed BN (columns of C per thread block).
pub const VNM_BN: [usize; 2] = [64, 128];
/// Allowed BK (gathered reduction columns per pipeline stage).
pub const VNM_BK: [usize; 2] = [32, 64];
/// Allowed WM (rows per warp tile) for row blocks of `v` rows: at most 2 warps along M for
/// V ≥ 64 (and WM | V), so that every combination with the other lists has ≤ 8 warps and the
/// whole space is a product of value lists plus one product constraint (WM·WN/32 ≤ 128).
pub fn vnm_wm_values(v: usize) -> Vec<usize> {
    [16, 32, 64, 128]
        .into_iter()
        .filter(|&wm| wm <= v && v.is_multiple_of(wm) && v / wm <= MAX_WARPS_M)
        .collect()
}
/// Most warps along M (warp tiles per thread block's rows) the space allows.
pub const MAX_WARPS_M: usize = 2;
/// Allowed WN (columns per warp tile).
pub const VNM_WN: [usize; 2] = [32, 64];
/// Allowed `mma.sp` K (16: m16n8k16, 32: m16n8k32).
pub const VNM_MMA_K: [usize; 2] = [16, 32];
/// Allowed cp.async pipeline depths.
pub const VNM_STAGES: [usize; 3] = [2, 3, 4];
/// Most warps per block the space allows.
pub const MAX_WARPS: usize = 8;
/// Most accumulator floats per thread the space allows (keeps registers under 255).
pub const MAX_ACC_PER_THREAD: usize = 128;
/// Shared memory a configuration may use: the sm_80 opt-in limit, so every configuration
/// runs on both targets the CI compiles for (sm_80, sm_90).
pub const MAX_SHARED_BYTES: usize = 163 * 1024;

/// One configuration of the V:N:M `mma.sp` kernel (`spmm_vnm_f16`). Field names are the
/// Spatha template parameters; each becomes a `#define` of the same upper-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VnmConfig {
    /// Rows per thread block; always the format's V.
    pub bm: usize,
    /// Columns of C per thread block.
    pub bn: usize,
    /// Gathered reduction columns per pipeline stage.
    pub bk: usize,
    /// Rows per warp tile.
    pub wm: usize,
    /// Columns per warp tile.
    pub wn: usize,
    /// K of the `mma.sp` instruction: 16 or 32.
    pub mma_k: usize,
    /// cp.async pipeline stages, 2..=6.
    pub stages: usize,
}

impl fmt::Display for VnmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BM={} BN={} BK={} WM={} WN={} MMA_K={} STAGES={}",
            self.bm, self.bn, self.bk, self.wm, self.wn, self.mma_k, self.stages
        )
    }
}

impl VnmConfig {
    /// Checks the template's constraints: BM % WM = 0, BN % WN = 0, WM % 16 = 0, WN % 8 = 0,
    /// BK % MMA_K = 0, MMA_K ∈ {16, 32}, BK ∈ {32, 64, 128} (metadata is copied 4–16 bytes per
    /// row), stages 2..=6, 1..=MAX_WARPS warps, and the register and shared-memory budgets.
    pub fn validate(&self) -> Result<(), CudaError> {
        let fail = |reason: String| {
            Err(CudaError::Config {
                kernel: "spmm_vnm_f16",
                config: self.to_string(),
                reason,
            })
        };
        if self.bm == 0 || !self.bm.is_multiple_of(16) {
            return fail(format!("BM={} must be a positive multiple of 16", self.bm));
        }
        if self.wm == 0 || !self.wm.is_multiple_of(16) || !self.bm.is_multiple_of(self.wm) {
            return fail("WM must be a multiple of 16 dividing BM".into());
        }
        if self.wn == 0 || !self.wn.is_multiple_of(8) || !self.bn.is_multiple_of(self.wn) {
            return fail("WN must be a multiple of 8 dividing BN".into());
        }
        if self.mma_k != 16 && self.mma_k != 32 {
            return fail("MMA_K must be 16 or 32".into());
        }
        if ![32, 64, 128].contains(&self.bk) || !self.bk.is_multiple_of(self.mma_k) {
            return fail("BK must be 32, 64 or 128 and a multiple of MMA_K".into());
        }
        if !(2..=6).contains(&self.stages) {
            return fail("STAGES must be 2..=6".into());
        }
        let warps = self.warps();
        if warps == 0 || warps > MAX_WARPS {
            return fail(format!("{warps} warps per block, allowed 1..={MAX_WARPS}"));
        }
        if self.wm * self.wn / 32 > MAX_ACC_PER_THREAD {
            return fail(format!(
                "WM*WN/32 = {} accumulators per thread, at most {MAX_ACC_PER_THREAD}",
                self.wm * self.wn / 32
            ));
        }
        if self.shared_bytes() > MAX_SHARED_BYTES {
            return fail(format!(
                "{} bytes of shared memory, at most {MAX_SHARED_BYTES}",
                self.shared_bytes()
            ));
        }
        Ok(())
    }

    /// Warps per thread block.
    pub fn warps(&self) -> usize {
        if self.wm == 0 || self.wn == 0 {
            return 0;
        }
        (self.bm / self.wm) * (self.bn / self.wn)
    }

    /// Threads per thread block.
    pub fn threads(&self) -> usize {
        self.warps() * 32
    }

    /// Dynamic shared memory per block for the pipeline, in bytes (as laid out by the kernel);
    /// a launch adds 4·⌈K/M⌉ bytes (rounded up to 16) for the staged column locations.
    pub fn shared_bytes(&self) -> usize {
        let a = self.bm * (self.bk / 2 + 8) * 2;
        let b = self.bk * (self.bn + 8) * 2;
        let meta = self.bm * (self.bk / 16) * 2;
        self.stages * (a + b + meta)
    }

    /// Registers per thread estimated from the tile sizes (accumulators, fragments, the
    /// gather prefetch, addressing); ptxas's count replaces it when available.
    pub fn estimated_registers(&self) -> usize {
        let acc = self.wm * self.wn / 32;
        let frags = (self.wm / 16) * (self.mma_k / 8 + 1) + (self.wn / 8) * (self.mma_k / 8);
        let gather = (self.bk * self.bn / 8).div_ceil(self.threads().max(1));
        (acc + frags + gather + 40).min(255)
    }

    /// The `#define`s of this configuration, in a fixed order.
    pub fn defines(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("BM", self.bm),
            ("BN", self.bn),
            ("BK", self.bk),
            ("WM", self.wm),
            ("WN", self.wn),
            ("MMA_K", self.mma_k),
            ("STAGES", self.stages),
        ]
    }
}

/// Every valid configuration of the V:N:M kernel for row blocks of `v` rows, in a fixed order.
pub fn vnm_configs(v: usize) -> Vec<VnmConfig> {
    let mut out = Vec::new();
    for &bn in &VNM_BN {
        for &bk in &VNM_BK {
            for wm in vnm_wm_values(v) {
                for &wn in &VNM_WN {
                    for &mma_k in &VNM_MMA_K {
                        for &stages in &VNM_STAGES {
                            let c = VnmConfig {
                                bm: v,
                                bn,
                                bk,
                                wm,
                                wn,
                                mma_k,
                                stages,
                            };
                            if c.validate().is_ok() {
                                out.push(c);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Allowed warps per block of the CSR kernel.
pub const CSR_WARPS: [usize; 4] = [1, 2, 4, 8];
/// Allowed columns per lane of the CSR kernel.
pub const CSR_COLS_PER_LANE: [usize; 3] = [1, 2, 4];

/// One configuration of the CSR row-split kernel (`spmm_csr_f32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CsrConfig {
    /// Warps (rows of A) per thread block.
    pub warps_per_block: usize,
    /// Columns of C each lane computes.
    pub cols_per_lane: usize,
}

impl fmt::Display for CsrConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WARPS_PER_BLOCK={} COLS_PER_LANE={}",
            self.warps_per_block, self.cols_per_lane
        )
    }
}

impl CsrConfig {
    /// Checks that both parameters take one of their allowed values.
    pub fn validate(&self) -> Result<(), CudaError> {
        if CSR_WARPS.contains(&self.warps_per_block)
            && CSR_COLS_PER_LANE.contains(&self.cols_per_lane)
        {
            Ok(())
        } else {
            Err(CudaError::Config {
                kernel: "spmm_csr_f32",
                config: self.to_string(),
                reason: format!(
                    "WARPS_PER_BLOCK must be one of {CSR_WARPS:?}, COLS_PER_LANE one of {CSR_COLS_PER_LANE:?}"
                ),
            })
        }
    }

    /// Threads per block.
    pub fn threads(&self) -> usize {
        self.warps_per_block * 32
    }

    /// The `#define`s of this configuration, in a fixed order.
    pub fn defines(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("WARPS_PER_BLOCK", self.warps_per_block),
            ("COLS_PER_LANE", self.cols_per_lane),
        ]
    }
}

/// Every configuration of the CSR kernel, in a fixed order.
pub fn csr_configs() -> Vec<CsrConfig> {
    CSR_WARPS
        .iter()
        .flat_map(|&w| {
            CSR_COLS_PER_LANE.iter().map(move |&c| CsrConfig {
                warps_per_block: w,
                cols_per_lane: c,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warp_tile_rows_per_block_height() {
        assert_eq!(vnm_wm_values(16), vec![16]);
        assert_eq!(vnm_wm_values(32), vec![16, 32]);
        assert_eq!(vnm_wm_values(64), vec![32, 64]);
        assert_eq!(vnm_wm_values(128), vec![64, 128]);
        assert_eq!(
            VNM_BLOCK_ROWS.map(|v| vnm_configs(v).len()),
            [48, 96, 96, 72]
        );
    }

    #[test]
    fn every_listed_config_is_valid_and_fits() {
        for v in VNM_BLOCK_ROWS {
            let configs = vnm_configs(v);
            assert!(!configs.is_empty(), "no config for V={v}");
            for c in configs {
                c.validate().unwrap();
                assert_eq!(c.bm % c.wm, 0);
                assert_eq!(c.bn % c.wn, 0);
                assert_eq!(c.bk % c.mma_k, 0);
                assert!(c.threads() >= 32 && c.threads() <= 256);
                assert!(c.shared_bytes() <= MAX_SHARED_BYTES);
            }
        }
    }

    #[test]
    fn constraint_violations_are_rejected() {
        let good = VnmConfig {
            bm: 64,
            bn: 128,
            bk: 64,
            wm: 32,
            wn: 64,
            mma_k: 32,
            stages: 3,
        };
        good.validate().unwrap();
        let bad = [
            VnmConfig { wm: 48, ..good },
            VnmConfig { wn: 12, ..good },
            VnmConfig { bk: 16, ..good },
            VnmConfig { mma_k: 8, ..good },
            VnmConfig { stages: 7, ..good },
            VnmConfig { bm: 24, ..good },
            VnmConfig {
                wm: 16,
                wn: 32,
                ..good
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c} should be invalid");
        }
    }

    #[test]
    fn shared_memory_matches_the_kernel_layout() {
        let c = VnmConfig {
            bm: 16,
            bn: 64,
            bk: 32,
            wm: 16,
            wn: 32,
            mma_k: 16,
            stages: 2,
        };
        // A: 16 x (16 + 8) halves, B: 32 x (64 + 8) halves, meta: 16 x 2 u16; two stages.
        assert_eq!(
            c.shared_bytes(),
            2 * (16 * 24 * 2 + 32 * 72 * 2 + 16 * 2 * 2)
        );
    }
}
