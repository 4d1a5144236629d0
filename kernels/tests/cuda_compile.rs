//! CI's check of the CUDA backend without a GPU: every configuration of every CUDA kernel
//! compiles through NVRTC for sm_80 and sm_90, and the PTX cache stores each program once.
//! Skips, with the reason printed, when libnvrtc cannot be loaded.
#![cfg(feature = "cuda")]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use kernels::cuda::{
    all_configs, compile_program, compile_ptx, nvrtc_available, nvrtc_version, wgmma_configs,
    CsrConfig, KernelSource, PtxCache, CI_ARCHS, READING_DEFINES,
};

fn require_nvrtc(test: &str) {
    assert!(
        nvrtc_available(),
        "{test}: libnvrtc not found (pip install nvidia-cuda-nvrtc-cu12 and put \
         site-packages/nvidia/cuda_nvrtc/lib on LD_LIBRARY_PATH)"
    );
}

type Job = (KernelSource, Vec<(&'static str, usize)>, &'static str);

#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn every_configuration_compiles_for_sm80_and_sm90() {
    require_nvrtc("every_configuration_compiles_for_sm80_and_sm90");
    let (vnm, csr) = all_configs();
    // Each distinct program (source + defines) once per arch: configurations shared by
    // several spaces compile once.
    let mut jobs: BTreeSet<Job> = BTreeSet::new();
    for arch in CI_ARCHS {
        jobs.extend(
            vnm.iter()
                .map(|c| (KernelSource::SpmmVnmF16, c.defines(), arch)),
        );
        jobs.extend(
            csr.iter()
                .map(|c| (KernelSource::SpmmCsrF32, c.defines(), arch)),
        );
    }
    let jobs: Vec<Job> = jobs.into_iter().collect();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((kernel, defines, arch)) = jobs.get(i) else {
                    break;
                };
                let result = compile_ptx(*kernel, defines, arch).and_then(|ptx| {
                    let entry = format!(".entry {}", kernel.name());
                    let wants_sparse = *kernel == KernelSource::SpmmVnmF16;
                    if !ptx.contains(&entry)
                        || (wants_sparse && !ptx.contains("mma.sp::ordered_metadata.sync"))
                    {
                        Err(kernels::cuda::CudaError::Shape(format!(
                            "PTX lacks {entry} or mma.sp::ordered_metadata"
                        )))
                    } else {
                        Ok(())
                    }
                });
                if let Err(e) = result {
                    failures.lock().unwrap().push(e.to_string());
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "compiled {} programs ({} V:N:M and {} CSR configurations x {:?}) with NVRTC {:?} in {:.1} s on {threads} threads",
        jobs.len(),
        vnm.len(),
        csr.len(),
        CI_ARCHS,
        nvrtc_version().unwrap(),
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failed, first: {}",
        failures.len(),
        failures[0]
    );
}

/// The builds a device check makes beyond the configurations compile and assemble too: the
/// layout probe's reading switches (each alone and all together) and the benchmark's timing
/// ablations, on the largest tile (two consumer warpgroups, BN 256, a group kept in flight).
#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn hopper_reading_switches_and_ablations_compile_for_sm90a() {
    require_nvrtc("hopper_reading_switches_and_ablations_compile_for_sm90a");
    let mut builds: Vec<Vec<&'static str>> = READING_DEFINES.iter().map(|d| vec![*d]).collect();
    builds.push(READING_DEFINES.to_vec());
    builds.push(vec!["ABLATE_MMA"]);
    builds.push(vec!["ABLATE_B"]);
    builds.push(vec!["ABLATE_STORE"]);
    builds.push(vec!["EPILOGUE_U32"]);
    // With B unswizzled, swizzled, and by TMA (the probe runs all three).
    let configs = [(0, 0), (1, 0), (1, 1)].map(|(swizzle, tma)| {
        wgmma_configs(128)
            .into_iter()
            .find(|c| {
                c.bm == 128
                    && c.bn == 256
                    && c.keep == 1
                    && c.swizzle == swizzle
                    && c.tma == tma
                    && c.is_program_canonical()
            })
            .expect("a 128 x 256 configuration that keeps a group in flight")
    });
    for (cfg, extra) in configs
        .iter()
        .flat_map(|c| builds.iter().map(move |b| (c, b.clone())))
    {
        let mut defines = cfg.defines();
        defines.extend(extra.iter().map(|d| (*d, 1)));
        let compiled = compile_program(KernelSource::SpmmVnmWgmmaF16, &defines, "sm_90a")
            .unwrap_or_else(|e| panic!("{cfg} with {extra:?}: {e}"));
        let op = format!("wgmma.mma_async.sp.sync.aligned.m64n{}k32", cfg.bn);
        assert_eq!(
            compiled.ptx.contains(&op),
            extra != ["ABLATE_MMA"],
            "{cfg} with {extra:?}: {op} present only when the wgmmas are not ablated"
        );
        let r = compiled
            .report()
            .unwrap_or_else(|| panic!("{cfg} with {extra:?}: no ptxas report in NVRTC's log"));
        assert_eq!(r.spill_bytes, 0, "{cfg} with {extra:?}: spills");
    }
}

