//! The Hopper V:N:M kernel (sparse `wgmma`, sm_90a) on the device against the CPU reference.
//! It needs an sm_90 GPU, so these tests are `#[ignore]`d: `scripts/device-check.sh` runs them.
//! Inputs are multiples of 1/8 (exact in fp16, their products and sums exact in f32), so
//! results must equal the reference up to the final fp16 rounding.
//!
//! The emulator runs the same source in CI with the PTX ISA's layouts as read in
//! `kernels/cuda/NOTES.md`; `wgmma_layout_probe` says, when the device disagrees, which of the
//! readings the ISA leaves open the hardware takes. The other tests build the kernel with the
//! reading in `COTUNE_WGMMA_READING` (the device check sets it to the probe's answer).
#![cfg(feature = "cuda")]

use kernels::cuda::{
    env_exclusions, exact_values, format_reading, ptxas_summary, random_vnm, reading_defines,
    reading_variants, vnm_from_nm, wgmma_configs, CudaDevice, Gpu, WgmmaConfig, WgmmaExclusions,
};
use kernels::{build_mask, spmm_reference, NmMatrix, Pattern, SparseMatrix, VnmMatrix};

fn device(test: &str) -> CudaDevice {
    CudaDevice::new(0)
        .map(CudaDevice::with_env_ptx_cache)
        .unwrap_or_else(|e| panic!("{test} needs a CUDA device: {e}"))
}

/// The configurations for blocks of `v` rows less those `COTUNE_WGMMA_EXCLUDE` leaves out
/// (the device check excludes the features whose own test, [`wgmma_feature`], failed).
fn configs(v: usize) -> Vec<WgmmaConfig> {
    let excluded = env_exclusions().unwrap();
    wgmma_configs(v)
        .into_iter()
        .filter(|c| !excluded.excludes(c))
        .collect()
}

fn reference(a: &SparseMatrix, b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0; a.rows() * n];
    spmm_reference(a, b, n, &mut c).unwrap();
    c
}

/// The first element outside the fp16 rounding of the exact result (half an ulp), described.
fn fp16_mismatch(got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} elements, want {}", got.len(), want.len()));
    }
    let bad = got
        .iter()
        .zip(want)
        .position(|(g, w)| (g - w).abs() > w.abs() / 2048.0 + 1e-6)?;
    let wrong = got
        .iter()
        .zip(want)
        .filter(|(g, w)| (*g - *w).abs() > w.abs() / 2048.0 + 1e-6)
        .count();
    Some(format!(
        "element {bad}: got {}, want {} ({wrong} of {} wrong)",
        got[bad],
        want[bad],
        got.len()
    ))
}

/// Compiles `configs` on all cores at once (NVRTC is the slow part), each program once (the
/// split-K factor and the raster are launch arguments), and says what this machine's ptxas
/// made of them: a compiler other than the one CI checks with may spill or serialise the
/// `wgmma`s (which costs speed, not correctness).
fn prepare_all(dev: &CudaDevice, configs: &[WgmmaConfig]) {
    let start = std::time::Instant::now();
    let reports: Vec<_> = dev
        .prepare_wgmma_all(configs)
        .into_iter()
        .map(|(c, r)| (c.to_string(), r.unwrap_or_else(|e| panic!("{c}: {e}"))))
        .collect();
    // What a device check's compile costs (NVRTC there, cubins loaded; programs already in
    // $COTUNE_PTX_CACHE are only loaded).
    eprintln!(
        "compiled and loaded {} programs in {:.1} s",
        reports.len(),
        start.elapsed().as_secs_f64()
    );
    eprintln!("device {}", ptxas_summary(&reports));
}

/// [`check`] against `a`'s own product.
fn check_vnm(dev: &CudaDevice, a: &VnmMatrix, n: usize, configs: &[WgmmaConfig], seed: u64) {
    check(dev, a, &SparseMatrix::Vnm(a.clone()), n, configs, seed);
}

