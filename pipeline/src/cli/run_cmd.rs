//! `cotune run` and `cotune watch`.

use super::summary::print_summary;
use super::{load_experiment, RunArgs, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::cluster::Cluster;
use crate::driver::{self, Output, PlanSource};
use crate::engine::Engine;
use crate::key::AnyKey;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::stage::StageTable;
use crate::store::{MeasureLock, RunLock, Store};
use results::{Row, RunSummary};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

struct Once {
    plan: Option<Plan>,
    print: bool,
    stages: Vec<&'static str>,
}

impl PlanSource for Once {
    fn next(&mut self, _first: bool, _stopped: &dyn Fn() -> bool) -> Option<Plan> {
        self.plan.take()
    }
    fn epoch_done(&mut self, summary: &RunSummary, pareto: &[Row], failed: u64) {
        if self.print {
            print_summary(summary, pareto, failed, &self.stages);
        }
    }
}

struct Watch {
    file: PathBuf,
    stages: Arc<StageTable>,
    first: Option<Plan>,
    last_text: String,
    experiment: String,
    /// The applied plan's instances: key → stage.
    applied: BTreeMap<AnyKey, &'static str>,
}

/// Each instance of `plan`, by key.
fn instances(plan: &Plan) -> BTreeMap<AnyKey, &'static str> {
    plan.nodes.iter().map(|(k, n)| (*k, n.stage)).collect()
}

/// Why `watch` refuses a unified search.
const WATCH_NO_SEARCH: &str =
    "watch does not run a unified search (its rounds depend on results); use `cotune run`";

impl PlanSource for Watch {
    fn next(&mut self, _first: bool, stopped: &dyn Fn() -> bool) -> Option<Plan> {
        if let Some(p) = self.first.take() {
            self.applied = instances(&p);
            return Some(p);
        }
        loop {
            std::thread::sleep(Duration::from_millis(300));
            if stopped() {
                return None;
            }
            let Ok(text) = std::fs::read_to_string(&self.file) else {
                continue;
            };
            if text == self.last_text {
                continue;
            }
            self.last_text = text;
            // A save that turns the file into a unified search is refused like one at the
            // start (it was run as a grid).
            let loaded = load_experiment(&self.file).and_then(|(exp, map)| match exp.search {
                Some(_) => Err(map.error(map.section("search"), WATCH_NO_SEARCH)),
                None => self.stages.plan(&exp, &map),
            });
            match loaded {
                Ok(plan) if plan.experiment != self.experiment => {
                    tell!(
                        "{}: the experiment name changed; restart watch to follow a new experiment",
                        self.file.display()
                    );
                }
                Ok(plan) => {
                    // The summary counts the instances the edit added or kept; say which it
                    // dropped (their rows leave the tables; the store keeps their entries).
                    let now = instances(&plan);
                    let mut removed: BTreeMap<&str, usize> = BTreeMap::new();
                    for (_, stage) in self.applied.iter().filter(|(k, _)| !now.contains_key(*k)) {
                        *removed.entry(stage).or_default() += 1;
                    }
                    let removed: Vec<String> =
                        removed.iter().map(|(s, n)| format!("{n} {s}")).collect();
                    tell!(
                        "{} changed: applying{}",
                        self.file.display(),
                        if removed.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " (no longer in it, removed or replaced: {})",
                                removed.join(", ")
                            )
                        }
                    );
                    self.applied = now;
                    return Some(plan);
                }
                Err(e) => {
                    tell!("{e}\n(keeping the last valid version; fix the file and save again)")
                }
            }
        }
    }
    fn epoch_done(&mut self, summary: &RunSummary, pareto: &[Row], failed: u64) {
        print_summary(summary, pareto, failed, &self.stages.names());
        tell!("watching {} (Ctrl-C to stop)", self.file.display());
    }
}

fn addresses(args: &RunArgs) -> Result<Vec<String>, String> {
    if args.processes <= 1 {
        return match &args.hostfile {
            Some(h) => Err(format!(
                "--hostfile {} without --processes: a cluster needs both (one line per process)",
                h.display()
            )),
            None => Ok(vec![]),
        };
    }
    let Some(hostfile) = &args.hostfile else {
        return Ok((0..args.processes)
            .map(|i| format!("127.0.0.1:{}", 2101 + i))
            .collect());
    };
    let text =
        std::fs::read_to_string(hostfile).map_err(|e| format!("{}: {e}", hostfile.display()))?;
    let lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    // host:port, the port a number below 65,536 (else the run failed when it connected).
    if let Some(bad) = lines.iter().find(|l| {
        l.rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
    }) {
        return Err(format!(
            "{}: `{bad}` is not host:port (a port below 65536)",
            hostfile.display()
        ));
    }
    if let Some((i, dup)) = lines
        .iter()
        .enumerate()
        .find(|(i, l)| lines[..*i].contains(l))
    {
        return Err(format!(
            "{}: `{dup}` is listed twice (as process {i} and an earlier one): each process needs \
             an address of its own",
            hostfile.display()
        ));
    }
    if lines.len() != args.processes as usize {
        return Err(format!(
            "{}: {} addresses for --processes {}",
            hostfile.display(),
            lines.len(),
            args.processes
        ));
    }
    Ok(lines)
}

