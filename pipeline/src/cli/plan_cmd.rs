//! `cotune plan`: what a run would compute, what is cached, and for each new instance which
//! part of its key is new (config fields that differ from the closest stored instance of the
//! same stage, and inputs that are themselves new).

use super::{load_experiment, EXIT_OK, EXIT_USAGE};
use crate::key::AnyKey;
use crate::plan::{Node, Plan};
use crate::stage::StageTable;
use crate::store::{read_entry, EntryState, Meta, Store};
use std::collections::BTreeMap;
use std::path::Path;

/// Why an instance is new, in words.
/// `stored` holds every verified entry of the store (read once per `plan`).
pub fn why_new(node: &Node, plan: &Plan, stored: &BTreeMap<AnyKey, Meta>) -> String {
    let new_inputs: Vec<String> = node
        .parents
        .iter()
        .filter(|k| !stored.contains_key(k))
        .map(|k| {
            format!(
                "{} {}",
                plan.nodes.get(k).map_or("input", |n| n.stage),
                k.short()
            )
        })
        .collect();
    let fields = node.canon.fields();
    let closest = stored
        .values()
        .filter(|m| m.stage == node.stage)
        .max_by_key(|m| {
            m.config
                .fields()
                .iter()
                .zip(fields)
                .filter(|(a, b)| a == b)
                .count()
        });
    let mut parts = vec![];
    match closest {
        None => parts.push("first instance of this stage in the store".to_owned()),
        Some(m) => {
            let diff: Vec<String> = fields
                .iter()
                .filter(|f| !m.config.fields().contains(f))
                .map(|(name, v)| format!("{name}={v}"))
                .collect();
            if !diff.is_empty() {
                parts.push(format!("new config {}", diff.join(", ")));
            }
            if m.version != node.version {
                parts.push(format!(
                    "stage version {} (stored {})",
                    node.version, m.version
                ));
            }
            // An input of a kind this instance no longer has (a tuning with `calibrate =
            // false` has no calibration).
            let stage_of = |hex: &String| {
                AnyKey::from_hex(hex)
                    .and_then(|k| stored.get(&k).map(|i| i.stage.clone()))
                    .unwrap_or_else(|| "input".into())
            };
            let ours: Vec<String> = node
                .parents
                .iter()
                .map(|k| {
                    plan.nodes.get(k).map_or_else(
                        || stored.get(k).map_or("input".into(), |i| i.stage.clone()),
                        |n| n.stage.to_string(),
                    )
                })
                .collect();
            // (An input no longer in the store, of a stage unknown, is not named.)
            let dropped: Vec<String> = m
                .inputs
                .iter()
                .map(stage_of)
                .filter(|stage| stage != "input" && !ours.contains(stage))
                .collect();
            if !dropped.is_empty() {
                parts.push(format!("no {} input", dropped.join(", ")));
            }
        }
    }
    if !new_inputs.is_empty() {
        parts.push(format!("new input {}", new_inputs.join(", ")));
    }
    if parts.is_empty() {
        parts.push(
            "same config and inputs as a stored instance of another experiment layout".into(),
        );
    }
    parts.join("; ")
}

/// Per stage: instances cached, and the new ones.
type StageCounts<'a> = (usize, Vec<(AnyKey, &'a Node)>);

/// Prints the plan; returns the exit code.
pub fn plan(file: &Path, store_dir: &Path, verbose: bool, stages: &StageTable) -> u8 {
    let loaded = load_experiment(file).and_then(|(exp, map)| {
        if exp.search.is_none() {
            return Ok((stages.plan(&exp, &map)?, None));
        }
        let store = Store::open(store_dir).map_err(|e| map.error(0..0, e.to_string()))?;
        let table = std::sync::Arc::new(stages.clone());
        let (u, plan) = crate::search::Unified::new(exp, map, table, store, false)?;
        Ok((plan, Some(u.later_rounds())))
    });
    let (plan, later) = match loaded {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_USAGE;
        }
    };
    // A store that does not exist yet holds nothing: plan only reads, it creates no store.
    let store = match store_dir.exists().then(|| Store::open(store_dir)) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    // Each entry is read and verified once; every check below uses these maps. A damaged
    // entry is computed again under its own key: the plan says so rather than why it is new.
    let mut stored: BTreeMap<AnyKey, Meta> = BTreeMap::new();
    let mut damaged: BTreeMap<AnyKey, String> = BTreeMap::new();
    for (k, dir) in store
        .map(|s| s.entries().unwrap_or_default())
        .unwrap_or_default()
    {
        match read_entry(&dir, Some(&k)) {
            EntryState::Valid(m) => {
                stored.insert(k, *m);
            }
            EntryState::Damaged(why) => {
                damaged.insert(k, why);
            }
            EntryState::Missing => {}
        }
    }
    let mut per: BTreeMap<&str, StageCounts> = BTreeMap::new();
    for (k, n) in &plan.nodes {
        let e = per.entry(n.stage).or_default();
        if stored.contains_key(k) {
            e.0 += 1;
        } else {
            e.1.push((*k, n));
        }
    }
    say!(
        "experiment {} ({} instances)",
        plan.experiment,
        plan.nodes.len()
    );
    say!(
        "{:<12} {:>7} {:>7} {:>7}",
        "stage",
        "total",
        "cached",
        "new"
    );
    for stage in stages.names() {
        let (cached, new) = per.get(stage).map_or((0, 0), |(c, n)| (*c, n.len()));
        say!("{stage:<12} {:>7} {cached:>7} {new:>7}", cached + new);
    }
    for stage in stages.names() {
        let Some((_, new)) = per.get(stage) else {
            continue;
        };
        let shown = if verbose {
            new.len()
        } else {
            new.len().min(10)
        };
        for (k, n) in new.iter().take(shown) {
            let why = match damaged.get(k) {
                Some(d) => format!("stored entry damaged ({d}): computed again"),
                None => why_new(n, &plan, &stored),
            };
            say!("  new {stage} {} [{}]: {why}", k.short(), n.label());
        }
        if shown < new.len() {
            say!(
                "  ... {} more new {stage} instances (--verbose lists them)",
                new.len() - shown
            );
        }
    }
    if let Some(later) = later {
        say!("{later}");
    }
    EXIT_OK
}
