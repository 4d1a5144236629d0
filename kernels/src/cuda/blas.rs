//! The dense baseline: fp16 GEMM through cuBLAS (`cublasGemmEx`, fp16 in and out, fp32
//! accumulation — the same arithmetic as the sparse kernels), on row-major operands.

use std::ffi::c_void;

use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::DevicePtr;

use super::device::{check_product, CudaDevice};
use super::device_memory::DeviceMatrixF16;
use super::CudaError;

impl CudaDevice {
    fn with_blas<R>(
        &self,
        f: impl FnOnce(&CudaBlas) -> Result<R, CudaError>,
    ) -> Result<R, CudaError> {
        let mut guard = self.blas.lock().map_err(|_| CudaError::Blas {
            op: "handle",
            reason: "a thread panicked while holding the cuBLAS handle".into(),
        })?;
        if guard.is_none() {
            // SAFETY: only tries to dlopen libcublas under its known names.
            if !unsafe { blas_sys::is_culib_present() } {
                return Err(CudaError::NoCublas);
            }
            *guard = Some(
                CudaBlas::new(self.stream.clone()).map_err(|e| CudaError::Blas {
                    op: "cublasCreate",
                    reason: format!("{e:?}"),
                })?,
            );
        }
        match guard.as_ref() {
            Some(b) => f(b),
            None => Err(CudaError::NoCublas),
        }
    }

    /// Launches C = A·B (all fp16 row-major, fp32 accumulation) through cuBLAS.
    pub fn launch_gemm_f16(
        &self,
        a: &DeviceMatrixF16,
        b: &DeviceMatrixF16,
        c: &mut DeviceMatrixF16,
    ) -> Result<(), CudaError> {
        check_product(a.rows, a.cols, b, c)?;
        if a.rows == 0 || b.cols == 0 {
            return Ok(());
        }
        let stream = self.stream.clone();
        self.with_blas(|handle| {
            let (pa, _ga) = a.data.device_ptr(&stream);
            let (pb, _gb) = b.data.device_ptr(&stream);
            let (pc, _gc) = c.data.device_ptr(&stream);
            let (alpha, beta) = (1.0f32, 0.0f32);
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS's "A" is our B (n × k,
            // ld = b.ld) and its "B" is our A (k × rows, ld = a.ld).
            // SAFETY: the three pointers are live device allocations of at least
            // rows·ld elements each (DeviceMatrixF16's invariant); shapes were checked above;
            // alpha and beta are f32 as CUBLAS_COMPUTE_32F requires; the handle's stream is
            // this device's stream, so the call is ordered with the kernels.
            unsafe {
                blas::gemm_ex(
                    *handle.handle(),
                    blas_sys::cublasOperation_t::CUBLAS_OP_N,
                    blas_sys::cublasOperation_t::CUBLAS_OP_N,
                    b.cols as i32,
                    a.rows as i32,
                    a.cols as i32,
                    (&alpha as *const f32).cast::<c_void>(),
                    pb as *const c_void,
                    blas_sys::cudaDataType::CUDA_R_16F,
                    b.ld as i32,
                    pa as *const c_void,
                    blas_sys::cudaDataType::CUDA_R_16F,
                    a.ld as i32,
                    (&beta as *const f32).cast::<c_void>(),
                    pc as *mut c_void,
                    blas_sys::cudaDataType::CUDA_R_16F,
                    c.ld as i32,
                    blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|e| CudaError::Blas {
                op: "cublasGemmEx",
                reason: format!("{e:?}"),
            })
        })
    }

    /// Host convenience: C = A·B through cuBLAS in fp16 (A `rows × k`, B `k × n`, row-major).
    pub fn gemm_f16(
        &self,
        a: &[f32],
        rows: usize,
        k: usize,
        b: &[f32],
        n: usize,
    ) -> Result<Vec<f32>, CudaError> {
        let da = self.upload_f16(a, rows, k)?;
        let db = self.upload_f16(b, k, n)?;
        let mut dc = self.zeros_f16(rows, n)?;
        self.launch_gemm_f16(&da, &db, &mut dc)?;
        self.synchronize()?;
        self.download_f16(&dc)
    }
}