/// The Hopper kernel compiles for sm_90a (the only target with `wgmma`) in every
/// configuration, and NVRTC's ptxas assembles it (the inline PTX included: an instruction it
/// does not know fails the compile) without spills or serialised `wgmma`s.
#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn every_hopper_configuration_compiles_for_sm90a() {
    require_nvrtc("every_hopper_configuration_compiles_for_sm90a");
    // Each program once: the split-K factor and the raster are launch arguments.
    let configs: Vec<_> = wgmma_configs(128)
        .into_iter()
        .filter(|c| c.is_program_canonical())
        .collect();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let registers = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(cfg) = configs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let compiled = match compile_program(
                        KernelSource::SpmmVnmWgmmaF16,
                        &cfg.defines(),
                        "sm_90a",
                    ) {
                        Ok(compiled) => compiled,
                        Err(e) => {
                            failures.lock().unwrap().push(e.to_string());
                            continue;
                        }
                    };
                    let ptx = &compiled.ptx;
                    let op = format!("wgmma.mma_async.sp.sync.aligned.m64n{}k32", cfg.bn);
                    if !ptx.contains(".entry spmm_vnm_wgmma_f16") || !ptx.contains(&op) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{cfg}: PTX lacks the entry or {op}"));
                    }
                    // Multicast boxes of B iff clusters along the rows, multicast bulk
                    // copies of A iff clusters along n.
                    let boxes = ptx.contains(".tile.mbarrier::complete_tx::bytes.multicast");
                    let bulk = ptx.contains(".global.mbarrier::complete_tx::bytes.multicast");
                    if (boxes, bulk) != (cfg.cluster > 1, cfg.cluster_n > 1) {
                        failures.lock().unwrap().push(format!(
                            "{cfg}: multicast boxes (bulk copies) present iff CLUSTER \
                             (CLUSTER_N) > 1"
                        ));
                    }
                    if ptx.contains("cp.async.bulk.tensor.2d") != (cfg.tma == 1) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{cfg}: TMA tensor copies present iff TMA = 1"));
                    }
                    // A register count the setmaxnreg split does not fit hangs the device;
                    // a setmaxnreg ptxas would not honour is named in its log.
                    let ptxas_lines = compiled.log.lines().filter(|l| l.starts_with("ptxas"));
                    if ptxas_lines.clone().any(|l| l.contains("setmaxnreg")) {
                        failures.lock().unwrap().push(format!(
                            "{cfg}: {}",
                            ptxas_lines.collect::<Vec<_>>().join("\n")
                        ));
                    }
                    if let Some(Err(e)) = compiled
                        .report()
                        .map(|r| cfg.check_register_split(r.registers))
                    {
                        failures.lock().unwrap().push(format!("{cfg}: {e}"));
                    }
                    match compiled.report() {
                        Some(r) if r.spill_bytes == 0 && !r.wgmma_serialized => {
                            registers.lock().unwrap().push(r.registers)
                        }
                        Some(r) if r.wgmma_serialized => failures
                            .lock()
                            .unwrap()
                            .push(format!("{cfg}: ptxas serialised the wgmmas")),
                        Some(r) => failures
                            .lock()
                            .unwrap()
                            .push(format!("{cfg}: {} bytes spilled", r.spill_bytes)),
                        None => failures
                            .lock()
                            .unwrap()
                            .push(format!("{cfg}: no ptxas report in NVRTC's log")),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let registers = registers.into_inner().unwrap();
    eprintln!(
        "compiled {} Hopper configurations for sm_90a; assembled {} (registers {:?}..{:?})",
        configs.len(),
        registers.len(),
        registers.iter().min(),
        registers.iter().max()
    );
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn ptx_cache_compiles_once_per_program_and_arch() {
    require_nvrtc("ptx_cache_compiles_once_per_program_and_arch");
    let dir = std::env::temp_dir().join(format!("cotune-ptx-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = PtxCache::new(&dir);
    let cfg = CsrConfig {
        warps_per_block: 2,
        cols_per_lane: 1,
    };
    let files = |ext: &str| {
        let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        found.retain(|p| p.extension().is_some_and(|x| x == ext));
        found
    };
    let first = cache
        .get_or_compile(KernelSource::SpmmCsrF32, &cfg.defines(), "sm_80")
        .unwrap();
    // A real architecture's entry is its PTX, NVRTC's cubin of it and NVRTC's log, and
    // nothing else.
    let counts = || (files("ptx").len(), files("cubin").len(), files("log").len());
    assert_eq!(counts(), (1, 1, 1));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
    assert!(first.ptx.contains(".entry spmm_csr_f32"));
    let report = first.report().expect("ptxas's report");
    assert_eq!(&first.cubin.as_ref().unwrap()[..4], b"\x7fELF");
    assert_eq!(
        std::fs::read(&files("cubin")[0]).unwrap(),
        first.cubin.unwrap()
    );
    // A hit returns the stored files without compiling again: tamper with them and see them
    // back.
    std::fs::write(&files("ptx")[0], "// cached\n").unwrap();
    std::fs::write(&files("cubin")[0], b"cubin").unwrap();
    let hit = cache
        .get_or_compile(KernelSource::SpmmCsrF32, &cfg.defines(), "sm_80")
        .unwrap();
    assert_eq!(hit.ptx, "// cached\n");
    assert_eq!(hit.cubin.as_deref(), Some(&b"cubin"[..]));
    // ... the report too, from the stored log.
    assert_eq!(hit.report(), Some(report));
    // An entry without its cubin or log (a cache from before they were kept) is compiled
    // again.
    for ext in ["cubin", "log"] {
        std::fs::remove_file(&files(ext)[0]).unwrap();
        let again = cache
            .get_or_compile(KernelSource::SpmmCsrF32, &cfg.defines(), "sm_80")
            .unwrap();
        assert!(again.ptx.contains(".entry spmm_csr_f32"), "{ext}");
        assert_eq!(
            std::fs::read(&files("cubin")[0]).unwrap(),
            again.cubin.unwrap()
        );
        assert_eq!(counts(), (1, 1, 1));
    }
    cache
        .get_or_compile(KernelSource::SpmmCsrF32, &cfg.defines(), "sm_90")
        .unwrap();
    let other = CsrConfig {
        cols_per_lane: 2,
        ..cfg
    };
    cache
        .get_or_compile(KernelSource::SpmmCsrF32, &other.defines(), "sm_90")
        .unwrap();
    assert_eq!(
        files("ptx").len(),
        3,
        "arch and defines are part of the key"
    );
    // A virtual architecture has PTX and a log, no cubin and no ptxas report.
    let virtual_arch = cache
        .get_or_compile(KernelSource::SpmmCsrF32, &cfg.defines(), "compute_90")
        .unwrap();
    assert!(virtual_arch.cubin.is_none() && virtual_arch.ptx.contains(".target sm_90"));
    assert!(virtual_arch.report().is_none());
    assert_eq!(counts(), (4, 3, 4));
    let version = nvrtc_version().unwrap();
    let k = |arch: &str, v: (i32, i32)| {
        PtxCache::key(KernelSource::SpmmCsrF32, &cfg.defines(), arch, v)
    };
    assert_ne!(k("sm_80", version), k("sm_80", (version.0, version.1 + 1)));
    assert_eq!(k("sm_80", version), k("sm_80", version));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn the_hopper_kernel_compiles_to_an_sm_90a_cubin_beside_its_ptx() {
    require_nvrtc("the_hopper_kernel_compiles_to_an_sm_90a_cubin_beside_its_ptx");
    let cfg = wgmma_configs(128)[0];
    let compiled = compile_program(KernelSource::SpmmVnmWgmmaF16, &cfg.defines(), "sm_90a")
        .unwrap_or_else(|e| panic!("{cfg}: {e}"));
    assert!(compiled.ptx.contains(".target sm_90a"), "{cfg}");
    let cubin = compiled.cubin.as_ref().expect("a cubin for sm_90a");
    // An ELF object whose machine is CUDA (EM_CUDA = 190, little-endian at offset 18).
    assert_eq!(&cubin[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([cubin[18], cubin[19]]), 190);
    // ptxas's report is the product kernel's (the split-K reduction, 32 registers, comes
    // first in the log).
    let report = compiled.report().expect("ptxas's report in NVRTC's log");
    assert!(
        report.registers > 32 && report.spill_bytes == 0,
        "{report:?}"
    );
}

#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn compile_errors_name_the_kernel_and_configuration() {
    require_nvrtc("compile_errors_name_the_kernel_and_configuration");
    // Without its defines the source stops at its own #error.
    let err = compile_ptx(KernelSource::SpmmVnmF16, &[], "sm_90").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("spmm_vnm_f16") && text.contains("BM must be defined"),
        "{text}"
    );
}

#[test]
#[ignore = "needs libnvrtc (no GPU): .ci/run runs it with --ignored"]
fn ptxas_log_is_parsed() {
    let log = "ptxas info    : Compiling entry function 'spmm_vnm_f16' for 'sm_90'\n\
               ptxas info    : Function properties for spmm_vnm_f16\n    \
               0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n\
               ptxas info    : Used 244 registers, used 1 barriers\n";
    let r = kernels::cuda::parse_ptxas(log).unwrap();
    assert_eq!((r.registers, r.spill_bytes), (244, 8));
    assert!(!r.wgmma_serialized);
    let advised = format!(
        "{log}ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions \
         are serialized due to the presence of Extern calls in the function 'k'\n"
    );
    assert!(
        kernels::cuda::parse_ptxas(&advised)
            .unwrap()
            .wgmma_serialized
    );
    assert!(kernels::cuda::parse_ptxas("garbage").is_none());
}
