//! Generations: each run (and each `watch` step) writes all of its tables into a fresh folder,
//! and the experiment's folder `<out>/<experiment>` — a symbolic link — is switched to it with
//! one atomic rename once every table in it is whole.
//!
//! ```text
//! <out>/<experiment>                      -> .<experiment>.generations/<token>
//! <out>/.<experiment>.generations/<token>/{train,prune,…}/part-NNN.parquet, pareto.parquet, run.json
//! ```
//!
//! A one-table read (`pd.read_parquet("<out>/<experiment>/prune")`) goes through the link as
//! before. A reader that wants several tables of one step resolves the link once
//! ([`current`], or `os.path.realpath` in Python) and reads them under the folder it names: they
//! are always of one step. The previous generations are kept for a while, so that a reader that
//! resolved the link just before a switch can finish.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::atomic::sync_dir;
use crate::error::ResultsError;
use crate::table::{check_name, part_file_name};
use crate::value::Row;
use crate::write::{write_parquet, TableMeta};

/// Published generations kept besides the current one.
const KEEP_PUBLISHED: usize = 2;
/// An unpublished generation older than this is of a run that died (or could not write its
/// tables) and is removed: a live step's workers write their parts at one frontier, and its lead
/// publishes them within two minutes of writing its own or gives up (the engine's
/// `PARTS_TIMEOUT`), so no generation is published this long after its folder was made. The
/// margin covers a process suspended mid-step and clocks that differ between hosts sharing
/// `--out`.
const STALE_UNPUBLISHED: Duration = Duration::from_secs(3600);
/// The file that marks a generation as published (written just before the switch).
const PUBLISHED: &str = ".published";
/// The folder of per-worker "my parts are written" markers.
const WRITTEN: &str = ".written";

/// What names a folder moved aside from where an experiment's link goes
/// (`<out>/<experiment>.old-<pid>-<nanos>`); reports skip such folders.
pub const MOVED_ASIDE: &str = ".old-";

/// Whether a folder name is one [`Generation::publish`] moved aside.
pub fn is_moved_aside(name: &str) -> bool {
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit());
    name.rsplit_once(MOVED_ASIDE).is_some_and(|(exp, rest)| {
        !exp.is_empty()
            && rest
                .split_once('-')
                .is_some_and(|(a, b)| digits(a) && digits(b))
    })
}

/// `<out>/.<experiment>.generations`: every generation of one experiment.
pub fn generations_dir(out: &Path, experiment: &str) -> Result<PathBuf, ResultsError> {
    check_name("experiment", experiment)?;
    Ok(out.join(format!(".{experiment}.generations")))
}

/// Checks that `out` can take `experiment`'s tables: creates `<out>/.<experiment>.generations`
/// and writes (then removes) a file in it and one in `out`, where the link to them goes, so
/// that a run that could not write its tables fails before it computes anything.
pub fn check_writable(out: &Path, experiment: &str) -> Result<(), ResultsError> {
    let gens = generations_dir(out, experiment)?;
    fs::create_dir_all(&gens).map_err(ResultsError::io(&gens))?;
    for dir in [out, gens.as_path()] {
        let probe = dir.join(format!(".{experiment}.probe-{}", unique()));
        fs::write(&probe, b"").map_err(ResultsError::io(&probe))?;
        let _ = fs::remove_file(&probe);
    }
    Ok(())
}

/// The folder that `<out>/<experiment>` names right now (the link resolved once; a plain folder
/// from before generations is returned as it is).
pub fn current(out: &Path, experiment: &str) -> Result<PathBuf, ResultsError> {
    check_name("experiment", experiment)?;
    let link = out.join(experiment);
    fs::canonicalize(&link).map_err(ResultsError::io(&link))
}

/// One generation of an experiment's tables, being written.
#[derive(Clone, Debug)]
pub struct Generation {
    out: PathBuf,
    experiment: String,
    token: String,
    dir: PathBuf,
}

impl Generation {
    /// The generation `token` (a folder name every worker of the step agrees on), created if
    /// needed.
    pub fn new(out: &Path, experiment: &str, token: &str) -> Result<Self, ResultsError> {
        check_name("generation", token)?;
        let dir = generations_dir(out, experiment)?.join(token);
        fs::create_dir_all(dir.join(WRITTEN)).map_err(ResultsError::io(&dir))?;
        Ok(Generation {
            out: out.to_owned(),
            experiment: experiment.to_owned(),
            token: token.to_owned(),
            dir,
        })
    }

    /// Its token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder of a stage's table in it.
    pub fn table_dir(&self, stage: &str) -> Result<PathBuf, ResultsError> {
        check_name("stage", stage)?;
        Ok(self.dir.join(stage))
    }

    /// Writes worker `worker`'s part of a stage table (an empty part when `rows` is empty, with
    /// the columns of `meta.schema`).
    pub fn write_part(
        &self,
        stage: &str,
        worker: usize,
        rows: &[Row],
        meta: &TableMeta,
    ) -> Result<PathBuf, ResultsError> {
        let path = self.table_dir(stage)?.join(part_file_name(worker));
        write_parquet(&path, rows, meta)?;
        Ok(path)
    }

