//! A CPU stand-in for a CUDA device, for the tests of the CUDA stages: the tuning and
//! evaluation code that runs on a GPU runs here on it, unchanged.
//!
//! - Products are computed the way the kernels compute them: V:N:M and 2:4 through the same
//!   packing as the device (`pack_vnm`, 2:4 converted at the point's BM) with operands rounded
//!   to fp16 and C rounded to fp16 (the `mma.sp` and the Hopper `wgmma` kernel alike); CSR in
//!   f32; dense with fp16 operands and result.
//! - Points are checked the way the device checks them (a point of another kernel, or a BM
//!   that is not the matrix's V or does not divide it, or a Hopper point on a device other
//!   than sm_90, is an error), and a test may make one
//!   point, or the dense baseline, fail, or one kernel's products wrong.
//! - Times are not measurements: each point's samples are the cost model's prediction on an
//!   H200 times a fixed factor in [1, 1.5) drawn from the point, so rankings are known.

use std::hash::{Hash, Hasher};

use kernels::cuda::{
    cuda_predicted_cost, emulate_vnm, from_f16_bits, is_wgmma_point, pack_vnm, to_f16_bits,
    vnm_from_nm, CsrConfig, CudaError, DeviceInfo, Gpu, GpuModel, Timing, VnmConfig, WgmmaConfig,
};
use kernels::{spmm_reference, KernelError, ParamPoint, Pattern, SparseMatrix};

/// The stand-in (see the module's notes).
pub struct StandIn {
    info: DeviceInfo,
    /// A point whose launches fail.
    pub failing: Option<ParamPoint>,
    /// Whether the dense baseline fails.
    pub dense_fails: bool,
    /// Added to every product's output (a wrong kernel), or only to those of the kernel
    /// [`StandIn::wrong_kernel`] names.
    pub error: f32,
    /// The kernel (its space's name, or `cublas-f16`) whose products
    /// [`StandIn::error`] makes wrong; `None`: every product.
    pub wrong_kernel: Option<&'static str>,
}

impl StandIn {
    /// A stand-in with the H200's limits.
    pub fn h200() -> Self {
        StandIn {
            info: DeviceInfo {
                name: "CPU stand-in".into(),
                sm: (9, 0),
                arch: "sm_90",
                driver_version: 0,
                multiprocessors: 132,
                max_shared_per_block: 227 * 1024,
                shared_per_sm: 228 * 1024,
                registers_per_sm: 65536,
            },
            failing: None,
            dense_fails: false,
            error: 0.0,
            wrong_kernel: None,
        }
    }

    /// A stand-in with an A100's limits (sm_80: no Hopper kernel).
    pub fn a100() -> Self {
        let mut dev = Self::h200();
        dev.info.sm = (8, 0);
        dev.info.arch = "sm_80";
        dev.info.multiprocessors = 108;
        dev.info.shared_per_sm = 164 * 1024;
        dev.info.max_shared_per_block = 163 * 1024;
        dev
    }

    /// The block height and k-tile of the tensor-core point `point`, either kernel's.
    fn tensor_core_tile(point: &ParamPoint) -> Result<(usize, usize), KernelError> {
        if is_wgmma_point(point) {
            let cfg = WgmmaConfig::from_point(point)?;
            Ok((cfg.bm, cfg.bk))
        } else {
            let cfg = VnmConfig::from_point(point)?;
            Ok((cfg.bm, cfg.bk))
        }
    }

