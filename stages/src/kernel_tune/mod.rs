//! Kernel tuning: for one format signature, shape and batch-token count, search the kernel's
//! parameter space and measure the chosen points on synthetic weights of the exact structure
//! (values do not change speed), and tune the dense baseline on the same shape so that every
//! speedup is against a tuned dense kernel.
//!
//! Strategies: `exhaustive` measures every valid point; `random` measures `budget` points drawn
//! with a seed; `model` ranks the whole space with the analytical cost model
//! ([`kernels::predicted_cost`]) and measures the top `budget`; `guided` measures the model's
//! top half of `budget`, then spends the rest on a local search around the fastest measured
//! points ([`guided`]). Predicted and measured costs are
//! both kept, so the model's rank correlation and regret can be queried. On the CPU the model
//! is the analytical one corrected by the device's [`kernels::Calibration`] when the spec carries one
//! ([`calibrate`] measures it), and the analytical prediction is kept beside. On the CPU, every
//! chosen point and every dense point are measured in interleaved rounds ([`rounds`]), the 3
//! fastest points and every dense point then in more rounds, and the best point and the dense
//! baseline are chosen on all their samples: the machine's speed drifts over a tuning, and
//! neither the ranking nor the speedup should depend on when each point was measured.
//!
//! Backends: the CPU kernels (the default), or the CUDA kernels of [`kernels::cuda`] through
//! [`cuda::tune_cuda`] (see there for what differs: its own cost model, fp16, failed points).

mod backend;
pub mod calibrate;
mod cpu;
pub mod cuda;
mod cuda_check;
mod cuda_ranking;
#[cfg(test)]
pub(crate) mod cuda_stand_in;
pub mod guided;
mod measure;
mod search;
mod spec;
mod tuned;

pub use backend::{families, tune, Backend};
pub use measure::{rounds, summarise, Timing};
pub use spec::{format_params, parse_params, Strategy, StrategyKind, TuneSpec};
use tuned::argmin;
pub use tuned::{Measured, Tuned};
