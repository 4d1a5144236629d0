//! The Hopper V:N:M kernel (`kernels/cuda/spmm_vnm_wgmma_f16.cu`: sparse `wgmma`, mbarrier
//! pipeline, warp-specialised producer) run by the host emulator (`emu/emu.h` + `emu/sm90.h`)
//! as `CudaDevice` would launch it ([`WgmmaLaunch`], the arrays of [`pack_vnm`]), compared bit
//! for bit with the CPU reference rounded to fp16 (inputs are multiples of 1/16, so every sum
//! is exact). Copies and wgmmas complete as late as the pipeline's waits allow and again at
//! issue. By default a covering set of configurations runs (hand-picked corner cases, then
//! every pair of parameter values some configuration has; every t-tuple with
//! `COTUNE_EMULATE_STRENGTH=t`); `COTUNE_EMULATE_ALL=1` runs all of them.
//!
//! The layouts the emulator gives `wgmma.sp` are the PTX ISA's as read in `cuda/NOTES.md`; only
//! the device check (`scripts/device-check.sh`) can confirm them.

mod emu_support;

use std::path::Path;

use emu_support::wgmma_configs::configurations;
use emu_support::{
    build, build_dir, check_configurations, compiler, expected, run_packed, Copies, CUDA_DIR,
};
use kernels::cuda::{
    exact_values, pack_vnm, random_vnm, vnm_from_nm, WgmmaConfig, WgmmaLaunch, READING_DEFINES,
};
use kernels::{build_mask, NmMatrix, Pattern, VnmMatrix};

/// The SMs of the emulated device: a persistent grid has at most this many blocks, so each
/// walks several tiles.
const SMS: usize = 2;

/// C = A·B through the emulated kernel, or what the emulator reported.
fn try_run(
    exe: &Path,
    a: &VnmMatrix,
    b: &[f32],
    n: usize,
    cfg: &WgmmaConfig,
    copies: Copies,
) -> Result<Vec<f32>, String> {
    let packed = pack_vnm(a, cfg.bk).unwrap();
    let dims = packed.dims;
    let launch = |ld| {
        let l = WgmmaLaunch::new(dims, n, ld, ld, cfg, cfg.resident_clusters(SMS)).unwrap();
        let shape = [l.blocks, 1, 1, l.threads].map(i64::from);
        let sizes = [l.shared_bytes, l.workspace].map(|x| x as i64);
        (
            l.ints.map(i64::from).to_vec(),
            shape.into_iter().chain(sizes).collect(),
        )
    };
    run_packed(exe, packed, b, n, launch, copies)
}

/// The matrices a configuration runs on: V:N:M with V = BM and (for BM = 64) V = 128, so that
/// two thread blocks share a V-block's column locations; K not a multiple of M and long
/// enough for more k-tiles than stages; and 2:4 as V:N:M with M = 4 (one row block: with
/// clusters, a pair whose second block is past the rows). With TMA (M = 4 only) the V:N:M
/// ones have M = 4 too.
fn matrices(cfg: &WgmmaConfig, i: usize) -> Vec<VnmMatrix> {
    let m = if cfg.tma == 1 { 4 } else { [8, 10, 20][i % 3] };
    let k = ((cfg.stages + 2) * cfg.bk / 4 + 1) * m - 3;
    let mut out = vec![random_vnm(2 * cfg.bm, k, cfg.bm, m, i as u64).unwrap()];
    if cfg.bm == 64 {
        out.push(random_vnm(128, k, 128, m, i as u64 + 3).unwrap());
    }
    let cols = (cfg.stages + 1) * cfg.bk / 4 * 4 + 2;
    let vals = exact_values(cfg.bm * cols, i as u64 + 7);
    let scores: Vec<f32> = vals.iter().map(|x| x.abs()).collect();
    let mask = build_mask(&Pattern::Nm { n: 2, m: 4 }, &scores, cfg.bm, cols).unwrap();
    let nm = NmMatrix::from_masked(&vals, &mask, 2, 4).unwrap();
    out.push(vnm_from_nm(&nm, cfg.bm).unwrap());
    out
}