    fn check(&self, a: &SparseMatrix, point: &ParamPoint) -> Result<(), KernelError> {
        if self.failing.as_ref() == Some(point) {
            return Err(KernelError::Backend(format!(
                "launch failed (stand-in) at {point:?}"
            )));
        }
        if is_wgmma_point(point) && self.info.sm != (9, 0) {
            return Err(KernelError::Backend(format!(
                "the Hopper kernel needs an sm_90 device, this one is {} (stand-in)",
                self.info.arch
            )));
        }
        match a {
            SparseMatrix::Vnm(v) => {
                let (bm, _) = Self::tensor_core_tile(point)?;
                // mma.sp blocks are V rows; wgmma blocks divide V.
                let fits = if is_wgmma_point(point) {
                    v.v().is_multiple_of(bm)
                } else {
                    bm == v.v()
                };
                if !fits {
                    return Err(CudaError::Shape(format!("BM = {bm} on V = {}", v.v())).into());
                }
                // TMA copies B's k-tiles as boxes: M = 4 only (as `WgmmaLaunch::new` says).
                if is_wgmma_point(point) && WgmmaConfig::from_point(point)?.tma == 1 && v.m() != 4 {
                    return Err(CudaError::Shape(format!("TMA on M = {}", v.m())).into());
                }
            }
            SparseMatrix::Nm(_) => {
                Self::tensor_core_tile(point)?;
            }
            SparseMatrix::Csr(_) => {
                CsrConfig::from_point(point)?;
            }
            SparseMatrix::Dense(_) => {}
            SparseMatrix::Vector(_) => {
                return Err(KernelError::Backend(
                    "no CUDA kernel for vector-wise".into(),
                ))
            }
        }
        Ok(())
    }
}

fn fp16(x: &[f32]) -> Vec<f32> {
    from_f16_bits(&to_f16_bits(x))
}

fn timing(us: f64, reps: usize) -> Timing {
    Timing {
        samples_us: vec![us; reps],
        median_us: us,
        min_us: us,
        max_us: us,
    }
}

impl Gpu for StandIn {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn spmm(
        &self,
        a: &SparseMatrix,
        b: &[f32],
        n: usize,
        point: &ParamPoint,
    ) -> Result<Vec<f32>, KernelError> {
        self.check(a, point)?;
        let mut c = match a {
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) => {
                let (bm, bk) = Self::tensor_core_tile(point)?;
                let v = match a {
                    SparseMatrix::Nm(nm) => vnm_from_nm(nm, bm)?,
                    SparseMatrix::Vnm(v) => v.clone(),
                    _ => unreachable!("matched above"),
                };
                fp16(&emulate_vnm(&pack_vnm(&v, bk)?, b, n))
            }
            SparseMatrix::Dense(d) => {
                let a16 = kernels::DenseMatrix::new(d.rows(), d.cols(), fp16(d.values()))?;
                let mut c = vec![0.0; a.rows() * n];
                spmm_reference(&SparseMatrix::Dense(a16), &fp16(b), n, &mut c)?;
                fp16(&c)
            }
            _ => {
                let mut c = vec![0.0; a.rows() * n];
                spmm_reference(a, b, n, &mut c)?;
                c
            }
        };
        let kernel = match a {
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) if is_wgmma_point(point) => "cuda-vnm-wgmma",
            SparseMatrix::Vnm(_) => "cuda-vnm",
            SparseMatrix::Nm(_) => "cuda-nm24",
            SparseMatrix::Csr(_) => "cuda-csr",
            _ => "cublas-f16",
        };
        if self.wrong_kernel.is_none_or(|k| k == kernel) {
            c.iter_mut().for_each(|x| *x += self.error);
        }
        Ok(c)
    }

    fn measure(
        &self,
        a: &SparseMatrix,
        n: usize,
        point: &ParamPoint,
        reps: usize,
    ) -> Result<Timing, KernelError> {
        self.check(a, point)?;
        let gpu = GpuModel::for_device(&self.info);
        let (seconds, _) = cuda_predicted_cost(&a.signature(), n, point, &gpu);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        point.hash(&mut h);
        let factor = 1.0 + (h.finish() % 1000) as f64 / 2000.0;
        Ok(timing(seconds * 1e6 * factor, reps))
    }

    fn measure_dense(
        &self,
        rows: usize,
        cols: usize,
        n: usize,
        reps: usize,
    ) -> Result<Timing, CudaError> {
        if self.dense_fails {
            return Err(CudaError::Shape("cuBLAS failed (stand-in)".into()));
        }
        let sig = kernels::FormatSignature::for_pattern(&Pattern::Dense, rows, cols)
            .map_err(|e| CudaError::Shape(e.to_string()))?;
        let gpu = GpuModel::for_device(&self.info);
        let (seconds, _) = cuda_predicted_cost(&sig, n, &ParamPoint::default(), &gpu);
        Ok(timing(seconds * 1e6, reps))
    }
}
