//! The product's stage kinds, in pipeline order: each module holds a kind's marker, its trial
//! (fields declared once: key and columns), its parents, and the planning its stages share.
//!
//! `dataset → train → prune → calibrate → kernel_tune → evaluate`; a kernel tuning is requested
//! by the prunes whose layers take its format and reads its family's calibration on the device
//! (requested by the same prunes), and an evaluation reads its prune and those tunings.
//! A layer study of a user's weights is `checkpoint → layer_study → kernel_tune`.

pub mod calibrate;
pub mod checkpoint;
pub mod dataset;
pub mod evaluate;
pub mod kernel_tune;
pub mod layer_study;
pub mod prune;
pub mod train;

pub use calibrate::{Calibrate, CalibrateTrial};
pub use checkpoint::{Checkpoint, CheckpointTrial, StudyTensor};
pub use dataset::{Dataset, DatasetTrial};
pub use evaluate::{EvalTrial, Evaluate};
pub use kernel_tune::{DeviceState, KernelTune, TuneFacts, TuneTrial};
pub use layer_study::{LayerStudy, StudyTrial};
pub use prune::{pattern_label, LayerFormat, Prune, PrunePoint, PruneTrial, SearchNote};
pub use train::{Train, TrainTrial};