    /// Records that `worker` has written all its parts.
    pub fn mark_written(&self, worker: usize) -> Result<(), ResultsError> {
        // Not synced: the marker only tells worker 0 of this live step that the parts are
        // there (they are synced); after a crash the step is never published anyway.
        let path = self.dir.join(WRITTEN).join(format!("w{worker}"));
        fs::write(&path, b"").map_err(ResultsError::io(&path))
    }

    /// Records that `worker` could not write its parts, so that worker 0 stops waiting for them
    /// at once ([`Self::wait_written`]) instead of after its timeout.
    pub fn mark_failed(&self, worker: usize) -> Result<(), ResultsError> {
        let path = self.dir.join(WRITTEN).join(format!("failed-w{worker}"));
        fs::write(&path, b"").map_err(ResultsError::io(&path))
    }

    /// Waits until workers `0..workers` have all marked their parts written, at most `timeout`
    /// and only while `give_up` is false and no worker has marked its write failed (a worker
    /// that stopped or failed will never write them).
    pub fn wait_written(
        &self,
        workers: usize,
        timeout: Duration,
        give_up: impl Fn() -> bool,
    ) -> Result<(), ResultsError> {
        let t0 = Instant::now();
        loop {
            let missing: Vec<usize> = (0..workers)
                .filter(|w| !self.dir.join(WRITTEN).join(format!("w{w}")).exists())
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let failed = missing
                .iter()
                .any(|w| self.dir.join(WRITTEN).join(format!("failed-w{w}")).exists());
            if failed || t0.elapsed() > timeout || give_up() {
                return Err(ResultsError::Unwritten {
                    generation: self.dir.clone(),
                    workers: missing,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Makes this generation the one `<out>/<experiment>` names, in one atomic rename, then
    /// removes old generations (keeping the last few published ones). Returns where a real
    /// folder or file that stood at `<out>/<experiment>` was moved, for the caller to say so.
    pub fn publish(&self) -> Result<Option<PathBuf>, ResultsError> {
        // The marker only guides the clean-up of old generations: it needs no sync of its own.
        let marker = self.dir.join(PUBLISHED);
        fs::write(&marker, self.token.as_bytes()).map_err(ResultsError::io(&marker))?;
        let link = self.out.join(&self.experiment);
        let gens = generations_dir(&self.out, &self.experiment)?;
        // A real folder or file where the link goes (an older cotune's tables, or anything a
        // user put there) is moved aside, beside it and in sight, and never removed: it may
        // hold more than tables.
        let mut moved = None;
        if fs::symlink_metadata(&link).is_ok_and(|m| !m.file_type().is_symlink()) {
            let aside = self
                .out
                .join(format!("{}{MOVED_ASIDE}{}", self.experiment, unique()));
            fs::rename(&link, &aside).map_err(ResultsError::io(&link))?;
            moved = Some(aside);
        }
        let target = Path::new(gens.file_name().unwrap_or_default()).join(&self.token);
        let temp = self
            .out
            .join(format!(".{}.link-{}", self.experiment, unique()));
        symlink(&target, &temp).map_err(ResultsError::io(&temp))?;
        if let Err(e) = fs::rename(&temp, &link) {
            let _ = fs::remove_file(&temp);
            return Err(ResultsError::Io {
                path: link,
                source: e,
            });
        }
        sync_dir(&self.out)?;
        self.remove_old(&gens)?;
        Ok(moved)
    }

    fn remove_old(&self, gens: &Path) -> Result<(), ResultsError> {
        let mut published = vec![];
        for e in fs::read_dir(gens).map_err(ResultsError::io(gens))? {
            let e = e.map_err(ResultsError::io(gens))?;
            let name = e.file_name().to_string_lossy().into_owned();
            // `legacy-*`: a folder that an earlier version moved here from `<out>/<experiment>`,
            // kept whatever its age (it has no `.published` marker).
            if name == self.token || name.starts_with("legacy-") {
                continue;
            }
            let p = e.path();
            if p.join(PUBLISHED).exists() {
                published.push((modified(&p.join(PUBLISHED)), p));
            } else if modified(&p)
                .elapsed()
                .is_ok_and(|age| age > STALE_UNPUBLISHED)
            {
                let _ = fs::remove_dir_all(&p);
            }
        }
        published.sort();
        let n = published.len().saturating_sub(KEEP_PUBLISHED);
        for (_, p) in published.into_iter().take(n) {
            // Best effort: a reader may hold a file open; it goes with the next publish.
            let _ = fs::remove_dir_all(&p);
        }
        Ok(())
    }
}

fn modified(p: &Path) -> SystemTime {
    fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(target, link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::read_table;
    use crate::value::Value;

    fn rows(tag: &str) -> Vec<Row> {
        vec![[("step".to_owned(), Value::from(tag))]
            .into_iter()
            .collect()]
    }

    #[test]
    fn a_published_generation_replaces_the_view_whole() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        // A real folder where the link goes, days old, with a file of the user's in it.
        fs::create_dir_all(out.join("exp/prune")).unwrap();
        fs::write(out.join("exp/notes.txt"), "mine").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3 * 24 * 3600);
        fs::File::open(out.join("exp"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        // And one an earlier version moved into the generations, as old.
        let legacy = generations_dir(out, "exp").unwrap().join("legacy-x");
        fs::create_dir_all(&legacy).unwrap();
        fs::write(legacy.join("notes.txt"), "mine too").unwrap();
        fs::File::open(&legacy).unwrap().set_modified(old).unwrap();
        for (i, tag) in ["a", "b", "c", "d"].iter().enumerate() {
            let g = Generation::new(out, "exp", &format!("g{i}")).unwrap();
            for stage in ["prune", "evaluate"] {
                g.write_part(stage, 0, &rows(tag), &TableMeta::new("exp", *tag))
                    .unwrap();
            }
            g.mark_written(0).unwrap();
            g.wait_written(1, Duration::from_secs(1), || false).unwrap();
            // Until the switch, readers see the previous step.
            if i > 0 {
                let seen = read_table(&out.join("exp/prune")).unwrap();
                assert_eq!(seen, rows(["a", "b", "c"][i - 1]));
            }
            let moved = g.publish().unwrap();
            // Only the first step found a real folder there, and says where it went.
            assert_eq!(moved.is_some(), i == 0, "{moved:?}");
            if let Some(m) = &moved {
                assert!(m.is_dir() && is_moved_aside(&m.file_name().unwrap().to_string_lossy()));
            }
            let now = current(out, "exp").unwrap();
            assert_eq!(now, fs::canonicalize(g.dir()).unwrap());
            assert_eq!(read_table(&now.join("evaluate")).unwrap(), rows(tag));
        }
        let kept: Vec<_> = fs::read_dir(generations_dir(out, "exp").unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('g'))
            .collect();
        assert_eq!(kept.len(), 1 + KEEP_PUBLISHED, "{kept:?}");
        // Neither folder was removed: the first moved aside beside the link, the second left.
        let aside: Vec<_> = fs::read_dir(out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("exp.old-"))
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        let name = aside[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(is_moved_aside(&name), "{name}");
        assert!(!is_moved_aside("exp") && !is_moved_aside("exp.old-notes"));
        assert_eq!(
            fs::read_to_string(aside[0].join("notes.txt")).unwrap(),
            "mine"
        );
        assert!(aside[0].join("prune").is_dir());
        assert_eq!(
            fs::read_to_string(legacy.join("notes.txt")).unwrap(),
            "mine too"
        );
    }

    #[test]
    fn a_missing_worker_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let g = Generation::new(dir.path(), "exp", "g0").unwrap();
        g.mark_written(0).unwrap();
        let e = g
            .wait_written(3, Duration::from_millis(50), || false)
            .unwrap_err();
        assert!(e.to_string().contains("[1, 2]"), "{e}");
    }

    /// A worker that could not write its parts says so, and worker 0 stops waiting at once.
    #[test]
    fn a_failed_worker_ends_the_wait_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let g = Generation::new(dir.path(), "exp", "g0").unwrap();
        g.mark_written(0).unwrap();
        g.mark_failed(1).unwrap();
        let t0 = Instant::now();
        let e = g
            .wait_written(2, Duration::from_secs(60), || false)
            .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(e.to_string().contains("[1]"), "{e}");
    }

    /// A publish removes the unfinished generations of runs that died (older than
    /// `STALE_UNPUBLISHED`) and leaves younger ones: a live step may still publish them.
    #[test]
    fn a_publish_removes_stale_unfinished_generations_only() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let part = |g: &Generation| {
            g.write_part("prune", 0, &rows("x"), &TableMeta::new("exp", "x"))
                .unwrap()
        };
        let dead = Generation::new(out, "exp", "dead").unwrap();
        part(&dead);
        let stale = SystemTime::now() - STALE_UNPUBLISHED - Duration::from_secs(60);
        fs::File::open(dead.dir())
            .unwrap()
            .set_modified(stale)
            .unwrap();
        let live = Generation::new(out, "exp", "live").unwrap();
        part(&live);
        let g = Generation::new(out, "exp", "g0").unwrap();
        part(&g);
        g.publish().unwrap();
        assert!(!dead.dir().exists());
        assert!(live.dir().exists());
        // The younger one can still be published.
        live.publish().unwrap();
        assert_eq!(
            current(out, "exp").unwrap(),
            fs::canonicalize(live.dir()).unwrap()
        );
    }

    /// A file where the link goes is moved aside as a folder is, never replaced.
    #[test]
    fn a_file_where_the_link_goes_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        fs::write(out.join("exp"), "a user's file").unwrap();
        let g = Generation::new(out, "exp", "g0").unwrap();
        g.write_part("prune", 0, &rows("a"), &TableMeta::new("exp", "a"))
            .unwrap();
        let moved = g.publish().unwrap().expect("the file was moved");
        assert_eq!(fs::read_to_string(&moved).unwrap(), "a user's file");
        assert!(is_moved_aside(
            &moved.file_name().unwrap().to_string_lossy()
        ));
        assert_eq!(read_table(&out.join("exp/prune")).unwrap(), rows("a"));
    }
}
