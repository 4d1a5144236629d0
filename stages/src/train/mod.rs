//! The train stage: a seeded, bit-for-bit reproducible training of a [`ModelSpec`] on a
//! [`Dataset`], and the accuracy of any [`Weights`] on its test part.

mod fit;
mod malloc;

pub use malloc::tune_malloc;

pub(crate) use fit::{fit, gather, shuffled, FitConfig};

use datasets::Dataset;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::net::Net;
use crate::{ModelSpec, StageError, Weights};

keytag::tagged_enum! {
    /// The optimiser.
    #[derive(Default)]
    pub enum Optimizer {
        /// AdamW (β = 0.9, 0.999; ε = 1e-8), decoupled weight decay.
        #[default]
        Adamw = "adamw",
        /// Plain SGD; weight decay is added to the gradient.
        Sgd = "sgd",
    }
}

/// The `[train]` table for one trial (the engine has already expanded any list into points).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSpec {
    /// Passes over the training set.
    pub epochs: usize,
    /// Samples per step; the last batch of an epoch may be smaller.
    pub batch_size: usize,
    /// Learning rate.
    pub lr: f64,
    /// Optimiser.
    pub optimizer: Optimizer,
    /// Weight decay.
    pub weight_decay: f64,
}

impl TrainSpec {
    /// Checks values no data can fix.
    pub fn validate(&self) -> Result<(), StageError> {
        if self.batch_size == 0
            || !(self.lr.is_finite() && self.lr > 0.0)
            || !(self.weight_decay.is_finite() && self.weight_decay >= 0.0)
        {
            return Err(StageError::InvalidConfig(format!(
                "train: batch_size must be >= 1, lr > 0, weight_decay >= 0; got {}, {}, {}",
                self.batch_size, self.lr, self.weight_decay
            )));
        }
        Ok(())
    }
}

/// What training measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainMetrics {
    /// Mean training loss of each epoch (cross-entropy, averaged over samples).
    pub loss_curve: Vec<f32>,
    /// Mean training loss of the last epoch (NaN with zero epochs).
    pub final_train_loss: f32,
    /// Fraction of test samples classified correctly.
    pub test_accuracy: f64,
    /// Training samples processed per second of wall time (forward, backward, step).
    pub samples_per_s: f64,
    /// Wall time of the training loop in seconds.
    pub train_seconds: f64,
}

/// A trained model: its weights and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct Trained {
    /// The final weights.
    pub weights: Weights,
    /// What training measured.
    pub metrics: TrainMetrics,
}

/// Seeds of the train stage's random streams, derived from the trial seed.
pub(crate) fn stream_seed(seed: u64, stream: u64) -> u64 {
    // An odd multiplier keeps distinct (seed, stream) pairs distinct.
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(stream)
}

/// Trains `model` on `data` from weights drawn with `seed`; shuffles with a generator derived
/// from `seed`. Same inputs ⇒ same weights bit for bit, whatever the thread count or process.
pub fn train(
    data: &Dataset,
    model: &ModelSpec,
    spec: &TrainSpec,
    seed: u64,
) -> Result<Trained, StageError> {
    spec.validate()?;
    let init = Weights::init(
        model,
        data.n_features,
        data.image_shape,
        data.n_classes,
        stream_seed(seed, 0),
    )?;
    let net = Net::from_weights(&init)?;
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, 1));
    let report = fit(&net, data, &FitConfig::from_train(spec, None), &mut rng)?;
    let weights = net.to_weights()?;
    let test_accuracy = net_accuracy(&net, data)?;
    Ok(Trained {
        weights,
        metrics: TrainMetrics {
            final_train_loss: report.loss_curve.last().copied().unwrap_or(f32::NAN),
            loss_curve: report.loss_curve,
            test_accuracy,
            samples_per_s: report.samples_per_s,
            train_seconds: report.seconds,
        },
    })
}

/// Test accuracy of a network.
pub(crate) fn net_accuracy(net: &Net, data: &Dataset) -> Result<f64, StageError> {
    if data.n_test() == 0 {
        return Ok(f64::NAN);
    }
    let predicted = net.predict(&data.test_x, data.n_test())?;
    let correct = predicted
        .iter()
        .zip(&data.test_y)
        .filter(|(p, y)| p == y)
        .count();
    Ok(correct as f64 / data.n_test() as f64)
}

/// Fraction of `data`'s test samples that `weights` classify correctly (dense forward in candle;
/// the evaluate stage measures the sparse-kernel path).
pub fn accuracy(data: &Dataset, weights: &Weights) -> Result<f64, StageError> {
    check_fits(data, weights)?;
    net_accuracy(&Net::from_weights(weights)?, data)
}

/// Checks that the weights take the data's features and produce its classes.
pub(crate) fn check_fits(data: &Dataset, weights: &Weights) -> Result<(), StageError> {
    let Some(last) = weights.layers.last() else {
        return Err(StageError::InvalidConfig("weights have no layers".into()));
    };
    let inputs = weights.n_features();
    if inputs != data.n_features || last.rows() != data.n_classes {
        return Err(StageError::InvalidConfig(format!(
            "weights take {inputs} features and give {} classes; data set {} has {} and {}",
            last.rows(),
            data.name,
            data.n_features,
            data.n_classes
        )));
    }
    Ok(())
}
