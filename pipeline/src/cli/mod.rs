//! The `cotune` command line: flags are parsed into raw arguments (clap), then into a validated
//! plan, and each command maps its errors to an exit code: 0 all trials ok, 1 some trials
//! failed, 2 bad usage or experiment file (nothing run).

mod export_cmd;
mod plan_cmd;
mod report_cmd;
mod run_cmd;
mod store_cmd;
mod summary;

pub use summary::print_summary;

use crate::stage::StageTable;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;

/// Exit code: every trial ok.
pub const EXIT_OK: u8 = 0;
/// Exit code: some trials failed (each recorded with its error).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad usage or experiment file; nothing ran.
pub const EXIT_USAGE: u8 = 2;

/// cotune: co-tune sparse neural networks and the kernels that run them.
#[derive(Debug, Parser)]
#[command(name = "cotune", version, about)]
pub struct Args {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by the commands that run an experiment.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Experiment file (TOML).
    pub file: PathBuf,
    /// Output folder; tables go in `<out>/<experiment>/`.
    #[arg(long, default_value = "cotune-out")]
    pub out: PathBuf,
    /// Store folder (default `.cotune/store`, or `COTUNE_STORE`).
    #[arg(long, env = "COTUNE_STORE", default_value = ".cotune/store")]
    pub store: PathBuf,
    /// Worker threads per process.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub workers: u64,
    /// Number of processes in a timely cluster.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub processes: u64,
    /// This process's index in the cluster (0-based).
    #[arg(long, default_value_t = 0)]
    pub process: u64,
    /// Host file of the cluster: one `host:port` line per process.
    #[arg(long)]
    pub hostfile: Option<PathBuf>,
    /// Seconds to wait for the other processes of a cluster to connect.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub connect_timeout: u64,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an experiment: compute what is missing, write the result tables.
    Run(RunArgs),
    /// Keep running: every save of the experiment file is applied as insertions and retractions.
    Watch(RunArgs),
    /// Show what a run would do: per stage, what is cached and what is new, and why.
    Plan {
        /// Experiment file.
        file: PathBuf,
        /// Store folder.
        #[arg(long, env = "COTUNE_STORE", default_value = ".cotune/store")]
        store: PathBuf,
        /// List every new instance.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Plots and an offline HTML page (report.html, with PNG and SVG files) from an
    /// experiment's output folder, or from each experiment in a folder of them.
    Report {
        /// An experiment's output folder (`cotune-out/quickstart`), or a folder of them.
        dir: PathBuf,
        /// Where to write (default `<dir>-report/`, beside the experiment's folder).
        #[arg(long)]
        to: Option<PathBuf>,
        /// A reproduction's published numbers, shown against the measured ones.
        #[arg(long)]
        expected: Option<PathBuf>,
    },
    /// Inspect and maintain the store.
    Store {
        /// Store folder.
        #[arg(
            long,
            env = "COTUNE_STORE",
            default_value = ".cotune/store",
            global = true
        )]
        store: PathBuf,
        /// What to do.
        #[command(subcommand)]
        action: StoreAction,
    },
}

/// Store maintenance.
#[derive(Debug, Subcommand)]
pub enum StoreAction {
    /// List entries.
    Ls,
    /// Verify every entry's recorded digests; exit 1 if any entry is damaged.
    Verify,
    /// Remove unfinished writes and damaged entries; with `--keep`, also entries no listed
    /// experiment uses.
    Gc {
        /// Experiment files whose instances are kept.
        #[arg(long)]
        keep: Vec<PathBuf>,
    },
    /// Copy one entry into a folder: its artifacts (a pruned model's weights.safetensors), its
    /// masks as safetensors, and its record as entry.json.
    Export {
        /// The entry's key, or its first 6 or more hex digits (a table's `key`, `prune_key`
        /// or `train_key` column).
        key: String,
        /// A new or empty folder to write into.
        #[arg(long)]
        to: PathBuf,
    },
}

/// Parses `args` and runs the command with the stages `table` makes (it is given the store
/// folder, where stages may keep derived caches). Returns the exit code.
pub fn main_with(
    args: impl IntoIterator<Item = String>,
    table: impl FnOnce(&std::path::Path) -> StageTable,
) -> u8 {
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        // clap reads an empty variable as an empty `--store` and blames the flag the user
        // did not give.
        Err(e)
            if std::env::var_os("COTUNE_STORE").is_some_and(|v| v.is_empty())
                && e.to_string().contains("--store") =>
        {
            eprintln!(
                "error: COTUNE_STORE is set but empty: unset it (the store is then \
                 .cotune/store) or name a folder, or pass --store DIR"
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    let store = match &args.command {
        // The one command that reads no store and needs no stages.
        Command::Report { dir, to, expected } => {
            return report_cmd::report(dir, to.as_deref(), expected.as_deref())
        }
        Command::Run(r) | Command::Watch(r) => &r.store,
        Command::Plan { store, .. } | Command::Store { store, .. } => store,
    };
    let stages = Arc::new(table(store));
    if let Err(e) = stages.check() {
        eprintln!("error: {e}");
        return EXIT_USAGE;
    }
    match args.command {
        Command::Run(r) => run_cmd::run(&r, stages, false),
        Command::Watch(r) => run_cmd::run(&r, stages, true),
        Command::Plan {
            file,
            store,
            verbose,
        } => plan_cmd::plan(&file, &store, verbose, stages.as_ref()),
        Command::Store { store, action } => store_cmd::store(&store, action, stages.as_ref()),
        Command::Report { dir, to, expected } => {
            report_cmd::report(&dir, to.as_deref(), expected.as_deref())
        }
    }
}

/// Loads and validates an experiment file.
pub fn load_experiment(
    file: &std::path::Path,
) -> Result<
    (crate::experiment::Experiment, crate::experiment::SourceMap),
    crate::experiment::ExperimentError,
> {
    let (raw, map) = crate::experiment::parse_file(file)?;
    let exp = crate::experiment::validate(&raw, &map)?;
    Ok((exp, map))
}

/// Loads, validates and plans an experiment file (a unified search: its round 0).
pub fn load_plan(
    file: &std::path::Path,
    stages: &StageTable,
) -> Result<crate::plan::Plan, crate::experiment::ExperimentError> {
    let (exp, map) = load_experiment(file)?;
    stages.plan(&exp, &map)
}
