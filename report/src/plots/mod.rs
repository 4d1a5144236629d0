//! The report's plots, each built from an experiment's rows or skipped with the reason.
//!
//! - [`pareto::Pareto`]: accuracy against latency, the front highlighted;
//! - [`speedup_m::SpeedupM`]: 2:M kernels' speedup against M with the ideal M/2;
//! - [`tuner::Calibration`] and [`tuner::Regret`]: the kernel tuner's cost model;
//! - [`layers::Layers`]: per-layer latency of the front's models;
//! - [`retained::Retained`]: retained L1 per pruning point;
//! - [`fronts::Fronts`]: several experiments' fronts on one plane (the index page).

pub mod fronts;
pub mod layers;
pub mod pareto;
pub mod retained;
pub mod speedup_m;
pub mod tuner;

use crate::figure::{DrawError, Plot};
use crate::input::Experiment;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Any of the report's plots.
pub enum AnyPlot {
    /// The Pareto front.
    Pareto(pareto::Pareto),
    /// Speedup against M.
    SpeedupM(speedup_m::SpeedupM),
    /// Tuner calibration.
    Calibration(tuner::Calibration),
    /// Tuner regret.
    Regret(tuner::Regret),
    /// Per-layer latency.
    Layers(layers::Layers),
    /// Retained L1.
    Retained(retained::Retained),
}

macro_rules! each {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPlot::Pareto($p) => $e,
            AnyPlot::SpeedupM($p) => $e,
            AnyPlot::Calibration($p) => $e,
            AnyPlot::Regret($p) => $e,
            AnyPlot::Layers($p) => $e,
            AnyPlot::Retained($p) => $e,
        }
    };
}

impl Plot for AnyPlot {
    fn name(&self) -> String {
        each!(self, p => p.name())
    }
    fn title(&self) -> String {
        each!(self, p => p.title())
    }
    fn caption(&self) -> String {
        each!(self, p => p.caption())
    }
    fn size(&self) -> (u32, u32) {
        each!(self, p => p.size())
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        each!(self, p => p.draw(root))
    }
}

/// Every plot of the report, in page order: built, or its title and why it is skipped.
pub fn candidates(exp: &Experiment) -> Vec<(&'static str, Result<AnyPlot, String>)> {
    vec![
        (
            "Pareto front",
            pareto::Pareto::new(exp).map(AnyPlot::Pareto),
        ),
        (
            "Per-layer latency",
            layers::Layers::new(exp).map(AnyPlot::Layers),
        ),
        (
            "Speedup against M",
            speedup_m::SpeedupM::new(exp).map(AnyPlot::SpeedupM),
        ),
        (
            "Tuner calibration",
            tuner::Calibration::new(exp).map(AnyPlot::Calibration),
        ),
        ("Tuner regret", tuner::Regret::new(exp).map(AnyPlot::Regret)),
        (
            "Retained L1",
            retained::Retained::new(exp).map(AnyPlot::Retained),
        ),
    ]
}
