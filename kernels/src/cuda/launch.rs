//! How the kernels are launched: grid, block, dynamic shared memory and the kernel's integer
//! arguments, and the arrays uploaded for CSR. The device launch (`CudaDevice::launch_vnm`) and the host
//! emulator (`kernels/cuda/emu/`, run by `kernels/tests/cuda_emulated.rs`) both take them from
//! here, so the emulator runs exactly the launches the device runs.

use super::{CsrConfig, CudaError, VnmConfig};
use crate::CsrMatrix;

/// The dimensions of a V:N:M matrix packed for the kernel (see [`super::pack_vnm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VnmDims {
    /// Rows.
    pub rows: usize,
    /// Columns (K).
    pub cols: usize,
    /// Rows per block (the kernel's BM).
    pub v: usize,
    /// Group width M.
    pub m: usize,
    /// Groups per row, ⌈K/M⌉.
    pub groups: usize,
    /// Value slots per row (K_sp padded to the BK/2 it was packed for).
    pub ks: usize,
}

/// One launch of `spmm_vnm_f16`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VnmLaunch {
    /// Thread blocks along the columns of C (BN each) and along the row blocks (BM each).
    pub grid: (u32, u32),
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes: the pipeline stages, then the row block's
    /// column locations (4 per group, rounded up to 16 bytes).
    pub shared_bytes: usize,
    /// The kernel's integer arguments in order: rows, n, ks, groups, m, k, ldb, ldc.
    pub ints: [i32; 8],
}

impl VnmLaunch {
    /// The launch of `cfg` for A = `a` times a B of `n` columns with row strides `ldb` (B) and
    /// `ldc` (C), in elements. Errors if `cfg` is not a valid configuration, does not fit the
    /// packing (BM ≠ V, or 2·ks not a multiple of BK), or a size exceeds the kernel's `int`s.
    pub fn new(
        a: VnmDims,
        n: usize,
        ldb: usize,
        ldc: usize,
        cfg: &VnmConfig,
    ) -> Result<Self, CudaError> {
        cfg.validate()?;
        if cfg.bm != a.v || !(2 * a.ks).is_multiple_of(cfg.bk) {
            return Err(CudaError::Shape(format!(
                "{cfg} does not fit a matrix packed with V={} and {} slots per row",
                a.v, a.ks
            )));
        }
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| CudaError::Shape(format!("{x} exceeds the kernel's int")))
        };
        let mut ints = [0; 8];
        for (slot, x) in ints
            .iter_mut()
            .zip([a.rows, n, a.ks, a.groups, a.m, a.cols, ldb, ldc])
        {
            *slot = int(x)?;
        }
        Ok(VnmLaunch {
            grid: (
                int(n.div_ceil(cfg.bn))? as u32,
                int(a.rows / a.v.max(1))? as u32,
            ),
            threads: cfg.threads() as u32,
            shared_bytes: cfg.shared_bytes() + (4 * a.groups).div_ceil(16) * 16,
            ints,
        })
    }
}

/// One launch of `spmm_csr_f32`: one warp per row of A and `32 · cols_per_lane` columns of C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrLaunch {
    /// Thread blocks along the columns of C and along the rows (`warps_per_block` each).
    pub grid: (u32, u32),
    /// Threads per block.
    pub threads: u32,
    /// The kernel's integer arguments in order: rows, n.
    pub ints: [i32; 2],
}

impl CsrLaunch {
    /// The launch of `cfg` for a `rows`-row A times a B of `n` columns.
    pub fn new(rows: usize, n: usize, cfg: &CsrConfig) -> Result<Self, CudaError> {
        cfg.validate()?;
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| CudaError::Shape(format!("{x} exceeds the kernel's int")))
        };
        Ok(CsrLaunch {
            grid: (
                int(n.div_ceil(32 * cfg.cols_per_lane))? as u32,
                int(rows.div_ceil(cfg.warps_per_block))? as u32,
            ),
            threads: cfg.threads() as u32,
            ints: [int(rows)?, int(n)?],
        })
    }
}

/// A CSR matrix's arrays as uploaded: row pointers, column indices, values.
pub type CsrArrays = (Vec<u32>, Vec<u32>, Vec<f32>);

/// Row pointers, column indices and values of `a` as uploaded to the device: indices and
/// values with one trailing element, which keeps empty matrices allocatable and is never read.
pub fn csr_device_arrays(a: &CsrMatrix) -> Result<CsrArrays, CudaError> {
    if a.nnz() > i32::MAX as usize {
        return Err(CudaError::Shape(format!("{} nonzeros exceed i32", a.nnz())));
    }
    let col_idx = a.col_idx().iter().copied().chain([0]).collect();
    let values = a.values().iter().copied().chain([0.0]).collect();
    Ok((a.row_ptr().to_vec(), col_idx, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::{pack_vnm, padded_ld, random_vnm, vnm_configs};

    #[test]
    fn the_launch_covers_every_row_block_and_column_tile() {
        let a = random_vnm(256, 100, 128, 8, 1).unwrap();
        let cfg = vnm_configs(128)[0];
        let p = pack_vnm(&a, cfg.bk).unwrap();
        let l = VnmLaunch::new(p.dims, 70, padded_ld(70), padded_ld(70), &cfg).unwrap();
        assert_eq!(l.grid, (70u32.div_ceil(cfg.bn as u32), 2));
        assert_eq!(l.threads as usize, cfg.threads());
        // 13 groups: 52 bytes of column locations, rounded up to 64.
        assert_eq!(l.shared_bytes, cfg.shared_bytes() + 64);
        assert_eq!(l.ints, [256, 70, p.dims.ks as i32, 13, 8, 100, 72, 72]);
        let mut wrong = cfg;
        wrong.bm = 64;
        wrong.wm = 64;
        assert!(VnmLaunch::new(p.dims, 70, 72, 72, &wrong).is_err());
        let csr = CsrConfig {
            warps_per_block: 4,
            cols_per_lane: 2,
        };
        let l = CsrLaunch::new(10, 65, &csr).unwrap();
        assert_eq!((l.grid, l.threads, l.ints), ((2, 3), 128, [10, 65]));
    }
}
