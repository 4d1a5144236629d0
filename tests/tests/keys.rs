//! Key stability: golden keys pin the scheme, and cosmetic edits of an experiment file (order,
//! comments, spacing, `1e-3` vs `0.001`) change no key.

use pipeline::experiment::{parse_str, validate};
use pipeline::key::{stage_key, CanonConfig, CanonValue};
use pipeline::kinds::Train;
use pipeline::plan::Plan;
use std::path::Path;

fn plan(text: &str) -> Plan {
    let (raw, map) = parse_str(Path::new("exp.toml"), text).expect("parses");
    let exp = validate(&raw, &map).expect("valid");
    e2e::table().plan(&exp, &map).expect("plans")
}

const A: &str = r#"
name = "keys"
seed = 7
[dataset]
source = "synthetic"
samples = 100
features = 16
classes = 4
[model]
kind = "mlp"
hidden = [32, 32]
[train]
epochs = 2
batch_size = 8
lr = [1e-3, 3e-3]
[prune]
pattern = ["dense", "nm", "vnm"]
sparsity = [0.75]
v = [8]
method = ["magnitude", "obs"]
[kernel_tune]
batch_tokens = [16]
"#;

// The same experiment: sections and keys reordered, comments, spacing, other float spellings.
const B: &str = r#"
# a comment
seed = 7
name   =   "keys"

[prune]
method = ["obs", "magnitude"]   # order of an axis is not meaning
v = 8
sparsity = 0.750
pattern = ["vnm", "nm", "dense"]

[kernel_tune]
batch_tokens = 16

[train]
lr = [0.003, 0.001]
batch_size = 8
epochs = 2

[model]
hidden = [32, 32]
kind = "mlp"

[dataset]
classes = 4
features = 16
samples = 100
source = "synthetic"
"#;

#[test]
fn cosmetic_edits_change_no_key() {
    let (a, b) = (plan(A), plan(B));
    assert!(a.nodes.len() > 20);
    assert_eq!(
        a.nodes.keys().collect::<Vec<_>>(),
        b.nodes.keys().collect::<Vec<_>>()
    );
    assert_eq!(a.digest(), b.digest());
}

#[test]
fn a_meaningful_edit_changes_keys() {
    let c = plan(&A.replace("epochs = 2", "epochs = 3"));
    let a = plan(A);
    assert_ne!(a.digest(), c.digest());
    // Kernel tunings do not depend on training: they are shared.
    let tunes = |p: &Plan| {
        p.nodes
            .iter()
            .filter(|(_, n)| n.stage == "kernel_tune")
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
    };
    assert_eq!(tunes(&a), tunes(&c));
}

#[test]
fn golden_keys() {
    let cfg = CanonConfig::new()
        .with("lr", CanonValue::f64(1e-3))
        .with(
            "hidden",
            CanonValue::List(vec![CanonValue::U64(256), CanonValue::U64(256)]),
        )
        .with("optimizer", CanonValue::Str("adamw".into()));
    let k = stage_key::<Train>(1, &cfg, &[]);
    assert_eq!(
        k.hex(),
        GOLDEN_TRAIN,
        "the key scheme changed: if deliberate, update the golden value"
    );
    // -0.0 and 0.0 are one value.
    assert_eq!(CanonValue::f64(-0.0), CanonValue::f64(0.0));
    let p = plan(A);
    assert_eq!(
        p.digest(),
        GOLDEN_PLAN,
        "the key scheme changed: if deliberate, update the golden value"
    );
}

const GOLDEN_TRAIN: &str = "483b40dad1015d63faebabc507008b689241c51385088e6706088249dd8c722d";
const GOLDEN_PLAN: &str = "1e9ec91cc26f6fcbc380af694315a5543707571f1d0a21d5b811ce5aa4068d43";