/// Runs every configuration that serves `a` (TMA: M = 4 only) on it, those copying B by TMA
/// last (a malformed tensor map would fault the context for every later launch), and reports
/// all that disagree or fail, not only the first.
fn check(
    dev: &CudaDevice,
    a: &VnmMatrix,
    want_of: &SparseMatrix,
    n: usize,
    configs: &[WgmmaConfig],
    seed: u64,
) {
    let b = exact_values(a.cols() * n, seed);
    let want = reference(want_of, &b, n);
    let mut failures = vec![];
    let mut configs: Vec<&WgmmaConfig> = configs
        .iter()
        .filter(|c| c.tma == 0 || a.m() == 4)
        .collect();
    configs.sort_by_key(|c| c.tma);
    for cfg in &configs {
        let got = dev.spmm_wgmma(a, &b, n, cfg);
        if let Some(d) = got.map_or_else(|e| Some(e.to_string()), |got| fp16_mismatch(&got, &want))
        {
            failures.push(format!(
                "{}x{} V={} M={} n={n} [{cfg}]: {d}",
                a.rows(),
                a.cols(),
                a.v(),
                a.m()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} configurations disagree:\n{}",
        failures.len(),
        configs.len(),
        failures.join("\n")
    );
}

#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_every_configuration_matches_reference() {
    let dev = device("wgmma_every_configuration_matches_reference");
    for (i, v) in [64, 128].into_iter().enumerate() {
        // TMA and pairs along n have their own tests.
        let configs: Vec<WgmmaConfig> = configs(v)
            .into_iter()
            .filter(|c| c.tma == 0 && c.cluster_n == 1)
            .collect();
        prepare_all(&dev, &configs);
        // K not a multiple of M and several k-tiles deep; n not a multiple of 8 nor of any BN.
        let a = random_vnm(2 * v, 1000, v, 10, i as u64).unwrap();
        check_vnm(&dev, &a, 70, &configs, 10 + i as u64);
    }
}

#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_matches_reference_on_awkward_shapes() {
    let dev = device("wgmma_matches_reference_on_awkward_shapes");
    let shapes = [
        // rows, cols, v, m, n
        (64, 1, 64, 4, 1),
        (64, 7, 64, 5, 3),
        (128, 257, 64, 16, 33),
        (128, 770, 128, 40, 64),
        (256, 333, 128, 100, 17),
        (256, 768, 64, 8, 200),
        (128, 3000, 128, 8, 300),
    ];
    for (i, &(rows, cols, v, m, n)) in shapes.iter().enumerate() {
        let a = random_vnm(rows, cols, v, m, 100 + i as u64).unwrap();
        // Every tile width and depth, the shallowest and deepest pipelines (TMA and pairs
        // along n have their tests).
        let configs: Vec<WgmmaConfig> = configs(v)
            .into_iter()
            .filter(|c| (c.stages == 2 || c.stages == 4) && c.tma == 0 && c.cluster_n == 1)
            .collect();
        check_vnm(&dev, &a, n, &configs, 200 + i as u64);
    }
}

/// Every configuration copying B by TMA (2:4 only, as V:2:4) against the reference, with K and
/// n ragged (boxes partly and wholly outside B read zeros), then awkward shapes on the
/// shallowest and deepest pipelines. Only here: the device check runs this test in a process of
/// its own, since a malformed tensor map would fault the context for every later launch.
#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_tma_every_configuration_matches_reference() {
    let dev = device("wgmma_tma_every_configuration_matches_reference");
    // Clusters have their own test.
    let tma = |v| -> Vec<WgmmaConfig> {
        configs(v)
            .into_iter()
            .filter(|c| c.tma == 1 && c.cluster == 1)
            .collect()
    };
    for (i, v) in [64, 128].into_iter().enumerate() {
        let configs = tma(v);
        prepare_all(&dev, &configs);
        let a = random_vnm(2 * v, 999, v, 4, 20 + i as u64).unwrap();
        check_vnm(&dev, &a, 70, &configs, 30 + i as u64);
    }
    // rows, cols, v, n
    for (i, (rows, cols, v, n)) in [(64, 1, 64, 1), (128, 257, 64, 33), (256, 3001, 128, 300)]
        .into_iter()
        .enumerate()
    {
        let a = random_vnm(rows, cols, v, 4, 40 + i as u64).unwrap();
        let configs: Vec<WgmmaConfig> = tma(v)
            .into_iter()
            .filter(|c| c.stages == 2 || c.stages == 4)
            .collect();
        check_vnm(&dev, &a, n, &configs, 50 + i as u64);
    }
}

