//! Embeds a digest of the CPU kernel sources: kernel-tune keys cover it, so a change of kernel
//! code re-tunes instead of reusing timings of other code.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "cu") {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let mut all = vec![];
    files(&root.join("src"), &mut all);
    files(&root.join("cuda"), &mut all);
    all.sort();
    let mut h = blake3::Hasher::new();
    for p in &all {
        let rel = p.strip_prefix(&root).unwrap_or(p);
        h.update(rel.to_string_lossy().as_bytes());
        h.update(&std::fs::read(p).unwrap_or_default());
    }
    println!(
        "cargo:rustc-env=COTUNE_KERNEL_SOURCES_DIGEST={}",
        &h.finalize().to_hex()[..16]
    );
    println!("cargo:rerun-if-changed=../kernels/src");
    println!("cargo:rerun-if-changed=../kernels/cuda");
}
