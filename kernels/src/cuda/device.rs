//! The CUDA device: context and stream, the lazily filled cache of loaded kernels (one module
//! per kernel configuration, compiled through NVRTC and the optional cache of compiled programs,
//! loaded from NVRTC's cubin where it runs on this device, else from PTX), launches and
//! event timing. Device-resident operands live in `device_memory.rs`, the cuBLAS baseline in
//! `blas.rs`, the Hopper kernel's launch in `device_wgmma.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUevent_flags, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::config::{CsrConfig, VnmConfig};
use super::device_memory::{DeviceCsr, DeviceMatrixF16, DeviceVecF32, DeviceVnm};
use super::nvrtc::{compile_program, Compiled, PtxCache};
use super::ptxas::PtxasReport;
use super::source::KernelSource;
use super::tensor_map::{TensorMapArg, TensorMapKey};
use super::{csr_device_arrays, CsrLaunch, CudaError, DeviceInfo, Timing, VnmLaunch};
use crate::{CsrMatrix, VnmMatrix};

pub(crate) fn driver_err(op: &'static str) -> impl Fn(DriverError) -> CudaError {
    move |e| CudaError::Driver {
        op,
        reason: e.to_string(),
    }
}

/// A loaded kernel (its module stays alive with it) and the report of the ptxas that made it.
#[derive(Clone)]
pub(super) struct Loaded {
    pub(super) function: CudaFunction,
    /// `None` where the device loaded the program's PTX (a later architecture, or a refused
    /// cubin): the driver's ptxas made that code.
    pub(super) report: Option<PtxasReport>,
}

/// A program (source and defines) and the entry point loaded from it.
type FunctionKey = (KernelSource, Vec<(&'static str, usize)>, &'static str);

/// One CUDA device with its stream, kernel cache and (lazily) cuBLAS handle.
pub struct CudaDevice {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(super) info: DeviceInfo,
    cache: Option<PtxCache>,
    functions: Mutex<HashMap<FunctionKey, Loaded>>,
    pub(crate) blas: Mutex<Option<cudarc::cublas::CudaBlas>>,
    /// The Hopper kernel's split-K workspace (f32 partials), grown as launches need.
    pub(super) workspace: Mutex<Option<CudaSlice<f32>>>,
    /// Tensor maps over B already encoded (TMA), by address, shape, stride and box rows: a map
    /// is a function of those alone, so one encoded for a freed buffer serves its successor.
    pub(super) tensor_maps: Mutex<HashMap<TensorMapKey, TensorMapArg>>,
    /// Clusters of a persistent clustered Hopper program (by its `#define`s) that the device
    /// runs at once, as the driver counted them.
    pub(super) active_clusters: Mutex<HashMap<Vec<(&'static str, usize)>, usize>>,
}

/// Whether a cubin for `arch` (`sm_XY`, or `sm_XYa` for that device alone) runs on a device of
/// compute capability `sm`: the same major version and a minor one at least as high.
fn cubin_runs_on(arch: &str, sm: (i32, i32)) -> bool {
    let Some(digits) = arch.strip_prefix("sm_") else {
        return false;
    };
    let (digits, only_this) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    let Ok(number) = digits.parse::<i32>() else {
        return false;
    };
    let (major, minor) = (number / 10, number % 10);
    major == sm.0
        && if only_this {
            minor == sm.1
        } else {
            minor <= sm.1
        }
}

/// The NVRTC target for a compute capability; `None` below sm_80 (no `mma.sp`).
fn arch_for(sm: (i32, i32)) -> Option<&'static str> {
    Some(match sm {
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, _) => "sm_90",
        (major, _) if major >= 10 => "sm_90", // PTX for sm_90 is JIT-compiled forward
        (8, _) => "sm_80",
        _ => return None,
    })
}