/// The configurations in clusters of two blocks (B's boxes multicast to the pair of row blocks,
/// 2:4 only) against the reference on the shallowest and deepest pipelines, with an odd number
/// of row blocks (the last pair's second block past the rows), K and n ragged, and more tiles
/// than SMs for the persistent ones. In a process of its own, after the TMA test: a cluster
/// launch the device refuses, or a multicast that never completes, must cost only this feature.
#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_cluster2_every_configuration_matches_reference() {
    check_clusters(
        "wgmma_cluster2_every_configuration_matches_reference",
        2,
        Along::Rows,
        &[2, 4],
    );
}

/// As [`wgmma_cluster2_every_configuration_matches_reference`], in clusters of four (3 row
/// blocks of 128 and 5 of 64 leave one and three blocks past the rows), on 4-stage pipelines
/// only (the pairs' test covers the stage counts; this one the fourfold multicast and
/// barriers).
#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_cluster4_every_configuration_matches_reference() {
    check_clusters(
        "wgmma_cluster4_every_configuration_matches_reference",
        4,
        Along::Rows,
        &[4],
    );
}

/// The configurations in pairs along n (A's and the metadata's bulk copies multicast to two
/// column tiles, any M; here 2:8) against the reference on the shallowest and deepest
/// pipelines, with odd numbers of column tiles (the last pair's second block past n), K and
/// n ragged, and more tiles than SMs for the persistent ones. In a process of its own, as the
/// clusters along the rows: a refused cluster launch or a multicast that never completes must
/// cost only this feature (the main correctness test leaves these out).
#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_cluster_n2_every_configuration_matches_reference() {
    check_clusters(
        "wgmma_cluster_n2_every_configuration_matches_reference",
        2,
        Along::Columns,
        &[2, 4],
    );
}

/// The dimension of C a thread-block cluster spans: its row blocks (`CLUSTER`, sharing B's
/// boxes: TMA, 2:4) or its column tiles (`CLUSTER_N`, sharing A's bulk copies).
#[derive(Clone, Copy, PartialEq)]
enum Along {
    Rows,
    Columns,
}

/// The configurations in clusters of `size` blocks `along` one dimension with any of
/// `stages`, against the reference.
fn check_clusters(test: &str, size: usize, along: Along, stages: &[usize]) {
    let dev = device(test);
    let clustered = |v| -> Vec<WgmmaConfig> {
        configs(v)
            .into_iter()
            .filter(|c| {
                let blocks = if along == Along::Rows {
                    c.cluster
                } else {
                    c.cluster_n
                };
                blocks == size && stages.contains(&c.stages)
            })
            .collect()
    };
    for v in [64, 128] {
        prepare_all(&dev, &clustered(v));
    }
    // What persistent grids of clusters are sized by (the driver's count, at most SMs /
    // size), for the console: fewer means a GPC leaves SMs out of clusters.
    let sms = dev.info().multiprocessors as usize;
    for cfg in clustered(128).iter().filter(|c| c.persistent == 1).take(2) {
        let clusters = dev.wgmma_resident_clusters(cfg).unwrap();
        println!(
            "{cfg}: {clusters} clusters of {size} at once on {sms} SMs (at most {})",
            sms / size
        );
    }
    // rows, cols, v, n: 3 row blocks of 128 (6 of 64); 5 of 64; 2048 x 2200 has more
    // tiles than an H200 has SMs (persistent clusters walk several). Along n, 330 columns
    // are 6, 3 and 2 tiles of 64, 128 and 256 (the last pair of 128's half past n), 33 one
    // tile of any width, 2,200 35 and 9 tiles of 64 and 256.
    let first_n = if along == Along::Rows { 70 } else { 330 };
    let m = if along == Along::Rows { 4 } else { 8 };
    for (i, (rows, cols, v, n)) in [
        (384, 999, 128, first_n),
        (320, 257, 64, 33),
        (2048, 999, 128, 2200),
    ]
    .into_iter()
    .enumerate()
    {
        let a = random_vnm(rows, cols, v, m, 70 + i as u64).unwrap();
        let configs = clustered(v);
        let configs: Vec<WgmmaConfig> = if rows > 1024 {
            configs.into_iter().filter(|c| c.persistent == 1).collect()
        } else {
            configs
        };
        check_vnm(&dev, &a, n, &configs, 80 + i as u64);
    }
}

