//! Malformed experiment files: one line naming `path:line:col` and what is allowed, exit 2,
//! nothing run (no store, no results).

use e2e::harness::Workspace;

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

const GOOD: &str = r#"name = "bad"
[dataset]
source = "synthetic"
samples = 100
features = 16
classes = 4
[model]
kind = "mlp"
hidden = [32]
[train]
epochs = 1
batch_size = 8
lr = 1e-3
[prune]
pattern = ["vnm", "unstructured"]
sparsity = [0.75]
v = [8]
"#;

fn check(text: &str, line: usize, col: usize, needle: &str) {
    check_with(BIN, text, line, col, needle);
}

/// `check` with the binary `bin` (`cotune-real` for errors only the real stages find when they
/// plan, such as a data set that cannot be built).
fn check_with(bin: &str, text: &str, line: usize, col: usize, needle: &str) {
    check_with_files(bin, &[], text, line, col, needle);
}

/// `check_with`, the files `(name, text)` written beside the experiment file.
fn check_with_files(
    bin: &str,
    files: &[(&str, &str)],
    text: &str,
    line: usize,
    col: usize,
    needle: &str,
) {
    let ws = Workspace::new();
    for (name, body) in files {
        ws.write(name, body);
    }
    let f = ws.write("exp.toml", text);
    let store = ws.path("store");
    let out = ws.path("out");
    let o = ws.cotune(
        bin,
        &[
            "run",
            f.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "exit code for {needle}: {err}");
    let first = err.lines().next().unwrap_or("");
    let want = format!("{}:{line}:{col}: ", f.display());
    assert!(
        first.starts_with(&want),
        "expected `{want}…`, got `{first}`"
    );
    assert!(
        first.contains(needle),
        "`{first}` should mention `{needle}`"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!store.exists() && !out.exists(), "nothing may run");
}

#[test]
fn good_file_is_accepted() {
    let ws = Workspace::new();
    let f = ws.write("exp.toml", GOOD);
    let o = ws.plan(BIN, &f, "store");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn syntax_error() {
    check(&GOOD.replace("epochs = 1", "epochs = = 1"), 11, 10, "");
}

#[test]
fn unknown_field() {
    check(
        &GOOD.replace("epochs = 1", "epochz = 1"),
        11,
        1,
        "unknown field `epochz`",
    );
}

#[test]
fn wrong_type() {
    check(
        &GOOD.replace("batch_size = 8", "batch_size = \"eight\""),
        12,
        14,
        "",
    );
}

#[test]
fn unknown_pattern_lists_allowed_values() {
    check(
        &GOOD.replace("[\"vnm\", \"unstructured\"]", "[\"vnm\", \"blocky\"]"),
        15,
        19,
        "dense",
    );
}

#[test]
fn v_must_divide_rows() {
    check(
        &GOOD.replace("v = [8]", "v = [8, 12]"),
        17,
        9,
        "does not divide the layer rows 32",
    );
}

#[test]
fn an_include_points_v_must_divide_rows_too() {
    // It was skipped: the layer was left dense and the front still named the pattern.
    check(
        &format!("{GOOD}[[prune.include]]\npattern = \"vnm\"\nnm = \"2:8\"\nv = 5\n"),
        21,
        5,
        "v = 5 does not divide the layer rows 32",
    );
}

#[test]
fn sparsity_outside_unit_interval() {
    check(
        &GOOD.replace("sparsity = [0.75]", "sparsity = [0.75, 1.5]"),
        16,
        19,
        "sparsity must be in (0, 1)",
    );
}

#[test]
fn one_shot_parameters_are_checked_where_they_are_written() {
    let text = GOOD.replace(
        "v = [8]",
        "v = [8]\nmethod = [\"sparsegpt\"]\nsparsegpt_damp = 0.0",
    );
    check(&text, 19, 18, "sparsegpt_damp must be > 0");
    let text = GOOD.replace(
        "v = [8]",
        "v = [8]\nmethod = [\"wanda\"]\ncalibration = \"all\"",
    );
    check(&text, 19, 15, "sequential");
}

/// `GOOD` with a transformer of `d_model` 32 and the given encoder lines.
fn transformer(encoder: &str) -> String {
    GOOD.replace(
        "kind = \"mlp\"\nhidden = [32]",
        &format!("kind = \"transformer\"\n{encoder}"),
    )
}

#[test]
fn transformer_fields_are_checked_where_they_are_written() {
    let all = "layers = 2\nd_model = 32\nheads = 4\nd_ff = 64\npatch = 4";
    let good = transformer(all);
    // d_model not divisible by heads: at `heads`.
    check(
        &good.replace("heads = 4", "heads = 5"),
        11,
        9,
        "d_model = 32 is not divisible by heads = 5",
    );
    // A missing field: at `kind`.
    check(
        &transformer("layers = 2\nd_model = 32\nheads = 4\npatch = 4"),
        8,
        8,
        "needs `d_ff`",
    );
    // An encoder field on another model.
    check(
        &GOOD.replace("hidden = [32]", "hidden = [32]\nheads = 2"),
        10,
        9,
        "applies to kind = \"transformer\" only",
    );
    // A V that divides neither d_model (32) nor d_ff (64): at the value.
    check(
        &good.replace("v = [8]", "v = [8, 32, 48]"),
        21,
        13,
        "v = 48 does not divide the layer rows 32",
    );
    // Patches that do not tile the data set's 16 features (known once it is built): at
    // `patch` (it was the `[model]` header).
    let real = env!("CARGO_BIN_EXE_cotune-real");
    check_with(
        real,
        &good.replace("patch = 4", "patch = 3"),
        13,
        1,
        "patch = 3 features per token does not divide the data set's 16 features",
    );
}

#[test]
fn sizes_past_what_a_run_holds_are_checked_where_they_are_written() {
    // Once a panic (capacity overflow) or an abort (an allocation of 1 TB) with a backtrace.
    check(
        &GOOD.replace("hidden = [32]", "hidden = [4294967296]"),
        9,
        11,
        "a hidden width = 4294967296 is more than 65536",
    );
    check(
        &GOOD.replace("hidden = [32]", "hidden = [60000, 60000]"),
        9,
        18,
        "60000 × 60000 values",
    );
    check(
        &GOOD.replace("classes = 4", "classes = 18446744073709551615"),
        6,
        11,
        "classes = 18446744073709551615 is more than 65536",
    );
    let evaluate = |sizes: &str| format!("{GOOD}[evaluate]\nbatch_sizes = [{sizes}]\n");
    check(
        &evaluate("1, 1000000000"),
        19,
        19,
        "a batch size = 1000000000 is more than 1048576",
    );
    check(
        &evaluate("32768").replace("hidden = [32]", "hidden = [65536]"),
        19,
        16,
        "a layer of width 65536 at batch 32768",
    );
    // It was written to the table as -1.
    check(
        &format!("{GOOD}[kernel_tune]\nbudget = 18446744073709551615\n"),
        19,
        10,
        "budget = 18446744073709551615 is more than 1048576",
    );
}

/// A batch's columns per sample (a convolution's positions, a transformer's tokens) are known
/// when the data set is: such a layer at a huge batch was an abort with a backtrace (an
/// allocation of 32 GiB in the tuning), now a plan error at the table that gives the batch.
#[test]
fn a_batch_too_large_for_a_layers_positions_is_refused_when_planned() {
    let real = env!("CARGO_BIN_EXE_cotune-real");
    let text = "name = \"big\"\n[dataset]\nsource = \"digits\"\n[model]\nkind = \"cnn\"\n\
                channels = [512]\nhidden = [16]\n[train]\nepochs = 1\nbatch_size = 8\nlr = 1e-3\n\
                [prune]\npattern = [\"dense\"]\n[kernel_tune]\nbatch_tokens = [1048576]\n";
    check_with(
        real,
        text,
        14,
        1,
        "[kernel_tune]: batch 1048576 gives layer",
    );
}

/// A key of another source was read and ignored: `train_images` under a synthetic source
/// trained on the synthetic data.
#[test]
fn a_key_of_another_source_is_refused_where_it_stands() {
    check(
        &GOOD.replace("classes = 4", "classes = 4\ntrain_images = \"x.idx\""),
        7,
        16,
        "`train_images` does not apply to source = \"synthetic\"",
    );
    check(
        &GOOD.replace("classes = 4", "classes = 4\nlabel = \"y\""),
        7,
        9,
        "`label` does not apply",
    );
}

/// A name that fits the file's rules but not a file name (with the suffixes a run adds) failed
/// only when the tables were written, after computing everything.
#[test]
fn a_name_too_long_for_its_folders_is_refused_at_the_name() {
    let long = format!("name = \"{}\"", "a".repeat(243));
    check(
        &GOOD.replace("name = \"bad\"", &long),
        1,
        8,
        "243 characters long, more than 200",
    );
}

#[test]
fn running_losing_layers_dense_is_refused_on_the_cuda_backend() {
    let text = format!(
        "{GOOD}[kernel_tune]\nbackend = [\"cpu\", \"cuda\"]\n[evaluate]\ndense_where_faster = true\n"
    );
    check(
        &text,
        21,
        22,
        "dense_where_faster runs on the cpu backend only",
    );
}

#[test]
fn an_evaluate_table_without_a_model_is_refused_at_its_header() {
    // It was read and ignored: no evaluation runs in a kernel-only study.
    let text = "name = \"k\"\n[kernel_tune]\nshapes = [[64, 64]]\n[prune]\npattern = [\"nm\"]\nnm = [\"2:4\"]\n\n\n[evaluate]  # the timings\nbatch_sizes = [1]\n";
    check(text, 9, 1, "a kernel-only study evaluates none");
}

#[test]
fn a_data_set_that_cannot_be_built_is_named_at_the_key_at_fault() {
    // It was `1:1: [model]: …` whatever the table at fault, then the `[dataset]` header.
    let real = env!("CARGO_BIN_EXE_cotune-real");
    let table = |source: &str, rest: &str| {
        GOOD.replace(
            "source = \"synthetic\"\nsamples = 100\nfeatures = 16\nclasses = 4",
            &format!("source = \"{source}\"\n{rest}"),
        )
    };
    // The split: at `test_fraction`.
    let text = table("digits", "test_fraction = 0.9999");
    check_with(real, &text, 4, 17, "test_fraction 0.9999 leave an empty");
    // A label column the table does not have: at `label`.
    let csv = [("d.csv", "a,b,y\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n")];
    let text = table("csv", "path = \"d.csv\"\nlabel = \"class\"");
    check_with_files(real, &csv, &text, 5, 9, "missing column \"class\"");
    // A file that is not a data set: at the key that names it.
    let bad = [("d.csv", "a,b,y\n1,2,0\n3,4\n")];
    let text = table("csv", "path = \"d.csv\"\nlabel = \"y\"");
    check_with_files(real, &bad, &text, 4, 8, "d.csv");
    // Without `test_fraction` a split that leaves a part empty is the table's.
    let two = [("d.csv", "a,y\n1,0\n2,1\n")];
    let text = table("csv", "path = \"d.csv\"\nlabel = \"y\"");
    check_with_files(real, &two, &text, 2, 1, "[dataset]: ");
}

#[test]
fn an_out_path_that_is_a_file_is_refused_before_anything_runs_and_plan_creates_no_store() {
    let ws = Workspace::new();
    let f = ws.write("exp.toml", GOOD);
    let out = ws.write("out", "a file");
    let store = ws.path("store");
    let arg = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let run = |store: &std::path::Path, out: &std::path::Path| {
        let (file, store, out) = (arg(&f), arg(store), arg(out));
        ws.cotune(BIN, &["run", &file, "--store", &store, "--out", &out], None)
    };
    // Refused before anything runs (it used to compute everything, then fail to write).
    let o = run(&store, &out);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a file"));
    assert!(!store.exists(), "nothing may run");
    let o = ws.cotune(BIN, &["plan", &arg(&f), "--store", &arg(&store)], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!store.exists(), "plan only reads the store");
    // A folder that cannot be made (under a file): found before anything runs, not after.
    let under = out.join("sub");
    let o = run(&store, &under);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot take the results"), "{err}");
    assert!(!store.exists(), "nothing may run");
    // A store that is not one (a folder of other files): refused, and the new --out folder the
    // check before it made is taken back.
    let not_a_store = ws.path("notes");
    std::fs::create_dir(&not_a_store).unwrap();
    ws.write("notes/todo.txt", "mine");
    let fresh_out = ws.path("fresh-out");
    let o = run(&not_a_store, &fresh_out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not a cotune store"), "{err}");
    assert!(!fresh_out.exists(), "an empty --out left behind");
}

/// Regression: an empty `COTUNE_STORE` was reported as "a value is required for '--store'",
/// a flag the user had not given.
#[test]
fn an_empty_cotune_store_is_named() {
    let ws = Workspace::new();
    let o = std::process::Command::new(BIN)
        .args(["store", "ls"])
        .env("COTUNE_STORE", "")
        .current_dir(ws.path(""))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("COTUNE_STORE is set but empty"), "{err}");
}

/// A sparse point that prunes no layer is refused (it ran as the dense model, labelled with
/// its pattern and sparsity in evaluate and the front): a CNN whose rows V divides none of,
/// and `keep_dense` over every layer.
#[test]
fn a_point_that_prunes_no_layer_is_refused() {
    let real = env!("CARGO_BIN_EXE_cotune-real");
    let cnn = r#"name = "e"
[dataset]
source = "digits"
[model]
kind = "cnn"
channels = [8]
hidden = [16]
[train]
epochs = 1
batch_size = 64
lr = 1e-3
[prune]
pattern = ["dense", "vnm"]
nm = ["2:8"]
v = [128]
"#;
    check_with(real, cnn, 12, 1, "prunes no layer of the model (conv0: ");
    check_with(
        real,
        &GOOD.replace("v = [8]", "v = [8]\nkeep_dense = [\"fc*\"]"),
        14,
        1,
        "prunes no layer of the model",
    );
}