#[test]
fn the_hopper_kernel_source_computes_the_reference_on_the_emulator() {
    let cxx = compiler("the_hopper_kernel_source_computes_the_reference_on_the_emulator");
    let dir = build_dir();
    let configs = configurations();
    check_configurations(
        &configs,
        |c| c.bn,
        |c| build(&cxx, &dir, Path::new(CUDA_DIR), "run_wgmma", &c.defines()),
        matrices,
        try_run,
    );
    eprintln!(
        "{} Hopper configurations agree on the emulator",
        configs.len()
    );
}

/// A configuration that leaves a wgmma group in flight, splits K and walks its 4 tiles with 2
/// persistent blocks (with the given `bulk`, `swizzle`, `tma` and `raster`), a 2:8 matrix
/// (2:4 with TMA) of one V = 128 block, B of a partial column tile, and the expected product:
/// `(cfg, a, n, b, want)`.
fn in_flight_case(
    bulk: usize,
    swizzle: usize,
    tma: usize,
    raster: usize,
    seed: u64,
) -> (WgmmaConfig, VnmMatrix, usize, Vec<f32>, Vec<f32>) {
    in_flight_rows(bulk, swizzle, tma, raster, 1, 128, seed)
}

/// [`in_flight_case`] with blocks in clusters of `cluster` and `rows` rows.
fn in_flight_rows(
    bulk: usize,
    swizzle: usize,
    tma: usize,
    raster: usize,
    cluster: usize,
    rows: usize,
    seed: u64,
) -> (WgmmaConfig, VnmMatrix, usize, Vec<f32>, Vec<f32>) {
    let cfg = WgmmaConfig {
        bm: 128,
        bn: 64,
        bk: 64,
        stages: 3,
        keep: 1,
        split_k: 2,
        bulk,
        swizzle,
        tma,
        raster,
        persistent: 1,
        cluster,
        cluster_n: 1,
        pingpong: 0,
    };
    let a = random_vnm(rows, 300, 128, if tma == 1 { 4 } else { 8 }, seed).unwrap();
    let n = cfg.bn + 12;
    let b = exact_values(a.cols() * n, seed + 1);
    let want = expected(&a, &b, n);
    (cfg, a, n, b, want)
}