/// The plainest configuration: the smallest tile, two stages, no feature on (the layout
/// probe's).
const PLAIN: WgmmaConfig = WgmmaConfig {
    bm: 64,
    bn: 64,
    bk: 64,
    stages: 2,
    keep: 0,
    split_k: 1,
    bulk: 0,
    swizzle: 0,
    tma: 0,
    raster: 0,
    persistent: 0,
    cluster: 1,
    cluster_n: 1,
    pingpong: 0,
};

/// The features `scripts/device-check.sh` tests one by one (its list is this one), in the
/// syntax of `COTUNE_WGMMA_EXCLUDE`: two consumer warpgroups (and `setmaxnreg`), bulk copies,
/// the 128-byte swizzle, wgmma groups kept in flight, split-K, persistent blocks, TMA, clusters
/// of two and of four multicasting TMA boxes, pairs along n multicasting A's bulk copies,
/// ping-pong consumers.
const FEATURES: [&str; 11] = [
    "bm=128",
    "bulk=1",
    "swizzle=1",
    "keep=1",
    "split_k=2,split_k=4",
    "persistent=1",
    "tma=1",
    "cluster=2",
    "cluster=4",
    "cluster_n=2",
    "pingpong=1",
];

/// The configurations [`wgmma_feature`] runs for `feature`: for each listed value and each
/// tile of 64 or 128 rows by 64 or 256 columns, the configuration with it that differs least
/// from [`PLAIN`] with 3 stages (so that `keep` = 1 has one that differs in it alone).
fn feature_configs(feature: &WgmmaExclusions) -> Vec<WgmmaConfig> {
    let plain = WgmmaConfig { stages: 3, ..PLAIN };
    let distance = |c: &WgmmaConfig| {
        // bm and bn (the first two) pick the tile; the rest should be the plain ones.
        let (a, b) = (c.values(), plain.values());
        a.iter().zip(b).skip(2).filter(|(x, y)| **x != *y).count()
    };
    let mut picked: std::collections::BTreeMap<_, WgmmaConfig> = Default::default();
    for c in configs(128).into_iter().filter(|c| c.bn != 128) {
        let Some(value) = feature.first_match(&c) else {
            continue;
        };
        let slot = picked.entry((value, c.bm, c.bn)).or_insert(c);
        if distance(&c) < distance(slot) {
            *slot = c;
        }
    }
    picked.into_values().collect()
}

#[test]
fn each_feature_is_tested_on_its_nearest_configurations() {
    for text in FEATURES {
        let feature = WgmmaExclusions::parse(text).unwrap();
        let configs = feature_configs(&feature);
        // Per value, the four tiles (two where the value is the tile's height; for
        // ping-pong the one of BM 128 and BN <= 128).
        let tiles = match text {
            "pingpong=1" => 1,
            _ if text.starts_with("bm=") => 2,
            _ => 4,
        };
        assert_eq!(configs.len(), tiles * text.split(',').count(), "{text}");
        assert!(configs.iter().all(|c| feature.excludes(c)), "{text}");
        // Only what the feature needs differs from the plain configuration.
        let needs = match text {
            "bm=128" => 0,
            "pingpong=1" => 2,              // with persistent blocks
            "tma=1" => 3,                   // with the swizzle and bulk copies
            "cluster=2" | "cluster=4" => 4, // with TMA
            "cluster_n=2" => 2,             // with bulk copies
            _ => 1,
        };
        for c in &configs {
            let on = [
                c.keep,
                c.split_k.min(2) - 1,
                c.bulk,
                c.swizzle,
                c.tma,
                c.persistent,
                c.cluster.min(2) - 1,
                c.cluster_n.min(2) - 1,
                c.pingpong,
            ];
            let off = [c.bk == 64, c.stages == 3, c.raster == 0];
            assert_eq!(on.iter().sum::<usize>(), needs, "{text}: [{c}]");
            assert!(off.iter().all(|x| *x), "{text}: [{c}]");
        }
    }
}