impl CudaDevice {
    /// Opens device `ordinal`. Probes for the driver first (cudarc panics without one).
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        // SAFETY: only tries to dlopen libcuda under its known names; no CUDA call is made.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(CudaError::NoDriver);
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
        // SAFETY: this backend uses a single stream, so cross-stream event tracking is not
        // needed; turning it off removes two event records per argument per launch.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let sm = ctx
            .compute_capability()
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let arch = arch_for(sm).ok_or_else(|| CudaError::NoDevice {
            ordinal,
            reason: format!("compute capability {}.{} < 8.0 has no mma.sp", sm.0, sm.1),
        })?;
        let mut driver = 0;
        // SAFETY: the driver library is loaded (probed above) and `driver` is valid for writes.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
        let attribute = |a| ctx.attribute(a).map_err(driver_err("cuDeviceGetAttribute"));
        use cudarc::driver::sys::CUdevice_attribute as A;
        let info = DeviceInfo {
            name: ctx.name().map_err(driver_err("cuDeviceGetName"))?,
            sm,
            arch,
            driver_version: driver,
            max_shared_per_block: attribute(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            multiprocessors: attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            shared_per_sm: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            registers_per_sm: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        };
        Ok(Self {
            ctx,
            stream,
            info,
            cache: None,
            functions: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
            workspace: Mutex::new(None),
            tensor_maps: Mutex::new(HashMap::new()),
            active_clusters: Mutex::new(HashMap::new()),
        })
    }