/// Runs (or watches) an experiment; returns the exit code.
pub fn run(args: &RunArgs, stages: Arc<StageTable>, watch: bool) -> u8 {
    if args.process >= args.processes {
        eprintln!(
            "error: --process {} is not below --processes {}",
            args.process, args.processes
        );
        return EXIT_USAGE;
    }
    if watch && args.processes > 1 {
        eprintln!("error: watch runs in one process (use --workers for threads)");
        return EXIT_USAGE;
    }
    // Found now, not after the run has computed everything and cannot write its tables.
    if args.out.exists() && !args.out.is_dir() {
        eprintln!(
            "error: --out {} is a file; the results go in a folder",
            args.out.display()
        );
        return EXIT_USAGE;
    }
    let addresses = match addresses(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    // Each worker trains with candle's thread pool: keep workers × threads within the cores.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var(
            "RAYON_NUM_THREADS",
            (cores / args.workers as usize).max(1).to_string(),
        );
    }
    let (exp, map) = match load_experiment(&args.file) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_USAGE;
        }
    };
    if watch && exp.search.is_some() {
        eprintln!("error: {WATCH_NO_SEARCH}");
        return EXIT_USAGE;
    }
    // A grid is planned before the store is opened, so that a file the stages reject when they
    // plan (a data set that cannot be built) leaves no store behind; a unified search plans its
    // first round from what the store holds.
    let grid = match exp.search {
        Some(_) => None,
        None => match stages.plan(&exp, &map) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("{e}");
                return EXIT_USAGE;
            }
        },
    };
    // Found now, not after the run has computed everything (and after a grid's plan, so that a
    // file its stages reject leaves no folder behind).
    let out_existed = args.out.exists();
    if let Err(e) = results::check_writable(&args.out, &exp.name) {
        eprintln!(
            "error: --out {} cannot take the results: {e}",
            args.out.display()
        );
        return EXIT_USAGE;
    }
    let store = match Store::open(&args.store).and_then(|s| s.check_writable().map(|()| s)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            // Nothing ran: take back the folders the check above made, where they are empty.
            if let Ok(gens) = results::generations_dir(&args.out, &exp.name) {
                let _ = std::fs::remove_dir(gens);
            }
            if !out_existed {
                let _ = std::fs::remove_dir(&args.out);
            }
            return EXIT_USAGE;
        }
    };
    // Held until the run ends: `store gc --keep` refuses to run meanwhile (and a run waits for
    // one in progress). Where the lock cannot be taken (a file system without locks), the run
    // goes on without it, as runs did before it existed.
    let _runs = match RunLock::shared(&store.root().join("locks"), || {
        eprintln!(
            "waiting for a `cotune store gc --keep` on {} to finish",
            args.store.display()
        )
    }) {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("warning: {e}: a `store gc --keep` could remove what this run uses");
            None
        }
    };
    let mut unified = None;
    let plan = match grid {
        Some(p) => p,
        None => {
            let print = args.process == 0;
            match crate::search::Unified::new(exp, map, stages.clone(), store.clone(), print) {
                Ok((u, plan)) => {
                    unified = Some(u);
                    plan
                }
                Err(e) => {
                    eprintln!("{e}");
                    return EXIT_USAGE;
                }
            }
        }
    };
    let verdict = unified.as_ref().map(crate::search::Unified::verdict);
    // Half-written entries of runs that died are never read; clear them so they do not pile up.
    if let Err(e) = store.sweep_tmp() {
        eprintln!("warning: could not clear unfinished store writes: {e}");
    }
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    // A unified search's later rounds are planned on process 0 from the measured results; the
    // other processes plan them again from the shared store as their work reaches them
    // (`engine::LaterRounds`).
    let (unified, later_rounds) = match unified {
        Some(u) if args.process > 0 => (None, Some(Mutex::new(Box::new(u) as Box<_>))),
        u => (u, None),
    };
    let engine = Arc::new(Engine {
        store,
        table: stages.as_ref().clone(),
        registry: Arc::new(RwLock::new(plan.nodes.clone())),
        measure: MeasureLock::for_host(),
        experiment: plan.experiment.clone(),
        progress: Progress::new(args.quiet || args.process > 0, stages.names()),
        host,
        digest: RwLock::new(plan.digest()),
        later_rounds,
    });
    // Where a path cannot be resolved (it should exist by now), as given.
    let resolved = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    // The store by its id, not its path: a store folder of its own on each host at the same
    // path would split the work between stores (the path is shown, not compared).
    let store_id = if args.processes > 1 {
        match engine.store.id() {
            Ok(id) => id,
            Err(e) => {
                eprintln!("{e}");
                return EXIT_FAILED;
            }
        }
    } else {
        String::new()
    };
    let identity = format!(
        "experiment {} (plan {})\nprocesses {}\nworkers {}\nhosts {}\nstore {store_id}{}{}\nout {}",
        plan.experiment,
        plan.digest(),
        args.processes,
        args.workers,
        addresses.join(" "),
        crate::cluster::NOTE,
        resolved(&args.store).display(),
        resolved(&args.out).display()
    );
    let cluster = Cluster {
        workers: args.workers as usize,
        processes: args.processes as usize,
        process: args.process as usize,
        addresses,
        connect_timeout: Duration::from_secs(args.connect_timeout),
        identity,
    };
    let source: Box<dyn PlanSource> = if let Some(u) = unified {
        Box::new(u)
    } else if watch {
        Box::new(Watch {
            file: args.file.clone(),
            stages,
            experiment: plan.experiment.clone(),
            last_text: std::fs::read_to_string(&args.file).unwrap_or_default(),
            first: Some(plan),
            applied: BTreeMap::new(),
        })
    } else {
        Box::new(Once {
            plan: Some(plan),
            print: args.process == 0,
            stages: stages.names(),
        })
    };
    let out = Output {
        out: args.out.clone(),
    };
    let results_dir = out.out.join(&engine.experiment);
    match driver::execute(engine, &cluster, out.clone(), source) {
        Ok(report) => {
            for e in &report.errors {
                eprintln!("error writing results: {e}");
            }
            // Process 0 prints the summary; another says why it exits 1, if it does.
            if args.process > 0 && report.failed > 0 {
                eprintln!(
                    "cluster process {}: {} instance(s) computed or read here failed (their \
                     rows say why; process 0 prints the run's summary)",
                    args.process, report.failed
                );
            }
            if args.process == 0 && report.errors.is_empty() {
                say!("results: {}", results_dir.display());
            } else if args.process == 0 {
                say!(
                    "results: {} may not show this run's tables (the errors above say why)",
                    results_dir.display()
                );
            }
            let unmet = verdict
                .and_then(|v| v.lock().ok().map(|v| v.unmet.clone()))
                .unwrap_or_default();
            if !unmet.is_empty() {
                eprintln!("no trial meets the search's constraints:");
                for line in &unmet {
                    eprintln!("  {line}");
                }
            }
            if report.failed > 0 || !report.errors.is_empty() || !unmet.is_empty() {
                EXIT_FAILED
            } else {
                EXIT_OK
            }
        }
        // Processes started differently: bad usage, and nothing ran.
        Err(e @ driver::DriverError::Cluster(crate::cluster::ClusterError::Refused { .. })) => {
            eprintln!("error: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_hostfile_line_that_is_not_host_and_port_is_named() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts");
        let parse = |text: &str| {
            std::fs::write(&hosts, text).unwrap();
            let cli = Cli::try_parse_from([
                "cotune",
                "exp.toml",
                "--processes",
                "2",
                "--hostfile",
                hosts.to_str().unwrap(),
            ])
            .unwrap();
            addresses(&cli.run)
        };
        assert_eq!(
            parse("10.0.0.1:2101\n[::1]:2102\n").unwrap(),
            ["10.0.0.1:2101", "[::1]:2102"]
        );
        for bad in ["garbage", "localhost:99999", ":2101", "host:"] {
            let e = parse(&format!("10.0.0.1:2101\n{bad}\n")).unwrap_err();
            assert!(e.contains(&format!("`{bad}` is not host:port")), "{e}");
        }
    }

    #[test]
    fn a_watch_waiting_for_a_save_gives_up_when_a_worker_has_panicked() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = Watch {
            file: dir.path().join("never-saved.toml"),
            stages: Arc::new(StageTable::new()),
            first: None,
            last_text: String::new(),
            experiment: "x".into(),
            applied: BTreeMap::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let stopped = || t0.elapsed() > Duration::from_millis(700);
            let _ = tx.send(watch.next(false, &stopped).is_none());
        });
        let gave_up = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the watch kept waiting for a save after the abort");
        assert!(gave_up, "a watch that gives up returns no plan");
    }
}
