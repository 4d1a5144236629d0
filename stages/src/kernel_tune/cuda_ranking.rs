//! The order in which a CUDA tuning measures points: each of the device's spaces ranked by
//! its kernel's cost model, the rankings taken in turn.

use kernels::cuda::{cuda_predicted_cost, GpuModel, RegisterSource, WGMMA_KERNEL};
use kernels::{FormatSignature, KernelSpace, ParamPoint};

/// The CUDA space ranked by the cost model on `gpu` (cheapest first, ties in the space's
/// order), each point with its predicted seconds, and what the `ranking` column says.
pub fn ranked_space(
    space: &KernelSpace,
    sig: &FormatSignature,
    n: usize,
    gpu: &GpuModel,
) -> (Vec<(ParamPoint, f64)>, String) {
    let mut estimated = false;
    let mut ranked: Vec<(ParamPoint, f64)> = space
        .points()
        .into_iter()
        .map(|p| {
            let (cost, registers) = cuda_predicted_cost(sig, n, &p, gpu);
            estimated |= registers == Some(RegisterSource::Estimated);
            (p, cost)
        })
        .collect();
    // A stable sort keeps the space's own order among equals.
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let registers = if estimated {
        "estimated registers (no ptxas table for this arch)"
    } else {
        "ptxas register table"
    };
    let how = format!(
        "CUDA cost model on {} ({} SMs), {registers}",
        gpu.arch, gpu.multiprocessors
    );
    (ranked, how)
}

/// One point of a device's CUDA spaces in the order the tuner takes them.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    /// The space (kernel) the point belongs to.
    pub kernel: &'static str,
    /// The point.
    pub point: ParamPoint,
    /// Its cost model's prediction, seconds.
    pub predicted_s: f64,
}

/// Every point of `spaces` (a device's spaces for one signature, [`kernels::cuda::cuda_spaces`]), each space
/// ranked by its own cost model and the rankings taken in turn: the first point of each space,
/// then the second of each, and so on. The kernels' models are not on one scale (the Hopper
/// kernel's is an unfitted prior), so a budget measures the top of every kernel's ranking and
/// the measurements pick the kernel. Also what the `ranking` column says.
pub fn ranked_spaces(
    spaces: &[KernelSpace],
    sig: &FormatSignature,
    n: usize,
    gpu: &GpuModel,
) -> (Vec<Ranked>, String) {
    let mut how = String::new();
    let mut queues: Vec<std::vec::IntoIter<Ranked>> = vec![];
    for space in spaces {
        let (ranked, h) = ranked_space(space, sig, n, gpu);
        if how.is_empty() {
            how = h;
        }
        if space.kernel == WGMMA_KERNEL {
            how.push_str(&format!(
                "; {WGMMA_KERNEL} by its unfitted prior, taken in turn with the other kernel's"
            ));
        }
        let kernel = space.kernel;
        queues.push(
            ranked
                .into_iter()
                .map(|(point, predicted_s)| Ranked {
                    kernel,
                    point,
                    predicted_s,
                })
                .collect::<Vec<_>>()
                .into_iter(),
        );
    }
    let mut out = vec![];
    loop {
        let before = out.len();
        out.extend(queues.iter_mut().filter_map(Iterator::next));
        if out.len() == before {
            return (out, how);
        }
    }
}
