//! What the Hopper benchmark (`cuda_bench_wgmma.rs`) measures at a point: the order in which
//! it screens the configurations while its share of the time lasts, and the winner's
//! one-parameter neighbours it times beside the winner.

use kernels::cuda::{wgmma_cycles, wgmma_param_values, GpuModel, WgmmaConfig};

/// A benchmark point: rows, cols (K), n, M.
pub type Point = (usize, usize, usize, usize);

/// The configurations of `offered` that differ from `cfg` in exactly one parameter: that
/// parameter's name, its value there, and the configuration, in [`WgmmaConfig::PARAMS`] order.
pub fn neighbours(
    cfg: &WgmmaConfig,
    offered: &[WgmmaConfig],
) -> Vec<(&'static str, usize, WgmmaConfig)> {
    let by_values: std::collections::HashMap<_, WgmmaConfig> =
        offered.iter().map(|c| (c.values(), *c)).collect();
    let mut out = Vec::new();
    for (p, &name) in WgmmaConfig::PARAMS.iter().enumerate() {
        for &value in wgmma_param_values(name).unwrap_or(&[]) {
            let mut v = cfg.values();
            if v[p] == value {
                continue;
            }
            v[p] = value;
            if let Some(c) = by_values.get(&v) {
                out.push((name, value, *c));
            }
        }
    }
    out
}

/// The part of a point's share of the time left that its Hopper screening may use.
pub const SCREEN_SHARE: f64 = 0.7;

/// The order in which a point screens `cfgs`: the prior's ranking for the point
/// ([`wgmma_cycles`]) and a fixed spread over the space (indices ordered by a hash), taken in
/// turn, each skipping what the other took. The prior's likely winners come first; the spread
/// keeps the table, which is what fits the prior (`cuda-model-check --fit-wgmma`), from seeing
/// only what the prior already likes.
pub fn screening_order(cfgs: &[WgmmaConfig], (r, k, n, m): Point, gpu: &GpuModel) -> Vec<usize> {
    let cycles: Vec<f64> = cfgs
        .iter()
        .map(|c| wgmma_cycles(c, (r, k, m), n, gpu))
        .collect();
    let mut prior: Vec<usize> = (0..cfgs.len()).collect();
    prior.sort_by(|&x, &y| cycles[x].total_cmp(&cycles[y]));
    let mut spread: Vec<usize> = (0..cfgs.len()).collect();
    spread.sort_by_key(|&i| (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16);
    let mut taken = vec![false; cfgs.len()];
    let mut out = Vec::with_capacity(cfgs.len());
    let (mut p, mut s) = (prior.into_iter(), spread.into_iter());
    while out.len() < cfgs.len() {
        for list in [&mut p, &mut s] {
            if let Some(i) = list.find(|&i| !taken[i]) {
                taken[i] = true;
                out.push(i);
            }
        }
    }
    out
}
