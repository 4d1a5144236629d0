use super::*;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(f: &str) -> std::io::Result<String> {
    std::fs::read_to_string(root().join(f))
}

/// The sources as they are, with one file's text replaced.
fn digests_with(path: &str, edit: impl Fn(&str) -> String) -> BTreeMap<KernelFamily, String> {
    digests_from(|f| read(f).map(|t| if f == path { edit(&t) } else { t })).unwrap()
}

fn changed(
    a: &BTreeMap<KernelFamily, String>,
    b: &BTreeMap<KernelFamily, String>,
) -> Vec<KernelFamily> {
    a.keys().filter(|f| a[f] != b[f]).copied().collect()
}

#[test]
fn every_family_has_sources_and_a_built_digest() {
    for &f in KernelFamily::ALL {
        assert!(!f.sources().is_empty(), "{f} has no sources");
        assert_ne!(f.digest(), "unknown", "{f} has no built digest");
    }
    assert_eq!(sources::FAMILY_SOURCES.len(), KernelFamily::ALL.len());
    // The digests built into this binary are those of the sources on disk now.
    let now = digests_from(read).unwrap();
    for (f, d) in &now {
        assert_eq!(
            d,
            f.digest(),
            "{f}: the compiled-in sources differ from those on disk"
        );
    }
}

#[test]
fn every_source_file_is_in_a_family_or_declared_unmeasured() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "cu") {
                out.push(p);
            }
        }
    }
    let mut files = vec![];
    walk(&root().join("src"), &mut files);
    walk(&root().join("cuda"), &mut files);
    let listed: Vec<&str> = KernelFamily::ALL.iter().flat_map(|f| f.sources()).collect();
    for p in files {
        let rel = p
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let skipped = sources::NOT_MEASURED.contains(&rel.as_str())
            || sources::NOT_MEASURED_DIRS
                .iter()
                .any(|d| rel.starts_with(&format!("{d}/")));
        assert!(
            skipped || listed.contains(&rel.as_str()),
            "{rel} is in no kernel family: add it to one in src/family/sources.rs, or to NOT_MEASURED"
        );
    }
}

#[test]
fn a_comment_or_reformatting_changes_no_family() {
    let base = digests_from(read).unwrap();
    let commented = digests_with("src/cpu/kernels/vnm.rs", |t| {
        format!(
            "// a new comment\n{}\n/* and another */\n",
            t.replace("\n", "\n\n")
        )
    });
    assert_eq!(changed(&base, &commented), vec![]);
    let cu = digests_with("cuda/spmm_csr_f32.cu", |t| {
        t.replacen("\n", "\n// note\n   \n", 3)
    });
    assert_eq!(changed(&base, &cu), vec![]);
}

#[test]
fn a_code_edit_changes_only_its_family() {
    let base = digests_from(read).unwrap();
    let vector = digests_with("src/cpu/kernels/vector.rs", |t| {
        format!("{t}\nconst _EDIT: u8 = 1;\n")
    });
    assert_eq!(changed(&base, &vector), vec![KernelFamily::CpuVector]);
    // N:M's row pairs run the V:N:M kernel: an edit there re-tunes both.
    let vnm = digests_with("src/cpu/kernels/vnm.rs", |t| {
        format!("{t}\nconst _EDIT: u8 = 1;\n")
    });
    assert_eq!(
        changed(&base, &vnm),
        vec![KernelFamily::CpuNm, KernelFamily::CpuVnm]
    );
    let cu = digests_with("cuda/spmm_csr_f32.cu", |t| {
        format!("{t}\n#define COTUNE_EDIT 1\n")
    });
    assert_eq!(changed(&base, &cu), vec![KernelFamily::CudaCsr]);
    // A file shared by a backend's families changes all of them, and no other backend's.
    let simd = digests_with("src/cpu/simd.rs", |t| {
        format!("{t}\nconst _EDIT: u8 = 1;\n")
    });
    assert!(changed(&base, &simd)
        .iter()
        .all(|f| f.tag().starts_with("cpu-")));
    assert_eq!(changed(&base, &simd).len(), 5);
}

#[test]
fn normalize_drops_comments_and_layout_but_not_literals() {
    use normalize::normalize;
    assert_eq!(normalize("let  x = 1; // one\n"), "let x=1;");
    assert_eq!(normalize("f(a,\n  b,\n)"), "f(a,b)");
    assert_eq!(normalize("/* a /* nested */ one */x"), "x");
    assert_eq!(
        normalize("s = \"// not a comment\";"),
        "s=\"// not a comment\";"
    );
    assert_eq!(normalize("c = '\"'; d = \"x\";"), "c='\"';d=\"x\";");
    assert_eq!(normalize("fn f<'a>(x: &'a u8)"), "fn f<'a>(x:&'a u8)");
    assert_ne!(normalize("a + b"), normalize("a - b"));
}
