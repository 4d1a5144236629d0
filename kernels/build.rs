//! Embeds the digest of each kernel family's sources (comments and formatting removed): a
//! tuning's key covers the families it measured, so editing one kernel re-tunes only those.

#[path = "src/family/normalize.rs"]
#[allow(dead_code)]
mod normalize;
#[path = "src/family/sources.rs"]
#[allow(dead_code)]
mod sources;

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = String::from("/// Each family's tag and digest, computed by build.rs.\n");
    out.push_str("pub(crate) const FAMILY_DIGESTS: &[(&str, &str)] = &[\n");
    for (tag, groups) in sources::FAMILY_SOURCES {
        let files: Vec<&str> = groups.iter().flat_map(|g| g.iter().copied()).collect();
        let texts: Vec<(&str, String)> = files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(root.join(f))
                    .unwrap_or_else(|e| panic!("kernel family {tag}: {f}: {e}"));
                (*f, text)
            })
            .collect();
        let digest = normalize::family_digest(texts.iter().map(|(f, t)| (*f, t.as_str())));
        let _ = writeln!(out, "    ({tag:?}, {digest:?}),");
        for f in files {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    out.push_str("];\n");
    println!("cargo:rerun-if-changed=src/family/sources.rs");
    println!("cargo:rerun-if-changed=src/family/normalize.rs");
    let dest =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("family_digests.rs");
    std::fs::write(dest, out).expect("write family_digests.rs");
}