/// One feature of the kernel, named by `COTUNE_WGMMA_FEATURE` in the syntax of
/// `COTUNE_WGMMA_EXCLUDE` (`bulk=1`; `split_k=2,split_k=4`: either), on its
/// [`feature_configs`] with V:2:8 (V:2:4 for `tma=1`) and K and n ragged (for persistent
/// blocks, more tiles than the device has SMs). The device check
/// runs this once per [`FEATURES`] entry, each in a process of its own under a short timeout
/// (a fault ends the context, a wrong transaction count hangs), and leaves the features that
/// fail out of everything after (`COTUNE_WGMMA_EXCLUDE`).
#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_feature() {
    let dev = device("wgmma_feature");
    let text = std::env::var("COTUNE_WGMMA_FEATURE").expect("COTUNE_WGMMA_FEATURE, e.g. bulk=1");
    let feature = WgmmaExclusions::parse(&text).unwrap();
    let configs = feature_configs(&feature);
    assert!(!configs.is_empty(), "no configuration has {feature}");
    for c in &configs {
        println!("wgmma feature {feature}: [{c}]");
    }
    prepare_all(&dev, &configs);
    let m = if configs.iter().any(|c| c.tma == 1) {
        4
    } else {
        8
    };
    // Persistent blocks walk several tiles only where there are more tiles than SMs (132 on
    // an H200): 2048 rows by 2,200 columns are 144 of the largest tiles (128 × 256), 560 of
    // ping-pong's (128 × 64: its warpgroups take ~4 tiles per block in turn); for pairs along
    // n, an odd number of column tiles (35 of 64 columns, 9 of 256: the last pair's second
    // block past n).
    let text = feature.to_string();
    let (rows, n) = if ["persistent", "pingpong", "cluster_n"]
        .iter()
        .any(|f| text.contains(f))
    {
        (2048, 2200)
    } else {
        (256, 70)
    };
    let a = random_vnm(rows, 999, 128, m, 60).unwrap();
    check_vnm(&dev, &a, n, &configs, 61);
    println!(
        "wgmma feature {feature}: {} configurations agree",
        configs.len()
    );
}

#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn two_four_runs_on_wgmma_with_m4() {
    let dev = device("two_four_runs_on_wgmma_with_m4");
    let (rows, cols, n) = (256, 300, 90);
    let vals = exact_values(rows * cols, 7);
    let scores: Vec<f32> = vals.iter().map(|v| v.abs()).collect();
    let mask = build_mask(&Pattern::Nm { n: 2, m: 4 }, &scores, rows, cols).unwrap();
    let nm = NmMatrix::from_masked(&vals, &mask, 2, 4).unwrap();
    for v in [64, 128] {
        let a = vnm_from_nm(&nm, v).unwrap();
        // TMA and pairs along n have their own tests.
        let configs: Vec<WgmmaConfig> = configs(v)
            .into_iter()
            .filter(|c| c.stages == 3 && c.tma == 0 && c.cluster_n == 1)
            .collect();
        check(&dev, &a, &SparseMatrix::Nm(nm.clone()), n, &configs, 8);
    }
}

