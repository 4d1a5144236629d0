//! The Hopper V:N:M kernel on a device (`spmm_vnm_wgmma_f16`, sparse `wgmma`, sm_90a only):
//! compile, launch (with the split-K workspace and reduction), and the host conveniences the
//! device tests use, the layout probe's variants among them.

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::device::{driver_err, poisoned, CudaDevice, Loaded};
use super::device_memory::{DeviceMatrixF16, DeviceVnm};
use super::source::KernelSource;
use super::tensor_map::TensorMapArg;
use super::{
    env_exclusions, env_reading, reading_defines, CudaError, PtxasReport, WgmmaConfig, WgmmaLaunch,
    WGMMA_REDUCE_THREADS,
};
use crate::VnmMatrix;

impl CudaDevice {
    /// Compiles and loads a Hopper configuration without running it; returns the report of
    /// the ptxas that made its cubin (this machine's NVRTC: registers, spills, serialised
    /// `wgmma`s).
    pub fn prepare_wgmma(&self, cfg: &WgmmaConfig) -> Result<Option<PtxasReport>, CudaError> {
        self.prepare_wgmma_with(cfg, Self::wgmma_reading(cfg)?)
    }

    /// [`CudaDevice::prepare_wgmma`] of every program among `configs` (each once: a canonical
    /// configuration stands for those that differ only in launch arguments), on up to 16
    /// threads (NVRTC is the slow part): each program, in `configs`' order, with its report or
    /// its error.
    pub fn prepare_wgmma_all(
        &self,
        configs: &[WgmmaConfig],
    ) -> Vec<(WgmmaConfig, Result<Option<PtxasReport>, CudaError>)> {
        let programs: Vec<WgmmaConfig> = configs
            .iter()
            .filter(|c| c.is_program_canonical())
            .copied()
            .collect();
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get().min(16));
        let chunk = programs.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let parts: Vec<_> = programs
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .map(|c| (*c, self.prepare_wgmma(c)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|p| p.join().expect("a compile thread panicked"))
                .collect()
        })
    }

    /// [`CudaDevice::prepare_wgmma`] with `extra` `#define`s in place of the environment's
    /// reading (as [`CudaDevice::launch_wgmma_with`] takes them).
    pub fn prepare_wgmma_with(
        &self,
        cfg: &WgmmaConfig,
        extra: Vec<(&'static str, usize)>,
    ) -> Result<Option<PtxasReport>, CudaError> {
        self.product_loaded(cfg, extra).map(|l| l.report)
    }

    /// The product kernel of `cfg` built with `extra` `#define`s, compiled and loaded on first
    /// use.
    fn product_function(
        &self,
        cfg: &WgmmaConfig,
        extra: Vec<(&'static str, usize)>,
    ) -> Result<CudaFunction, CudaError> {
        self.product_loaded(cfg, extra).map(|l| l.function)
    }

    /// [`CudaDevice::product_function`] with the compile's report. A cubin whose register
    /// count the kernel's `setmaxnreg` split does not fit is refused
    /// ([`WgmmaConfig::check_register_split`]): launched, it would hang the device's context.
    fn product_loaded(
        &self,
        cfg: &WgmmaConfig,
        extra: Vec<(&'static str, usize)>,
    ) -> Result<Loaded, CudaError> {
        cfg.validate()?;
        self.require_sm90(cfg)?;
        let mut defines = cfg.defines();
        defines.extend(extra);
        let kernel = KernelSource::SpmmVnmWgmmaF16;
        let loaded = self.entry(kernel, defines, cfg.shared_bytes(), "sm_90a", kernel.name())?;
        if let Some(report) = &loaded.report {
            cfg.check_register_split(report.registers)
                .map_err(|reason| CudaError::Config {
                    kernel: "spmm_vnm_wgmma_f16",
                    config: cfg.to_string(),
                    reason,
                })?;
        }
        Ok(loaded)
    }

    /// The `#define`s of the `wgmma` layout reading chosen through `COTUNE_WGMMA_READING`
    /// (none when unset: the kernel as written); a bad value is refused for `cfg`, as is a
    /// `COTUNE_WGMMA_EXCLUDE` that does not parse.
    pub fn wgmma_reading(cfg: &WgmmaConfig) -> Result<Vec<(&'static str, usize)>, CudaError> {
        env_exclusions()
            .and_then(|_| env_reading())
            .map(|r| reading_defines(&r))
            .map_err(|reason| CudaError::Config {
                kernel: "spmm_vnm_wgmma_f16",
                config: cfg.to_string(),
                reason,
            })
    }

    /// The Hopper kernel's instructions (`wgmma.mma_async.sp`, `setmaxnreg`) exist on sm_90a
    /// only: compute capability 9.0.
    fn require_sm90(&self, cfg: &WgmmaConfig) -> Result<(), CudaError> {
        if self.info.sm == (9, 0) {
            return Ok(());
        }
        Err(CudaError::Config {
            kernel: "spmm_vnm_wgmma_f16",
            config: cfg.to_string(),
            reason: format!(
                "needs an sm_90 device (wgmma.sp is sm_90a only), this one is sm_{}{}",
                self.info.sm.0, self.info.sm.1
            ),
        })
    }

    /// Launches C = A·B with the Hopper V:N:M kernel (sparse `wgmma`) in configuration `cfg`;
    /// A packed for `cfg.bk` (see [`CudaDevice::upload_vnm`]).
    pub fn launch_wgmma(
        &self,
        a: &DeviceVnm,
        b: &DeviceMatrixF16,
        c: &mut DeviceMatrixF16,
        cfg: &WgmmaConfig,
    ) -> Result<(), CudaError> {
        self.launch_wgmma_with(a, b, c, cfg, &Self::wgmma_reading(cfg)?)
    }

    /// [`CudaDevice::launch_wgmma`] with `extra` `#define`s on top of the configuration's, in
    /// place of the environment's reading: the layout probe's readings
    /// ([`crate::cuda::READING_DEFINES`]) and the benchmark's timing ablations (`ABLATE_MMA`,
    /// `ABLATE_B`; see the kernel's source).
    pub fn launch_wgmma_with(
        &self,
        a: &DeviceVnm,
        b: &DeviceMatrixF16,
        c: &mut DeviceMatrixF16,
        cfg: &WgmmaConfig,
        extra: &[(&'static str, usize)],
    ) -> Result<(), CudaError> {
        self.require_sm90(cfg)?;
        let entry = |name| {
            let mut defines = cfg.defines();
            defines.extend_from_slice(extra);
            let shared = if name == "spmm_vnm_wgmma_f16" {
                cfg.shared_bytes()
            } else {
                0
            };
            self.entry(
                KernelSource::SpmmVnmWgmmaF16,
                defines,
                shared,
                "sm_90a",
                name,
            )
            .map(|l| l.function)
        };
        let resident = self.resident_clusters(cfg, || entry("spmm_vnm_wgmma_f16"))?;
        let launch = WgmmaLaunch::new(a.dims, b.cols, b.ld, c.ld, cfg, resident)?;
        // The split-K workspace (at least one element: the kernel takes its pointer always).
        let mut workspace = self.workspace.lock().map_err(poisoned)?;
        let need = launch.workspace.max(1);
        if workspace.as_ref().is_none_or(|w| w.len() < need) {
            let fresh = self
                .stream
                .alloc_zeros::<f32>(need)
                .map_err(driver_err("cuMemAlloc"))?;
            *workspace = Some(fresh);
        }
        let ws = workspace.as_ref().expect("allocated above");
        // B's tensor map for TMA configurations (M = 4, checked by `WgmmaLaunch::new`), boxes
        // of a cluster's block's share of a stage's rows; unused zeros otherwise.
        let map = if cfg.tma == 1 {
            self.tensor_map_b(b, cfg.bk / cfg.cluster)?
        } else {
            TensorMapArg::unused()
        };
        // SAFETY (of the launch inside): the arguments match `spmm_vnm_wgmma_f16(a_vals,
        // a_meta, col_loc, b, c, ws, rows, n, ks, groups, m, k, ldb, ldc, v, splits,
        // raster, tmap_b)`; `validate` bounds the block size and shared memory; A was packed by
        // `pack_vnm` (2·ks a multiple of BK and BM dividing V, checked by `WgmmaLaunch::new`,
        // so a block's rows share their column locations); gathered rows are < K or skipped; B
        // and C are b.rows × b.ld and a.rows × c.ld with ld multiples of 8 (checked); the
        // blocks walk only the tiles of the rows, n and splits passed (one or several each, in
        // either raster) and guard columns ≥ n; with clusters the grid is a whole number of
        // them (the kernel's `__cluster_dims__`), a block past the rows copies a valid row
        // block's A and stores nothing, one past the columns gathers zeros and stores
        // nothing; with split-K `ws` holds splits × rows × ldc floats (checked above); with TMA the map describes this B (its boxes' out-of-bounds
        // elements are zeros, not reads), and M = 4 makes a k-tile's gathered rows B's
        // consecutive rows.
        self.launch_packed(
            || entry("spmm_vnm_wgmma_f16"),
            a,
            b,
            c,
            (launch.blocks, 1, 1),
            launch.threads,
            launch.shared_bytes,
            &launch.ints,
            Some((ws, &map)),
            cfg,
        )?;
        if launch.reduce_blocks > 0 {
            let f = entry("spmm_vnm_wgmma_reduce_f16")?;
            let [rows, n, ldc, splits] = [0, 1, 7, 9].map(|i| launch.ints[i]);
            let config = LaunchConfig {
                grid_dim: (launch.reduce_blocks, 1, 1),
                block_dim: (WGMMA_REDUCE_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut builder = self.stream.launch_builder(&f);
            builder
                .arg(ws)
                .arg(&mut c.data)
                .arg(&rows)
                .arg(&n)
                .arg(&ldc)
                .arg(&splits);
            // SAFETY: the arguments match `spmm_vnm_wgmma_reduce_f16(ws, c, rows, n, ldc,
            // splits)`; `ws` holds splits × rows × ldc floats, all of columns < n written by the
            // product above on this stream; C is a.rows × c.ld (checked by `launch_packed`);
            // the kernel guards elements past rows × n.
            unsafe { builder.launch(config) }.map_err(driver_err("cuLaunchKernel"))?;
        }
        Ok(())
    }

    /// How many clusters of `cfg` (blocks, without clusters) the device runs at once: what a
    /// persistent grid of `cfg` is sized by ([`WgmmaLaunch::new`]).
    pub fn wgmma_resident_clusters(&self, cfg: &WgmmaConfig) -> Result<usize, CudaError> {
        cfg.validate()?;
        self.require_sm90(cfg)?;
        let reading = Self::wgmma_reading(cfg)?;
        self.resident_clusters(cfg, || self.product_function(cfg, reading))
    }

    /// How many clusters of `cfg` the device runs at once: one block per SM, and for a
    /// persistent grid of clusters as many as the driver places (`cuOccupancyMaxActiveClusters`
    /// on `function`, the compiled product kernel; asked once per program): a GPC whose SMs are
    /// not a multiple of the cluster's size leaves some out, so ⌊SMs / size⌋ clusters may be
    /// more than fit, and a persistent grid that large would run its last ones as a second
    /// wave.
    fn resident_clusters(
        &self,
        cfg: &WgmmaConfig,
        function: impl FnOnce() -> Result<CudaFunction, CudaError>,
    ) -> Result<usize, CudaError> {
        let bound = cfg.resident_clusters(self.info.multiprocessors as usize);
        if cfg.cluster_size() == 1 || cfg.persistent == 0 {
            return Ok(bound);
        }
        let key = cfg.defines();
        if let Some(&n) = self.active_clusters.lock().map_err(poisoned)?.get(&key) {
            return Ok(n);
        }
        let config = LaunchConfig {
            grid_dim: (cfg.cluster_size() as u32, 1, 1),
            block_dim: (cfg.threads() as u32, 1, 1),
            shared_mem_bytes: cfg.shared_bytes() as u32,
        };
        let placed = function()?
            .occupancy_max_active_clusters(config, &self.stream)
            .map_err(driver_err("cuOccupancyMaxActiveClusters"))? as usize;
        // None placed: the launch itself will say why (shared memory, registers).
        let n = bound.min(placed.max(1));
        self.active_clusters
            .lock()
            .map_err(poisoned)?
            .insert(key, n);
        Ok(n)
    }

    /// Host convenience: C = A·B with the Hopper kernel (fp16 in, fp32 accumulate, fp16 out),
    /// returned as f32.
    pub fn spmm_wgmma(
        &self,
        a: &VnmMatrix,
        b: &[f32],
        n: usize,
        cfg: &WgmmaConfig,
    ) -> Result<Vec<f32>, CudaError> {
        self.spmm_wgmma_variant(a, b, n, cfg, &Self::wgmma_reading(cfg)?)
    }

    /// [`CudaDevice::spmm_wgmma`] built with `extra` `#define`s in place of the environment's
    /// reading: what the layout probe (`kernels/tests/cuda_device_wgmma.rs`) runs to see which
    /// reading of the ISA the device takes.
    pub fn spmm_wgmma_variant(
        &self,
        a: &VnmMatrix,
        b: &[f32],
        n: usize,
        cfg: &WgmmaConfig,
        extra: &[(&'static str, usize)],
    ) -> Result<Vec<f32>, CudaError> {
        let da = self.upload_vnm(a, cfg.bk)?;
        let db = self.upload_f16(b, a.cols(), n)?;
        let mut dc = self.zeros_f16(a.rows(), n)?;
        self.launch_wgmma_with(&da, &db, &mut dc, cfg, extra)?;
        self.synchronize()?;
        self.download_f16(&dc)
    }
}
