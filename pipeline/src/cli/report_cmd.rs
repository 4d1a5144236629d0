//! `cotune report OUT_DIR`: plots and an offline HTML page from an experiment's tables; for a
//! folder of several experiments, one report each and an index with their fronts together.

use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use std::path::{Path, PathBuf};

/// Writes the report of each experiment output under `dir`; returns the exit code (2 when
/// there are no cotune tables, an unknown schema version or a bad `expected.toml`; 1 when a
/// metric of `expected` is outside its tolerance or not measured).
pub fn report(dir: &Path, to: Option<&Path>, expected: Option<&Path>) -> u8 {
    // Arguments that name the wrong thing are usage errors (they read as failed reports).
    if let Some(e) = expected.filter(|e| !e.is_file()) {
        eprintln!("error: --expected {}: no such file", e.display());
        return EXIT_USAGE;
    }
    // The folder, or the nearest of its parents that exists, must be a folder.
    if let Some((t, file)) = to.and_then(|t| {
        t.ancestors()
            .find(|a| a.exists())
            .filter(|a| !a.is_dir())
            .map(|a| (t, a))
    }) {
        if file == t {
            eprintln!(
                "error: --to {} is a file; a report is a folder",
                t.display()
            );
        } else {
            eprintln!(
                "error: --to {}: {} is a file, so no folder can be made under it",
                t.display(),
                file.display()
            );
        }
        return EXIT_USAGE;
    }
    let dirs = match report::experiment_dirs(dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if expected.is_some() && dirs.len() > 1 {
        eprintln!(
            "error: --expected applies to one experiment, and {} holds {}: give one experiment's folder",
            dir.display(),
            dirs.len()
        );
        return EXIT_USAGE;
    }
    let fail = |e: report::ReportError| {
        eprintln!("error: {e}");
        if e.is_bad_input() {
            EXIT_USAGE
        } else {
            EXIT_FAILED
        }
    };
    let expected = match expected.map(report::Expected::read).transpose() {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    // Each experiment is read once: for its report and, with several, for the index.
    let (mut experiments, mut written) = (vec![], vec![]);
    for d in &dirs {
        let dest = destination(d, to, dirs.len() > 1);
        let exp = match report::read_experiment(d) {
            Ok(exp) => exp,
            Err(e) => return fail(e),
        };
        match report::render_report(&exp, &dest, expected.as_ref()) {
            Ok(w) => {
                say!(
                    "{}: {} ({} plot files)",
                    w.experiment,
                    w.html.display(),
                    w.files.len()
                );
                for (title, why) in &w.skipped {
                    say!("  not drawn: {title}: {why}");
                }
                written.push(w);
                experiments.push(exp);
            }
            Err(e) => return fail(e),
        }
    }
    if written.len() > 1 {
        // Several experiments: an index beside their reports, with their fronts on one plot.
        match report::write_index(&experiments, &written, to.unwrap_or(dir)) {
            Ok(index) => {
                say!("index: {}", index.html.display());
                for (title, why) in &index.skipped {
                    say!("  not drawn: {title}: {why}");
                }
            }
            Err(e) => return fail(e),
        }
    }
    match (&expected, written.as_slice()) {
        (Some(e), [w]) => expected_verdict(e, w),
        _ => EXIT_OK,
    }
}

/// Says how the measured values stand against `expected` and returns 1 when one is outside
/// its tolerance or was not measured (regression: an expected file of another experiment
/// matched nothing, every metric read "not measured", and the report exited 0).
fn expected_verdict(expected: &report::Expected, written: &report::Written) -> u8 {
    let compared = &written.compared;
    let missing: Vec<&str> = compared
        .iter()
        .filter(|c| c.measured.is_none() && c.non_finite == 0)
        .map(|c| c.metric.label.as_str())
        .collect();
    let not_numbers: Vec<&str> = compared
        .iter()
        .filter(|c| c.non_finite > 0)
        .map(|c| c.metric.label.as_str())
        .collect();
    let averaged = compared.iter().filter(|c| c.rows > 1).count();
    let outside: Vec<&str> = compared
        .iter()
        .filter(|c| c.within() == Some(false))
        .map(|c| c.metric.label.as_str())
        .collect();
    let within = compared.iter().filter(|c| c.within() == Some(true)).count();
    let untoleranced = compared
        .iter()
        .filter(|c| c.measured.is_some() && c.within().is_none())
        .count();
    say!(
        "expected ({}): {} metric(s), {within} within tolerance, {} outside, {untoleranced} \
         measured without a tolerance, {} not measured",
        expected.figure,
        compared.len(),
        outside.len(),
        missing.len() + not_numbers.len()
    );
    if averaged > 0 {
        say!(
            "  {averaged} metric(s) are the mean of several matching rows (the report's `rows` column)"
        );
    }
    if !not_numbers.is_empty() {
        tell!(
            "error: a matching row's value is NaN or infinite (not measured): {}",
            not_numbers.join(", ")
        );
    }
    if !outside.is_empty() {
        tell!("error: outside the tolerance: {}", outside.join(", "));
    }
    if !missing.is_empty() {
        tell!(
            "error: no successful row of {}'s `{}` table that matches has a value in the \
             metric's column: {} (is this the experiment the expected file is for?)",
            written.experiment,
            expected.table,
            missing.join(", ")
        );
    }
    if outside.is_empty() && missing.is_empty() && not_numbers.is_empty() {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

/// Where a report goes: `--to` (one folder per experiment below it when there are several),
/// else `<out>/<experiment>-report/` beside the experiment's folder (not inside it: that is
/// a generation, replaced by the next run).
fn destination(exp_dir: &Path, to: Option<&Path>, several: bool) -> PathBuf {
    let name = exp_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "experiment".into());
    match to {
        Some(t) if several => t.join(&name),
        Some(t) => t.to_path_buf(),
        None => exp_dir
            .parent()
            .unwrap_or(Path::new("."))
            .join(format!("{name}-report")),
    }
}
