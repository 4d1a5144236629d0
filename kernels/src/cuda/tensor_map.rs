//! The Hopper kernel's tensor map over B (`TMA = 1`): the driver's 128-byte descriptor that
//! TMA tensor copies read, encoded on the host and passed by value as the kernel's last
//! parameter (`const __grid_constant__ TensorMap tmap_b`).

use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::{DevicePtr, DeviceRepr};

use super::device::{poisoned, CudaDevice};
use super::device_memory::DeviceMatrixF16;
use super::CudaError;

/// What a tensor map over B is a function of: B's device address, rows, columns, row stride
/// (elements) and the box's rows.
pub(crate) type TensorMapKey = (u64, usize, usize, usize, usize);

/// A tensor map as a kernel argument: the driver's `CUtensorMap` (128 bytes, 64-aligned).
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(crate) struct TensorMapArg(sys::CUtensorMap);

// SAFETY: a plain, 64-aligned block of 128 bytes with no pointers into host memory, which the
// kernel takes by value as a struct of the same size and alignment; the driver copies it into
// the launch's parameters.
unsafe impl DeviceRepr for TensorMapArg {}

impl TensorMapArg {
    /// All zeros: what a configuration without TMA is passed (its kernel never reads it).
    pub(crate) fn unused() -> Self {
        TensorMapArg(sys::CUtensorMap { opaque: [0; 16] })
    }
}

impl CudaDevice {
    /// The tensor map of B for boxes of `bk` rows (a stage's, or a cluster block's share of
    /// one): 2-D fp16, dims (columns, rows), rows `ld` halves apart, boxes of 64 columns × `bk`
    /// rows landing under the 128-byte swizzle (one 64-column group of the kernel's swizzled
    /// stage, or that share of it), out-of-bounds elements read as zero
    /// (so tiles past K or n need no guard). An empty B gets the unused map (nothing launches).
    /// Encoded once per B and box (kept by the device), not in every timed launch.
    pub(crate) fn tensor_map_b(
        &self,
        b: &DeviceMatrixF16,
        bk: usize,
    ) -> Result<TensorMapArg, CudaError> {
        if b.rows == 0 || b.cols == 0 {
            return Ok(TensorMapArg::unused());
        }
        let (ptr, _sync) = b.data.device_ptr(&self.stream);
        let key = (ptr, b.rows, b.cols, b.ld, bk);
        let mut maps = self.tensor_maps.lock().map_err(poisoned)?;
        if let Some(map) = maps.get(&key) {
            return Ok(*map);
        }
        let mut map = TensorMapArg::unused();
        let dims = [b.cols as u64, b.rows as u64];
        let strides = [(b.ld * 2) as u64];
        let boxes = [64u32, bk as u32];
        let element_strides = [1u32, 1];
        // SAFETY: `map` is a writable CUtensorMap; the arrays hold rank (2) entries (rank − 1
        // for the strides) and live across the call; the address is B's device allocation,
        // which outlives every launch the map is passed to (the caller launches before B can
        // be dropped). The driver checks alignment, strides and box sizes and errs otherwise.
        unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map.0,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                2,
                ptr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        }
        .result()
        .map_err(|e| CudaError::Driver {
            op: "cuTensorMapEncodeTiled",
            reason: format!(
                "{e} for B of {} x {} (row stride {}), boxes of 64 x {bk}",
                b.rows, b.cols, b.ld
            ),
        })?;
        maps.insert(key, map);
        Ok(map)
    }
}
