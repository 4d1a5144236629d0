//! The cotune engine: experiment files, content keys, the on-disk store, the differential
//! dataflow that schedules stage instances, and the command line.
//!
//! Stages are reached only through the seam in [`stage`]: a [`stage::StageTable`] of
//! [`stage::Stage`]s, each implementing one of the stage kinds of [`kinds`]. The product's
//! stages are [`real::table`].
#![forbid(unsafe_code)]
#![forbid(missing_docs)]

/// `println!` that drops the line when stdout is closed or fails (`cotune run … | head -1`)
/// instead of panicking: a run's results go to files, and a panic on a worker thread would
/// end the run. Regression: `cotune run … --workers 2 | head -1` hung after one worker's
/// `println!` panicked.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// [`say!`] for stderr: the lines that worker threads print (`cotune run … 2>&1 | head`).
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod abort;
pub mod cli;
pub mod cluster;
pub mod dataflow;
pub mod driver;
pub mod engine;
pub mod experiment;
pub mod fields;
pub mod key;
pub mod kinds;
pub mod plan;
pub mod progress;
pub mod real;
pub mod search;
pub mod stage;
pub mod store;
