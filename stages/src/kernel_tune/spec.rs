//! What a tuning is asked: the format and shape, the batch tokens, the strategy that chooses the
//! points, and the backend; and the points' written form.

use super::Backend;
use crate::StageError;
use kernels::{Calibration, FormatSignature, ParamPoint};

keytag::tagged_enum! {
    /// The family of a [`Strategy`], without its parameters.
    pub enum StrategyKind {
        /// [`Strategy::Exhaustive`].
        Exhaustive = "exhaustive",
        /// [`Strategy::Random`].
        Random = "random",
        /// [`Strategy::Model`].
        Model = "model",
        /// [`Strategy::Guided`].
        Guided = "guided",
    }
}

/// How points are chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum Strategy {
    /// Every valid point.
    Exhaustive,
    /// `budget` points drawn uniformly with `seed`.
    Random {
        /// Points measured.
        budget: usize,
        /// Seed of the draw.
        seed: u64,
    },
    /// The `budget` points the cost model ranks best.
    Model {
        /// Points measured.
        budget: usize,
    },
    /// The cost model's best-ranked `⌈budget/2⌉` points, then the neighbours of the fastest
    /// measured ones until `budget` points are measured ([`super::guided::guided_search`]).
    Guided {
        /// Points measured.
        budget: usize,
    },
}

impl Strategy {
    /// The strategy's family.
    pub fn kind(&self) -> StrategyKind {
        match self {
            Strategy::Exhaustive => StrategyKind::Exhaustive,
            Strategy::Random { .. } => StrategyKind::Random,
            Strategy::Model { .. } => StrategyKind::Model,
            Strategy::Guided { .. } => StrategyKind::Guided,
        }
    }
}

/// One tuning problem.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneSpec {
    /// Structure and shape of the sparse operand.
    pub sig: FormatSignature,
    /// Batch tokens: columns of the dense operand.
    pub n: usize,
    /// Search strategy.
    pub strategy: Strategy,
    /// Time budget per measured point, seconds (rounds continue until the points' budgets are
    /// spent; CPU only: CUDA takes a fixed number of device-timed samples, [`super::cuda::REPS`]).
    pub seconds_per_point: f64,
    /// The kernels measured.
    pub backend: Backend,
    /// The device's calibration of the CPU cost model for this format's family (`None`: the
    /// analytical model alone; the CUDA backend has its own model and ignores it).
    pub calibration: Option<Calibration>,
}

/// Writes a point as `name=value,...` (names in order).
pub fn format_params(p: &ParamPoint) -> String {
    p.0.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses [`format_params`].
pub fn parse_params(s: &str) -> Result<ParamPoint, StageError> {
    let mut p = ParamPoint::default();
    for part in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| StageError::InvalidConfig(format!("bad parameter `{part}`")))?;
        let v = v
            .parse()
            .map_err(|_| StageError::InvalidConfig(format!("bad parameter value `{part}`")))?;
        p.0.insert(k.to_owned(), v);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip() {
        let p = ParamPoint::from_pairs([("rows", 4), ("threads", 2), ("tile_n", 32)]);
        assert_eq!(parse_params(&format_params(&p)).unwrap(), p);
    }
}
