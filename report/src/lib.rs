//! `cotune report`: plots and a self-contained HTML page from an experiment's Parquet tables.
//!
//! [`write_report`] reads one experiment's output folder ([`input`]), draws every plot its
//! tables support ([`plots`], each as SVG and PNG through [`figure`]), skips the others with
//! the reason, and writes `report.html` ([`html`]) with the plots inline and the tables whose
//! numbers it shows. A reproduction's `expected.toml` ([`expected`]) adds measured against
//! published. Nothing in the page is fetched: it opens offline.

#![forbid(missing_docs)]
#![forbid(unsafe_code)]

mod error;
pub mod expected;
pub mod figure;
pub mod html;
pub mod input;
pub mod plots;
pub mod regret;

pub use error::ReportError;
pub use expected::{Compared, Expected};
pub use input::{experiment_dirs, read_experiment, Experiment};

use std::path::{Path, PathBuf};

/// What a report wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The experiment.
    pub experiment: String,
    /// `report.html`.
    pub html: PathBuf,
    /// Each drawn plot's PNG and SVG.
    pub files: Vec<PathBuf>,
    /// Plots not drawn: title and why.
    pub skipped: Vec<(String, String)>,
    /// The expected file's metrics as measured (empty without one): what the page's first
    /// table shows, for the caller's verdict.
    pub compared: Vec<Compared>,
}

/// Writes the report of the experiment output in `dir` into `to` (created if missing), with
/// the reproduction's `expected` numbers where given.
pub fn write_report(
    dir: &Path,
    to: &Path,
    expected: Option<&Path>,
) -> Result<Written, ReportError> {
    let expected = expected.map(Expected::read).transpose()?;
    render_report(&read_experiment(dir)?, to, expected.as_ref())
}

/// [`write_report`] of an experiment already read.
pub fn render_report(
    exp: &Experiment,
    to: &Path,
    expected: Option<&Expected>,
) -> Result<Written, ReportError> {
    // A metric naming a column the table does not have is a bad file, found before any output.
    if let Some(e) = expected {
        e.check_columns(exp)?;
    }
    std::fs::create_dir_all(to).map_err(ReportError::io(to))?;
    let mut figures = vec![];
    let mut skipped = vec![];
    for (title, plot) in plots::candidates(exp) {
        match plot {
            Ok(p) => match figure::render(&p, to)? {
                Ok(f) => figures.push(f),
                Err(why) => skipped.push((title.to_string(), format!("drawing failed: {why}"))),
            },
            Err(why) => skipped.push((title.to_string(), why)),
        }
    }
    let compared = expected.map_or_else(Vec::new, |e| e.compare(exp));
    let page = html::page(
        exp,
        &figures,
        &skipped,
        expected.map(|e| (e, compared.as_slice())),
    );
    let html = to.join("report.html");
    std::fs::write(&html, page).map_err(ReportError::io(&html))?;
    Ok(Written {
        experiment: exp.name.clone(),
        html,
        files: figures
            .iter()
            .flat_map(|f| [f.png.clone(), f.svg_file.clone()])
            .collect(),
        skipped,
        compared,
    })
}

/// Writes `index.html` into `to`: a link to each written report (relative where the report
/// lies below `to`) and the experiments' fronts on one plot ([`plots::fronts::Fronts`], its
/// PNG and SVG beside the page). Returns the page as a [`Written`] (experiment `index`): its
/// path, the fronts' files, or why they were not drawn.
pub fn write_index(
    experiments: &[Experiment],
    reports: &[Written],
    to: &Path,
) -> Result<Written, ReportError> {
    std::fs::create_dir_all(to).map_err(ReportError::io(to))?;
    let mut links = vec![];
    for w in reports {
        let link = match w.html.strip_prefix(to) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => format!("file://{}", w.html.display()),
        };
        links.push((w.experiment.clone(), link));
    }
    let drawn = match plots::fronts::Fronts::new(experiments) {
        Ok(p) => figure::render(&p, to)?,
        Err(why) => Err(why),
    };
    let page = html::index_page(&links, drawn.as_ref().map_err(String::as_str));
    let path = to.join("index.html");
    std::fs::write(&path, page).map_err(ReportError::io(&path))?;
    let (files, skipped) = match drawn {
        Ok(f) => (vec![f.png, f.svg_file], vec![]),
        Err(why) => (vec![], vec![("fronts of all experiments".to_string(), why)]),
    };
    Ok(Written {
        experiment: "index".into(),
        html: path,
        files,
        skipped,
        compared: vec![],
    })
}
