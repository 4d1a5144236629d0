//! `cotune store ls | verify | gc | export`.

use super::{load_experiment, StoreAction, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::stage::StageTable;
use crate::store::{read_entry, EntryState, RunLock, Store};
use std::collections::BTreeSet;
use std::path::Path;

/// Runs a store command; returns the exit code.
pub fn store(dir: &Path, action: StoreAction, stages: &StageTable) -> u8 {
    if !dir.join("CACHEDIR.TAG").exists() {
        eprintln!("error: {} is not a cotune store", dir.display());
        return EXIT_USAGE;
    }
    let store = match Store::open(dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let entries = match store.entries() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILED;
        }
    };
    match action {
        StoreAction::Export { key, to } => super::export_cmd::export(&store, &entries, &key, &to),
        StoreAction::Ls => {
            say!(
                "{:<14} {:<12} {:>9} {:>10}  summary",
                "key",
                "stage",
                "version",
                "seconds"
            );
            for (k, d) in &entries {
                match read_entry(d, Some(k)) {
                    EntryState::Valid(m) => {
                        let summary: Vec<String> = [
                            "accuracy",
                            "latency_us_median",
                            "speedup_vs_dense",
                            "sparsity",
                        ]
                        .iter()
                        .filter_map(|c| {
                            m.metrics
                                .get(*c)
                                .and_then(|v| v.as_f64())
                                .map(|x| format!("{c}={x:.4}"))
                        })
                        .collect();
                        say!(
                            "{:<14} {:<12} {:>9} {:>10.2}  {}",
                            k.short(),
                            m.stage,
                            m.version,
                            m.provenance.duration_s,
                            summary.join(" ")
                        );
                    }
                    EntryState::Damaged(why) => say!("{:<14} DAMAGED: {why}", k.short()),
                    EntryState::Missing => {}
                }
            }
            say!("{} entries", entries.len());
            EXIT_OK
        }
        StoreAction::Verify => {
            let mut damaged = 0;
            for stray in store.strays().unwrap_or_default() {
                say!("damaged {}: not an entry bucket folder", stray.display());
                damaged += 1;
            }
            for (k, d) in &entries {
                if let EntryState::Damaged(why) = read_entry(d, Some(k)) {
                    say!("damaged {}: {why}", k.hex());
                    damaged += 1;
                }
            }
            say!("{} entries verified, {damaged} damaged", entries.len());
            if damaged > 0 {
                EXIT_FAILED
            } else {
                EXIT_OK
            }
        }
        StoreAction::Gc { keep } => {
            // `--keep` removes what no kept experiment uses, so it runs only while no `run` or
            // `watch` uses the store (they may be computing, or about to read, any entry), and
            // decides what to keep once it holds the store (a search finishing rounds meanwhile
            // keeps them). It does not wait: a `watch` may hold the store for days.
            let _runs = if keep.is_empty() {
                None
            } else {
                match RunLock::try_exclusive(&store.root().join("locks")) {
                    Ok(Some(l)) => Some(l),
                    Ok(None) => {
                        eprintln!(
                            "error: a `cotune run` or `watch` is using {}: `store gc --keep` removes entries it may need, so it runs only when none is (try again when they end; plain `store gc` is safe meanwhile)",
                            dir.display()
                        );
                        return EXIT_FAILED;
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        return EXIT_FAILED;
                    }
                }
            };
            let keep_set = if keep.is_empty() {
                None
            } else {
                let mut set = BTreeSet::new();
                for f in &keep {
                    match kept_plan(f, stages, &store) {
                        Ok(p) => set.extend(p.nodes.keys().copied()),
                        Err(e) => {
                            eprintln!("{e}");
                            return EXIT_USAGE;
                        }
                    }
                }
                Some(set)
            };
            match store.gc(keep_set.as_ref()) {
                Ok((n, bytes, locks)) => {
                    say!(
                        "removed {n} folders, {:.1} MiB, and {locks} unused lock files",
                        bytes as f64 / (1 << 20) as f64
                    );
                    EXIT_OK
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    EXIT_FAILED
                }
            }
        }
    }
}

/// The instances an experiment file keeps: its plan, or for a unified search every round the
/// store holds (replayed from its measurements).
fn kept_plan(
    file: &std::path::Path,
    stages: &StageTable,
    store: &Store,
) -> Result<crate::plan::Plan, crate::experiment::ExperimentError> {
    let (exp, map) = load_experiment(file)?;
    if exp.search.is_none() {
        return stages.plan(&exp, &map);
    }
    let table = std::sync::Arc::new(stages.clone());
    let (u, _) = crate::search::Unified::new(exp, map, table, store.clone(), false)?;
    Ok(u.replay())
}