    /// Uses `cache` for compiled programs (PTX and cubins) from now on.
    pub fn with_ptx_cache(mut self, cache: PtxCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Caches compiled PTX in `$COTUNE_PTX_CACHE` where it is set (the device tests and
    /// benchmarks: the device check's processes then compile each program once between them).
    pub fn with_env_ptx_cache(self) -> Self {
        match std::env::var_os(super::PTX_CACHE_ENV) {
            Some(dir) => self.with_ptx_cache(PtxCache::new(dir)),
            None => self,
        }
    }

    /// The kernel for this configuration, compiled and loaded on first use.
    pub(super) fn function(
        &self,
        kernel: KernelSource,
        defines: Vec<(&'static str, usize)>,
        shared_bytes: usize,
        arch: &'static str,
    ) -> Result<CudaFunction, CudaError> {
        self.entry(kernel, defines, shared_bytes, arch, kernel.name())
            .map(|l| l.function)
    }

    /// Entry point `entry` of a program (a source with its defines), compiled and loaded on
    /// first use, with the compile's report.
    pub(super) fn entry(
        &self,
        kernel: KernelSource,
        defines: Vec<(&'static str, usize)>,
        shared_bytes: usize,
        arch: &'static str,
        entry: &'static str,
    ) -> Result<Loaded, CudaError> {
        let key = (kernel, defines, entry);
        if let Some(l) = self.functions.lock().map_err(poisoned)?.get(&key) {
            return Ok(l.clone());
        }
        let compiled = match &self.cache {
            Some(c) => c.get_or_compile(kernel, &key.1, arch)?,
            None => compile_program(kernel, &key.1, arch)?,
        };
        let report = compiled.report();
        let (module, from_cubin) = self.load(compiled, arch)?;
        let report = report.filter(|_| from_cubin);
        let function = module
            .load_function(entry)
            .map_err(driver_err("cuModuleGetFunction"))?;
        if shared_bytes > 0 {
            // Opened up to the device's limit: the V:N:M kernel's need grows with K (its
            // column locations are staged in shared memory), checked per launch.
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    self.info.max_shared_per_block,
                )
                .map_err(driver_err("cuFuncSetAttribute"))?;
        }
        let loaded = Loaded { function, report };
        self.functions
            .lock()
            .map_err(poisoned)?
            .insert(key, loaded.clone());
        Ok(loaded)
    }

    /// Loads a compiled program: its cubin where NVRTC made it for an architecture this device
    /// runs (no second compile by the driver), else its PTX through the driver's JIT, which
    /// is also the fallback where the driver refuses the cubin; says whether the cubin loaded.
    fn load(&self, compiled: Compiled, arch: &str) -> Result<(Arc<CudaModule>, bool), CudaError> {
        let mut refused = String::new();
        if let Some(cubin) = compiled.cubin.filter(|_| cubin_runs_on(arch, self.info.sm)) {
            match self.ctx.load_module(Ptx::from_binary(cubin)) {
                Ok(module) => return Ok((module, true)),
                Err(e) => refused = format!("; its {arch} cubin was refused first: {e}"),
            }
        }
        self.ctx
            .load_module(Ptx::from_src(compiled.ptx))
            .map(|module| (module, false))
            .map_err(|e| CudaError::Driver {
                op: "cuModuleLoadData",
                reason: format!("{e}{refused}"),
            })
    }

    /// Compiles and loads a V:N:M configuration without running it (to time compilation apart).
    pub fn prepare_vnm(&self, cfg: &VnmConfig) -> Result<(), CudaError> {
        cfg.validate()?;
        self.function(
            KernelSource::SpmmVnmF16,
            cfg.defines(),
            cfg.shared_bytes(),
            self.info.arch,
        )
        .map(|_| ())
    }

    /// Launches C = A·B with the V:N:M kernel in configuration `cfg`.
    pub fn launch_vnm(
        &self,
        a: &DeviceVnm,
        b: &DeviceMatrixF16,
        c: &mut DeviceMatrixF16,
        cfg: &VnmConfig,
    ) -> Result<(), CudaError> {
        let launch = VnmLaunch::new(a.dims, b.cols, b.ld, c.ld, cfg)?;
        let f = || {
            self.function(
                KernelSource::SpmmVnmF16,
                cfg.defines(),
                cfg.shared_bytes(),
                self.info.arch,
            )
        };
        let (grid, threads) = ((launch.grid.0, launch.grid.1, 1), launch.threads);
        // SAFETY (of the launch inside): the arguments match `spmm_vnm_f16(a_vals, a_meta,
        // col_loc, b, c, rows, n, ks, groups, m, k, ldb, ldc)`; `validate` bounds block size
        // and shared memory; A was packed by `pack_vnm` (rows × ks values, rows/16 × ks words,
        // V a multiple of 16, 2·ks a multiple of BK, checked by `VnmLaunch::new`); gathered
        // rows are < K or skipped; B and C are b.rows × b.ld and a.rows × c.ld (checked by
        // `launch_packed`), and the kernel guards columns ≥ n.
        self.launch_packed(
            f,
            a,
            b,
            c,
            grid,
            threads,
            launch.shared_bytes,
            &launch.ints,
            None,
            cfg,
        )
    }

    /// Launches a V:N:M kernel (`spmm_vnm_f16` or `spmm_vnm_wgmma_f16`, from `function`) on
    /// packed A (with the Hopper kernel's `hopper` arguments: its split-K workspace after C,
    /// its tensor map over B last), after checking the operands' shapes and the block's shared
    /// memory.
    #[allow(clippy::too_many_arguments)] // one launch's parts, each from its `*Launch`
    pub(super) fn launch_packed(
        &self,
        function: impl FnOnce() -> Result<CudaFunction, CudaError>,
        a: &DeviceVnm,
        b: &DeviceMatrixF16,
        c: &mut DeviceMatrixF16,
        grid: (u32, u32, u32),
        threads: u32,
        shared_bytes: usize,
        ints: &[i32],
        hopper: Option<(&CudaSlice<f32>, &TensorMapArg)>,
        cfg: &dyn std::fmt::Display,
    ) -> Result<(), CudaError> {
        check_product(a.dims.rows, a.dims.cols, b, c)?;
        if a.dims.rows == 0 || b.cols == 0 {
            return Ok(());
        }
        if shared_bytes > self.info.max_shared_per_block as usize {
            return Err(CudaError::Shape(format!(
                "{cfg} with {} column groups needs {shared_bytes} bytes of shared memory, the \
                 device has {}",
                a.dims.groups, self.info.max_shared_per_block
            )));
        }
        let f = function()?;
        let config = LaunchConfig {
            grid_dim: grid,
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared_bytes as u32,
        };
        let mut builder = self.stream.launch_builder(&f);
        builder
            .arg(&a.values)
            .arg(&a.meta)
            .arg(&a.col_loc)
            .arg(&b.data)
            .arg(&mut c.data);
        if let Some((ws, _)) = hopper {
            builder.arg(ws);
        }
        for x in ints {
            builder.arg(x);
        }
        if let Some((_, map)) = hopper {
            builder.arg(map);
        }
        // SAFETY: the callers (`launch_vnm`, `launch_wgmma`) state why their kernel's
        // arguments, packing and bounds hold; the operand shapes were checked above.
        unsafe { builder.launch(config) }.map_err(driver_err("cuLaunchKernel"))?;
        Ok(())
    }

    /// Uploads a CSR matrix for the CSR kernel.
    pub fn upload_csr(&self, a: &CsrMatrix) -> Result<DeviceCsr, CudaError> {
        let (row_ptr, col_idx, values) = csr_device_arrays(a)?;
        Ok(DeviceCsr {
            rows: a.rows(),
            cols: a.cols(),
            row_ptr: self.upload(&row_ptr)?,
            col_idx: self.upload(&col_idx)?,
            values: self.upload(&values)?,
        })
    }

    /// Launches C = A·B with the CSR kernel (fp32; B and C are `cols × n` and `rows × n`).
    pub fn launch_csr(
        &self,
        a: &DeviceCsr,
        b: &DeviceVecF32,
        c: &mut DeviceVecF32,
        n: usize,
        cfg: &CsrConfig,
    ) -> Result<(), CudaError> {
        let launch = CsrLaunch::new(a.rows, n, cfg)?;
        let (b, c) = (&b.data, &mut c.data);
        if b.len() < a.cols * n || c.len() < a.rows * n {
            return Err(CudaError::Shape(format!(
                "CSR {}x{} times {n} columns: B has {} and C {} elements",
                a.rows,
                a.cols,
                b.len(),
                c.len()
            )));
        }
        if a.rows == 0 || n == 0 {
            return Ok(());
        }
        let f = self.function(KernelSource::SpmmCsrF32, cfg.defines(), 0, self.info.arch)?;
        let config = LaunchConfig {
            grid_dim: (launch.grid.0, launch.grid.1, 1),
            block_dim: (launch.threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let [rows, n] = launch.ints;
        let mut builder = self.stream.launch_builder(&f);
        builder
            .arg(&a.row_ptr)
            .arg(&a.col_idx)
            .arg(&a.values)
            .arg(b)
            .arg(c)
            .arg(&rows)
            .arg(&n);
        // SAFETY: the arguments match `spmm_csr_f32`; the CSR arrays come from a checked
        // `CsrMatrix` (monotone row pointers, column indices < cols), B holds cols × n and C rows × n
        // values (checked above), and the kernel guards rows ≥ rows and columns ≥ n.
        unsafe { builder.launch(config) }.map_err(driver_err("cuLaunchKernel"))?;
        Ok(())
    }

    /// Times `run(i)`: `warmup` untimed calls, then `reps` samples, each one pair of device
    /// events around `batch` back-to-back calls (so that host launch overhead overlaps the
    /// device work instead of being timed), reported per call. `i` counts calls from 0, so that
    /// callers can rotate operand sets.
    pub fn time(
        &self,
        warmup: usize,
        reps: usize,
        batch: usize,
        mut run: impl FnMut(usize) -> Result<(), CudaError>,
    ) -> Result<Timing, CudaError> {
        let batch = batch.max(1);
        for i in 0..warmup {
            run(i)?;
        }
        self.synchronize()?;
        let mut samples = Vec::with_capacity(reps);
        let mut i = warmup;
        for _ in 0..reps {
            let start = self
                .stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_err("cuEventRecord"))?;
            for _ in 0..batch {
                run(i)?;
                i += 1;
            }
            let stop = self
                .stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_err("cuEventRecord"))?;
            stop.synchronize()
                .map_err(driver_err("cuEventSynchronize"))?;
            let ms = start
                .elapsed_ms(&stop)
                .map_err(driver_err("cuEventElapsedTime"))?;
            samples.push(f64::from(ms) * 1e3 / batch as f64);
        }
        Ok(Timing::from_samples(samples))
    }

    /// Waits for all work on the stream and reports any asynchronous kernel error.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }

    /// Host convenience: C = A·B (`b` is `a.cols() × n` row-major f32) with the V:N:M kernel.
    pub fn spmm_vnm(
        &self,
        a: &VnmMatrix,
        b: &[f32],
        n: usize,
        cfg: &VnmConfig,
    ) -> Result<Vec<f32>, CudaError> {
        let da = self.upload_vnm(a, cfg.bk)?;
        let db = self.upload_f16(b, a.cols(), n)?;
        let mut dc = self.zeros_f16(a.rows(), n)?;
        self.launch_vnm(&da, &db, &mut dc, cfg)?;
        self.synchronize()?;
        self.download_f16(&dc)
    }

    /// Host convenience: C = A·B with the CSR kernel, all fp32.
    pub fn spmm_csr(
        &self,
        a: &CsrMatrix,
        b: &[f32],
        n: usize,
        cfg: &CsrConfig,
    ) -> Result<Vec<f32>, CudaError> {
        if b.len() != a.cols() * n {
            return Err(CudaError::Shape(format!(
                "B has {} values, expected {}x{n}",
                b.len(),
                a.cols()
            )));
        }
        let da = self.upload_csr(a)?;
        let db = self.upload_f32(b)?;
        let mut dc = self.zeros_f32(a.rows() * n)?;
        self.launch_csr(&da, &db, &mut dc, n, cfg)?;
        self.synchronize()?;
        self.download_f32(&dc)
    }
}

pub(super) fn poisoned<T>(_: std::sync::PoisonError<T>) -> CudaError {
    CudaError::Driver {
        op: "kernel cache",
        reason: "a thread panicked while holding the kernel cache".into(),
    }
}

pub(crate) fn check_product(
    rows: usize,
    cols: usize,
    b: &DeviceMatrixF16,
    c: &DeviceMatrixF16,
) -> Result<(), CudaError> {
    if b.rows != cols || c.rows != rows || c.cols != b.cols {
        return Err(CudaError::Shape(format!(
            "A {rows}x{cols}, B {}x{}, C {}x{}",
            b.rows, b.cols, c.rows, c.cols
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cubin_runs_on;

    #[test]
    fn a_cubin_runs_on_its_major_version_from_its_minor_one_and_sm_90a_on_9_0_only() {
        assert!(cubin_runs_on("sm_80", (8, 0)));
        assert!(cubin_runs_on("sm_80", (8, 9)));
        assert!(!cubin_runs_on("sm_86", (8, 0)));
        assert!(cubin_runs_on("sm_90", (9, 0)));
        assert!(cubin_runs_on("sm_90a", (9, 0)));
        assert!(!cubin_runs_on("sm_90a", (9, 1)));
        // Blackwell compiles sm_90's PTX forward; no cubin of another major version runs.
        assert!(!cubin_runs_on("sm_90", (10, 0)));
        assert!(!cubin_runs_on("sm_80", (9, 0)));
        assert!(!cubin_runs_on("compute_90", (9, 0)));
        assert!(!cubin_runs_on("sm_x", (9, 0)));
    }
}
