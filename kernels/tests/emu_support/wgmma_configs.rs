//! Which Hopper configurations the emulator test (`cuda_emulated_wgmma.rs`) runs: every value
//! of every parameter, hand-picked corner cases, then a greedy cover of every pair of values
//! some configuration has (every t-tuple with `COTUNE_EMULATE_STRENGTH=t`), or all of them
//! with `COTUNE_EMULATE_ALL=1`.

use std::collections::HashSet;

use kernels::cuda::{
    wgmma_configs, WgmmaConfig, WGMMA_BK, WGMMA_BM, WGMMA_BN, WGMMA_BULK, WGMMA_PERSISTENT,
    WGMMA_RASTER, WGMMA_SPLIT_K, WGMMA_STAGES, WGMMA_SWIZZLE, WGMMA_TMA,
};

/// Every value of every parameter at least once (each list walked with its own stride), corner
/// cases, then every pair of values (or t-tuple), or every configuration with
/// `COTUNE_EMULATE_ALL=1`.
pub fn configurations() -> Vec<WgmmaConfig> {
    let all = wgmma_configs(128);
    if std::env::var("COTUNE_EMULATE_ALL").is_ok_and(|v| v == "1") {
        return all;
    }
    let mut out: Vec<WgmmaConfig> = (0..4)
        .map(|i| WgmmaConfig {
            bm: WGMMA_BM[i % 2],
            bn: WGMMA_BN[i % 3],
            bk: WGMMA_BK[(i + 1) % 3],
            stages: WGMMA_STAGES[i],
            keep: i % 2,
            split_k: WGMMA_SPLIT_K[i % 3],
            bulk: WGMMA_BULK[(i / 2) % 2],
            swizzle: WGMMA_SWIZZLE[[0, 1, 1, 0][i]],
            tma: WGMMA_TMA[usize::from(i == 2)],
            raster: WGMMA_RASTER[(i + 1) % 2],
            persistent: WGMMA_PERSISTENT[(i / 2 + i) % 2],
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        })
        .collect();
    // The largest tile, where shared memory allows only few stages, with B gathered (4 column
    // groups under the swizzle) and by TMA boxes of 128 rows (the second column tile has 3 of
    // its 4 boxes wholly past n).
    let largest = WgmmaConfig {
        bm: 128,
        bn: 256,
        bk: 128,
        stages: 2,
        keep: 0,
        split_k: 2,
        bulk: 1,
        swizzle: 1,
        tma: 0,
        raster: 0,
        persistent: 1,
        cluster: 1,
        cluster_n: 1,
        pingpong: 0,
    };
    out.push(largest);
    out.push(WgmmaConfig {
        tma: 1,
        persistent: 0,
        ..largest
    });
    // B gathered under the swizzle at the shallowest k-tile (8 groups of 4 rows: half the
    // producer's threads copy) over 4 column groups, deepest pipeline.
    out.push(WgmmaConfig {
        bm: 64,
        bn: 256,
        bk: 32,
        stages: 6,
        keep: 0,
        split_k: 1,
        bulk: 0,
        swizzle: 1,
        tma: 0,
        raster: 0,
        persistent: 0,
        cluster: 1,
        cluster_n: 1,
        pingpong: 0,
    });
    // Clusters of two blocks multicasting B's boxes: the largest tile split along K (several
    // clusters in the grid), and a persistent cluster walking its tiles with a group kept in
    // flight, on row blocks of one pair and (the 2:4 matrix of BM rows) an odd one.
    out.push(WgmmaConfig {
        tma: 1,
        persistent: 0,
        cluster: 2,
        ..largest
    });
    out.push(WgmmaConfig {
        bm: 64,
        bn: 128,
        bk: 64,
        stages: 4,
        keep: 1,
        split_k: 1,
        bulk: 1,
        swizzle: 1,
        tma: 1,
        raster: 1,
        persistent: 1,
        cluster: 2,
        cluster_n: 1,
        pingpong: 0,
    });
    // Ping-pong consumers (whole tiles each, their main loops in turn): persistent blocks of
    // 2 to 4 tiles (so each warpgroup waits on the other's barrier, both ways), a group kept
    // in flight with split-K and the swizzled gather; and without a group in flight, B
    // unswizzled, the narrowest tile.
    let pingpong = WgmmaConfig {
        bm: 128,
        bn: 128,
        bk: 64,
        stages: 4,
        keep: 1,
        split_k: 2,
        bulk: 1,
        swizzle: 1,
        tma: 0,
        raster: 0,
        persistent: 1,
        cluster: 1,
        cluster_n: 1,
        pingpong: 1,
    };
    out.push(pingpong);
    out.push(WgmmaConfig {
        bn: 64,
        bk: 32,
        stages: 3,
        keep: 0,
        split_k: 1,
        bulk: 0,
        swizzle: 0,
        raster: 1,
        ..pingpong
    });
    // Pairs along n multicasting A's bulk copies: the largest tile gathering B, split along K;
    // ping-pong consumers in the pair's blocks.
    out.push(WgmmaConfig {
        persistent: 0,
        cluster_n: 2,
        ..largest
    });
    out.push(WgmmaConfig {
        cluster_n: 2,
        ..pingpong
    });
    for c in &out {
        assert!(all.contains(c), "{c} is not a listed configuration");
    }
    // Then every pair of parameter values that some configuration has (every t-tuple with
    // `COTUNE_EMULATE_STRENGTH=t`), in as few more configurations as a greedy cover finds:
    // combinations the hand-picked ones miss (ping-pong with TMA boxes, clusters with split-K
    // and the deepest pipelines, ...) run too.
    let strength = std::env::var("COTUNE_EMULATE_STRENGTH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let more = covering(&all, &out, strength);
    out.extend(more);
    out
}

/// The `t`-tuples of parameter values of `cfg`, each as one key: for parameters i1 < .. < it,
/// their indices and values, 13 bits each.
fn value_tuples(cfg: &WgmmaConfig, t: usize) -> Vec<u64> {
    let v = cfg.values();
    let mut out = Vec::new();
    let mut pick = |params: &[usize]| {
        let key = params
            .iter()
            .fold(0u64, |k, &i| (k << 13) | ((i as u64) << 9) | v[i] as u64);
        out.push(key);
    };
    // Every increasing choice of t parameters (t <= 3 here).
    match t {
        1 => (0..v.len()).for_each(|i| pick(&[i])),
        2 => (0..v.len()).for_each(|i| (i + 1..v.len()).for_each(|j| pick(&[i, j]))),
        _ => (0..v.len()).for_each(|i| {
            (i + 1..v.len()).for_each(|j| (j + 1..v.len()).for_each(|l| pick(&[i, j, l])))
        }),
    }
    out
}

/// Configurations of `all` that, with `seeds`, cover every `t`-tuple of parameter values that
/// some configuration of `all` has: greedily, each time the first configuration (in `all`'s
/// order) that covers the most tuples not yet covered.
fn covering(all: &[WgmmaConfig], seeds: &[WgmmaConfig], t: usize) -> Vec<WgmmaConfig> {
    let tuples: Vec<Vec<u64>> = all.iter().map(|c| value_tuples(c, t)).collect();
    let mut uncovered: HashSet<u64> = tuples.iter().flatten().copied().collect();
    for key in seeds.iter().flat_map(|c| value_tuples(c, t)) {
        uncovered.remove(&key);
    }
    let mut out = Vec::new();
    while !uncovered.is_empty() {
        let mut best = (0, 0);
        for (i, keys) in tuples.iter().enumerate() {
            let new = keys.iter().filter(|k| uncovered.contains(k)).count();
            if new > best.0 {
                best = (new, i);
            }
        }
        for key in &tuples[best.1] {
            uncovered.remove(key);
        }
        out.push(all[best.1]);
    }
    out
}
