//! Evaluation of a pruned model through the sparse kernels with each layer's tuned config:
//! accuracy (checked against the masked dense reference), end-to-end and per-layer latency per
//! batch size, packed weight bytes, and the same model run densely with the tuned dense kernel.
//!
//! Layout: activations travel transposed (features × columns, a column per sample or per
//! sample and position), so each layer is exactly the kernels' `C = A · B` with A the layer's
//! weights (out × in); the architecture around the GEMMs (`graph`) is computed on the host,
//! the same code for the sparse kernels and for the f64 masked dense reference.
//!
//! Timing: `paired` measures passes in shuffled rounds and derives paired speedups;
//! `passes` times a model against its dense baseline with them, each pass whole (every product
//! shared by the threads), cut into slices of samples, one per thread, and where a slice
//! outgrows the L2 cache, those slices run in chunks of samples (`slices`, `ways`).
//!
//! [`evaluate`] runs the CPU kernels; [`cuda::evaluate_cuda`] the CUDA kernels (fp16, its own
//! tolerance and latency definition, see there).

mod attention;
mod cpu;
pub mod cuda;
mod cut;
mod encoder_ops;
#[cfg(test)]
mod fixtures;
mod graph;
mod image_ops;
mod measured;
mod paired;
mod passes;
mod points;
mod reference;
mod slices;
mod ways;

pub use cpu::evaluate;
pub use measured::{BatchLatency, Evaluation, LayerRun, LayerTuning};
pub use paired::{alternate, speedup, Speedup};
pub use points::{guides, guiding_batch};
pub use reference::TOLERANCE;