/// Which reading of the layouts the ISA leaves open the device takes: the kernel as written
/// (the emulator's reading) first, then every combination of the switches in
/// `kernels::cuda::READING_DEFINES` (`B_DESC_SWAP`: the descriptor's two byte offsets swapped; `META_SWAP`:
/// threads 0 and 1 of a quad trade metadata words; `META_XHALF`: a word holds one row's 32
/// columns; `A_SWAP`: A fragment registers 1 and 2 trade places), stopping at the first that
/// agrees with the reference. Prints one line per reading tried and writes the agreeing one
/// to `$COTUNE_BENCH_OUT/wgmma-reading.txt` (`none`: as written), which the device check
/// passes to its later steps as `COTUNE_WGMMA_READING`. Fails only if no reading agrees.
#[test]
#[ignore = "needs an sm_90 GPU: scripts/device-check.sh runs it"]
fn wgmma_layout_probe() {
    let dev = device("wgmma_layout_probe");
    let cfg = PLAIN;
    let a = random_vnm(128, 300, 64, 8, 3).unwrap();
    let n = 64;
    let b = exact_values(a.cols() * n, 4);
    let want = reference(&SparseMatrix::Vnm(a.clone()), &b, n);
    let mut found = None;
    for reading in reading_variants() {
        let got = dev.spmm_wgmma_variant(&a, &b, n, &cfg, &reading_defines(&reading));
        let verdict = match &got {
            Err(e) => format!("error: {e}"),
            Ok(got) => fp16_mismatch(got, &want).unwrap_or_else(|| "agrees".into()),
        };
        println!("wgmma layout probe {}: {verdict}", format_reading(&reading));
        if verdict == "agrees" {
            found = Some(reading);
            break;
        }
    }
    let Some(reading) = found else {
        panic!("no reading of the layouts agrees with the reference");
    };
    println!("wgmma reading: {}", format_reading(&reading));
    if let Ok(out) = std::env::var("COTUNE_BENCH_OUT") {
        std::fs::write(
            std::path::Path::new(&out).join("wgmma-reading.txt"),
            format_reading(&reading),
        )
        .unwrap();
    }
    // B with the 128-byte swizzle (two 64-column groups, so both offsets matter) under the
    // reading found and with B_DESC_SWAP the other way: only reported (the correctness tests
    // judge every swizzled configuration), so that a device whose swizzled descriptor takes
    // the offsets' other reading is seen in one run.
    let swizzled = WgmmaConfig {
        bn: 128,
        swizzle: 1,
        ..cfg
    };
    let n = 2 * 64 + 8;
    let b = exact_values(a.cols() * n, 5);
    let want = reference(&SparseMatrix::Vnm(a.clone()), &b, n);
    let mut flipped: Vec<&'static str> = reading.clone();
    match flipped.iter().position(|d| *d == "B_DESC_SWAP") {
        Some(i) => {
            flipped.remove(i);
        }
        None => flipped.insert(0, "B_DESC_SWAP"),
    }
    for r in [&reading, &flipped] {
        let verdict = match dev.spmm_wgmma_variant(&a, &b, n, &swizzled, &reading_defines(r)) {
            Err(e) => format!("error: {e}"),
            Ok(got) => fp16_mismatch(&got, &want).unwrap_or_else(|| "agrees".into()),
        };
        println!(
            "wgmma layout probe, 128-byte swizzled B, {}: {verdict}",
            format_reading(r)
        );
    }
    // B by TMA boxes (2:4 as V:2:4, same tile) under the reading found: the TMA unit's
    // swizzle against the one the gather writes. Reported only, and last (a malformed tensor
    // map would fault the context).
    let boxed = WgmmaConfig {
        bulk: 1,
        tma: 1,
        ..swizzled
    };
    let a = random_vnm(128, 301, 64, 4, 6).unwrap();
    let b = exact_values(a.cols() * n, 7);
    let want = reference(&SparseMatrix::Vnm(a.clone()), &b, n);
    let verdict = match dev.spmm_wgmma_variant(&a, &b, n, &boxed, &reading_defines(&reading)) {
        Err(e) => format!("error: {e}"),
        Ok(got) => fp16_mismatch(&got, &want).unwrap_or_else(|| "agrees".into()),
    };
    println!(
        "wgmma layout probe, B by TMA boxes, {}: {verdict}",
        format_reading(&reading)
    );
}
