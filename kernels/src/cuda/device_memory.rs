//! Device-resident operands: the buffer types the kernels take, and their uploads, zeroed
//! allocations, downloads and device-to-device copies.

use cudarc::driver::CudaSlice;

use super::device::{driver_err, CudaDevice};
use super::pack::pack_vnm;
use super::{CudaError, VnmDims};
use crate::VnmMatrix;

impl CudaDevice {
    /// Copies host data to a new device buffer.
    pub(crate) fn upload<T: cudarc::driver::DeviceRepr>(
        &self,
        x: &[T],
    ) -> Result<CudaSlice<T>, CudaError> {
        self.stream
            .clone_htod(x)
            .map_err(driver_err("cuMemcpyHtoD"))
    }

    /// Copies a device buffer back to the host.
    pub(crate) fn download<T: cudarc::driver::DeviceRepr>(
        &self,
        x: &CudaSlice<T>,
    ) -> Result<Vec<T>, CudaError> {
        self.stream
            .clone_dtoh(x)
            .map_err(driver_err("cuMemcpyDtoH"))
    }

    /// Uploads a V:N:M matrix packed for configurations with this BK.
    pub fn upload_vnm(&self, a: &VnmMatrix, bk: usize) -> Result<DeviceVnm, CudaError> {
        let p = pack_vnm(a, bk)?;
        let dims = p.dims;
        let (values, meta, col_loc) = p.device_arrays();
        Ok(DeviceVnm {
            dims,
            values: self.upload(&values)?,
            meta: self.upload(&meta)?,
            col_loc: self.upload(&col_loc)?,
        })
    }

    /// Uploads a row-major f32 matrix as fp16, rows padded to a multiple of 8 elements.
    pub fn upload_f16(
        &self,
        x: &[f32],
        rows: usize,
        cols: usize,
    ) -> Result<DeviceMatrixF16, CudaError> {
        if x.len() != rows * cols {
            return Err(CudaError::Shape(format!(
                "{} values for a {rows}x{cols} matrix",
                x.len()
            )));
        }
        let (ld, host) = super::pack::f16_device_layout(x, rows, cols);
        let data = self.upload(&host)?;
        Ok(DeviceMatrixF16 {
            rows,
            cols,
            ld,
            data,
        })
    }

    /// A zeroed fp16 matrix (rows padded like [`CudaDevice::upload_f16`]).
    pub fn zeros_f16(&self, rows: usize, cols: usize) -> Result<DeviceMatrixF16, CudaError> {
        let ld = super::pack::padded_ld(cols);
        let data = self
            .stream
            .alloc_zeros::<u16>((rows * ld).max(1))
            .map_err(driver_err("cuMemAlloc"))?;
        Ok(DeviceMatrixF16 {
            rows,
            cols,
            ld,
            data,
        })
    }

    /// Downloads an fp16 matrix as row-major f32 without its padding.
    pub fn download_f16(&self, x: &DeviceMatrixF16) -> Result<Vec<f32>, CudaError> {
        let raw = self.download(&x.data)?;
        let mut out = Vec::with_capacity(x.rows * x.cols);
        for r in 0..x.rows {
            out.extend(super::pack::from_f16_bits(&raw[r * x.ld..][..x.cols]));
        }
        Ok(out)
    }

    /// Copies `src` into `dst` on the device (same padded size): the benchmark's measure of
    /// the memory bandwidth a kernel can reach, taken in the same run as the kernels.
    pub fn copy_f16(
        &self,
        src: &DeviceMatrixF16,
        dst: &mut DeviceMatrixF16,
    ) -> Result<(), CudaError> {
        if src.data.len() != dst.data.len() {
            return Err(CudaError::Shape(format!(
                "copy of {} halves into {}",
                src.data.len(),
                dst.data.len()
            )));
        }
        self.stream
            .memcpy_dtod(&src.data, &mut dst.data)
            .map_err(driver_err("cuMemcpyDtoD"))
    }

    /// Uploads f32 values.
    pub fn upload_f32(&self, x: &[f32]) -> Result<DeviceVecF32, CudaError> {
        let host: Vec<f32> = x.iter().copied().chain([0.0]).collect();
        Ok(DeviceVecF32 {
            len: x.len(),
            data: self.upload(&host)?,
        })
    }

    /// `len` zeroed f32 values.
    pub fn zeros_f32(&self, len: usize) -> Result<DeviceVecF32, CudaError> {
        let data = self
            .stream
            .alloc_zeros::<f32>(len + 1)
            .map_err(driver_err("cuMemAlloc"))?;
        Ok(DeviceVecF32 { len, data })
    }

    /// Downloads f32 values.
    pub fn download_f32(&self, x: &DeviceVecF32) -> Result<Vec<f32>, CudaError> {
        let mut v = self.download(&x.data)?;
        v.truncate(x.len);
        Ok(v)
    }
}

/// A V:N:M matrix on the device, packed for one BK (see `pack.rs`).
pub struct DeviceVnm {
    /// Its dimensions (V, M, slots per row as packed, …).
    pub dims: VnmDims,
    pub(super) values: CudaSlice<u16>,
    pub(super) meta: CudaSlice<u32>,
    pub(super) col_loc: CudaSlice<u8>,
}

/// A row-major fp16 matrix on the device with rows padded to `ld` (a multiple of 8).
pub struct DeviceMatrixF16 {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row stride in elements.
    pub ld: usize,
    pub(crate) data: CudaSlice<u16>,
}

/// f32 values on the device.
pub struct DeviceVecF32 {
    pub(super) len: usize,
    pub(super) data: CudaSlice<f32>,
}

impl DeviceVecF32 {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A CSR matrix on the device (i32 indices, f32 values).
pub struct DeviceCsr {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    pub(super) row_ptr: CudaSlice<u32>,
    pub(super) col_idx: CudaSlice<u32>,
    pub(super) values: CudaSlice<f32>,
}