/// What makes the test above able to fail: kernels one edit away from the real one must fail
/// on the emulator (on a configuration that leaves a wgmma group in flight, splits K and
/// bulk-copies A, with B gathered under the swizzle, and for B's TMA copies on the same
/// configuration with TMA and a 2:4 matrix, for clusters with a pair of row blocks and with
/// four, for ping-pong consumers with the gathered one's ping-pong twin, and for a pair
/// along n with its ping-pong twin). The readings of the ISA the device check probes are the
/// next test's.
#[test]
fn the_emulator_rejects_a_broken_hopper_kernel() {
    let cxx = compiler("the_emulator_rejects_a_broken_hopper_kernel");
    let dir = build_dir();
    let mutants = [
        // Consumers read a stage without waiting for its copies: only late copies show it.
        (
            "no-full-wait",
            "mbar_wait(&full[s], (it / STAGES) & 1);",
            "",
            &[Copies::Lazy][..],
        ),
        // Every thread of a quad passes the metadata of the first 16 kept columns.
        (
            "one-metadata-lane",
            "kk * 2 + ((quad & 1) ^ META_SWAP)",
            "kk * 2",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // A's bulk copies not announced on the barrier: its phase can complete (or, as here,
        // never complete) regardless of the bytes.
        (
            "no-expect-tx",
            "mbar_expect_tx(&full[s], BK);",
            "",
            &[Copies::Lazy][..],
        ),
        // B's gathered rows land in the swizzled stage unpermuted.
        (
            "unswizzled-pieces",
            "(piece ^ (r % 8)) * 8",
            "piece * 8",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // A's bulk copy of each row only half as long (and announced so).
        (
            "short-bulk-row",
            "mbar_expect_tx(&full[s], BK);\n                    cp_async_bulk(dA + tid * A_STRIDE, a_vals + (size_t)(row0 + tid) * ks + (kt0 + kt) * (BK / 2), BK, &full[s]);",
            "mbar_expect_tx(&full[s], BK / 2);\n                    cp_async_bulk(dA + tid * A_STRIDE, a_vals + (size_t)(row0 + tid) * ks + (kt0 + kt) * (BK / 2), BK / 2, &full[s]);",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // Every split-K block reduces the first slice of K.
        (
            "one-k-slice",
            "const int kt0 = min(total, z * per);",
            "const int kt0 = 0;",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // One set of fragment registers: the next tile overwrites the set the group left in
        // flight still reads.
        (
            "one-fragment-set",
            "consume(it + kt + 1, kt + 1, afrag[1], meta[1]);",
            "consume(it + kt + 1, kt + 1, afrag[0], meta[0]);",
            &[Copies::Lazy][..],
        ),
        // A block's next tile starts from the accumulators of its last.
        (
            "accumulators-kept",
            "acc[sub][i] = 0.0f;",
            "acc[sub][i] = tile == first ? 0.0f : acc[sub][i];",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // The consumers count each tile's k-tiles from stage 0 again: they wait on stages (and
        // phases) the producer has not filled, or read them early.
        (
            "stages-per-tile",
            "it += x.ktiles;\n\n",
            "it = 0;\n\n",
            &[Copies::Eager][..],
        ),
    ];
    let tma_mutants = [
        // B's boxes not announced on the barrier: the phase completes before they land.
        (
            "tma-no-expect-tx",
            "mbar_expect_tx(&full[s], B_STAGE * 2);",
            "",
            &[Copies::Lazy][..],
        ),
        // Every split-K block's boxes start at row 0 of its slice's tiles.
        (
            "tma-tile-rows",
            "(kt0 + kt) * BK, &full[s]",
            "kt * BK, &full[s]",
            &[Copies::Lazy, Copies::Eager][..],
        ),
    ];
    let cluster_mutants = [
        // Both blocks of a pair take the pair's first row block: the second is never computed.
        (
            "cluster-one-row-block",
            "(rb * CLUSTER + rank % CLUSTER) * BM",
            "rb * CLUSTER * BM",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // Both blocks load the first half of the stage's rows, each into its own half.
        (
            "cluster-first-half",
            "(kt0 + kt) * BK + rank * B_BOX_ROWS, &full[s]",
            "(kt0 + kt) * BK, &full[s]",
            &[Copies::Lazy, Copies::Eager][..],
        ),
    ];
    let four_mutants = [
        // Each block's share of a stage's boxes placed as a pair's (BK / 2 rows apart): with
        // four blocks the shares land past their column group and leave rows unloaded.
        (
            "cluster4-pair-shares",
            "#define B_BOX_ROWS (BK / CLUSTER)",
            "#define B_BOX_ROWS (BK / 2)",
            &[Copies::Lazy, Copies::Eager][..],
        ),
    ];
    let along_n_mutants = [
        // Both blocks of a pair along n take the pair's first column tile: the second is
        // never computed.
        (
            "cluster-n-one-column-tile",
            "(ct * CLUSTER_N + rank / CLUSTER) * BN",
            "ct * CLUSTER_N * BN",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // Both blocks copy (and multicast) the first share of A's rows: the stage's bytes all
        // arrive, the second share's rows are never loaded.
        (
            "cluster-n-first-share",
            "const int r = rank * A_SHARE + tid;",
            "const int r = tid;",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // Each block multicasts the first share of the metadata tiles.
        (
            "cluster-n-first-metadata",
            "const int t = rank * M_SHARE + tid;",
            "const int t = tid;",
            &[Copies::Lazy, Copies::Eager][..],
        ),
    ];
    // With ping-pong consumers in a cluster, a stage's `empty` counting both warpgroups'
    // warps: the producer waits for releases that never come (the emulator's wait fails
    // after 20 s).
    let pingpong_cluster_mutants = [(
        "pingpong-cluster-both-warpgroups",
        "mbar_init(&empty[s], 4 * (PINGPONG ? 1 : CONSUMERS) * CLUSTER_SIZE);",
        "mbar_init(&empty[s], 4 * CONSUMERS * CLUSTER_SIZE);",
        &[Copies::Eager][..],
    )];
    let pingpong_mutants = [
        // A warpgroup does not count the other's k-tiles: it waits on (and releases) stages
        // of the other's tile.
        (
            "pingpong-own-stages",
            "it += x.ktiles;\n            continue;",
            "continue;",
            &[Copies::Lazy, Copies::Eager][..],
        ),
        // An arrival after the block's last tile, with no turn left to take it: the emulator
        // finds the named barrier's arrivals pending at exit.
        (
            "pingpong-extra-turn",
            "if (tile + step < grid.tiles()) named_barrier_arrive",
            "named_barrier_arrive",
            &[Copies::Lazy][..],
        ),
    ];
    let gathered = in_flight_case(1, 1, 0, 1, 9);
    // The same with ping-pong consumers: each block's 2 tiles, one per warpgroup.
    let turns = {
        let (cfg, a, n, b, want) = in_flight_case(1, 1, 0, 1, 9);
        (WgmmaConfig { pingpong: 1, ..cfg }, a, n, b, want)
    };
    // Four row blocks: one cluster of four walking 4 tiles.
    let fours = in_flight_rows(1, 1, 1, 0, 4, 512, 13);
    // A pair along n walking 8 tiles (2 row blocks × 2 pairs of column tiles, the second
    // pair's second block past n × 2 splits), and its ping-pong twin.
    let along_n = {
        let (cfg, a, ..) = in_flight_rows(1, 1, 0, 0, 1, 256, 14);
        let cfg = WgmmaConfig {
            cluster_n: 2,
            ..cfg
        };
        let n = 2 * cfg.bn + 12;
        let b = exact_values(a.cols() * n, 15);
        let want = expected(&a, &b, n);
        (cfg, a, n, b, want)
    };
    let along_n_turns = {
        let (cfg, a, n, b, want) = along_n.clone();
        (WgmmaConfig { pingpong: 1, ..cfg }, a, n, b, want)
    };
    // The kernel itself computes these (so that the mutants' failures are theirs).
    for (cfg, a, n, b, want) in [&turns, &fours, &along_n, &along_n_turns] {
        let exe = build(&cxx, &dir, Path::new(CUDA_DIR), "run_wgmma", &cfg.defines());
        for copies in [Copies::Lazy, Copies::Eager] {
            assert_eq!(
                &try_run(&exe, a, b, *n, cfg, copies).unwrap(),
                want,
                "[{cfg}]"
            );
        }
    }
    let boxed = in_flight_case(1, 1, 1, 1, 10);
    // Two row blocks: one pair.
    let paired = in_flight_rows(1, 1, 1, 0, 2, 256, 12);
    let kernel = std::fs::read_to_string(format!("{CUDA_DIR}/spmm_vnm_wgmma_f16.cu")).unwrap();
    let cases = mutants
        .into_iter()
        .map(|m| (m, &gathered))
        .chain(tma_mutants.into_iter().map(|m| (m, &boxed)))
        .chain(cluster_mutants.into_iter().map(|m| (m, &paired)))
        .chain(four_mutants.into_iter().map(|m| (m, &fours)))
        .chain(pingpong_mutants.into_iter().map(|m| (m, &turns)))
        .chain(along_n_mutants.into_iter().map(|m| (m, &along_n)))
        .chain(
            pingpong_cluster_mutants
                .into_iter()
                .map(|m| (m, &along_n_turns)),
        );
    for ((name, from, to, timings), (cfg, a, n, b, want)) in cases {
        let (n, want) = (*n, want.clone());
        assert_eq!(
            kernel.matches(from).count(),
            1,
            "{name}: `{from}` is not in the kernel once"
        );
        let root = dir.join(format!("mutant-wgmma-{name}"));
        std::fs::create_dir_all(root.join("emu")).unwrap();
        for f in ["emu/emu.h", "emu/sm90.h", "emu/run_wgmma.cpp"] {
            std::fs::copy(format!("{CUDA_DIR}/{f}"), root.join(f)).unwrap();
        }
        std::fs::write(root.join("spmm_vnm_wgmma_f16.cu"), kernel.replace(from, to)).unwrap();
        let exe = build(&cxx, &root, &root, "run_wgmma", &cfg.defines());
        for &copies in timings {
            let noticed = try_run(&exe, a, b, n, cfg, copies).map_or(true, |got| got != want);
            assert!(
                noticed,
                "{name} ({copies:?} copies): the emulator did not notice"
            );
        }
    }
}

/// The device check's layout probe can tell the readings apart: the kernel built with any one
/// reading switch (`B_DESC_SWAP`, `META_SWAP`, `META_XHALF`, `A_SWAP`) computes a wrong
/// product under the emulator's reading. And the benchmark's timing ablations run to the end
/// (no barrier left waiting) with the part they drop gone: without the wgmmas C is all zeros,
/// without B's gather it is not the product, without the stores C is untouched (zeros); the
/// epilogue it is compared with (4-byte stores, `EPILOGUE_U32`) computes the product.
#[test]
fn the_probe_readings_differ_and_the_ablations_finish() {
    let cxx = compiler("the_probe_readings_differ_and_the_ablations_finish");
    let dir = build_dir();
    let (cfg, a, n, b, want) = in_flight_case(0, 0, 0, 0, 11);
    let variants = READING_DEFINES
        .iter()
        .chain(&["ABLATE_MMA", "ABLATE_B"])
        .copied();
    for name in variants {
        let mut defines = cfg.defines();
        defines.push((name, 1));
        let exe = build(&cxx, &dir, Path::new(CUDA_DIR), "run_wgmma", &defines);
        for copies in [Copies::Lazy, Copies::Eager] {
            let got = try_run(&exe, &a, &b, n, &cfg, copies)
                .unwrap_or_else(|e| panic!("{name} ({copies:?} copies) did not finish: {e}"));
            assert_ne!(got, want, "{name} ({copies:?} copies) computes the product");
            if name == "ABLATE_MMA" {
                assert!(got.iter().all(|&x| x == 0.0), "{name} left products in C");
            }
        }
    }
    // The epilogue's two (without split-K, which stores f32 partials either way).
    let whole = WgmmaConfig { split_k: 1, ..cfg };
    for (name, product) in [("ABLATE_STORE", false), ("EPILOGUE_U32", true)] {
        let mut defines = whole.defines();
        defines.push((name, 1));
        let exe = build(&cxx, &dir, Path::new(CUDA_DIR), "run_wgmma", &defines);
        let got = try_run(&exe, &a, &b, n, &whole, Copies::Lazy).unwrap();
        if product {
            assert_eq!(got, want, "{name} stores another product");
        } else {
            assert!(got.iter().all(|&x| x == 0.0), "{name} stored products in C");
        }
    }
    // The descriptor's two offsets trade roles in the swizzled layout too.
    let (cfg, a, n, b, want) = in_flight_case(0, 1, 0, 0, 13);
    let mut defines = cfg.defines();
    defines.push(("B_DESC_SWAP", 1));
    let exe = build(&cxx, &dir, Path::new(CUDA_DIR), "run_wgmma", &defines);
    let got = try_run(&exe, &a, &b, n, &cfg, Copies::Eager);
    assert!(
        got.map_or(true, |got| got != want),
        "B_DESC_SWAP computes the product with the swizzled B"
    );
}
