//! `cotune store export KEY --to DIR` through the real `cotune`: a pruned CNN's entry comes out
//! as its weights (the stored file, byte for byte), its masks as safetensors in the weights'
//! shapes (exact zeros wherever a mask is false, 2:4 in every group, equal to `masks.bin`) and
//! a plain `entry.json`; a layer study's masks come out under their tensors' names (the
//! magnitude 2:4 mask recomputed here); keys that name no single entry, a used `--to`, one in
//! the store or a dangling link, and a damaged entry are refused.

use e2e::harness::{keys, tables, Workspace};
use e2e::safetensors_io::{self, f32s, write as write_safetensors};
use std::path::{Path, PathBuf};
use std::process::Output;

const BIN: &str = env!("CARGO_BIN_EXE_cotune-real");

const CNN: &str = r#"
name = "export"
seed = 5
[dataset]
source = "digits"
[model]
kind = "cnn"
channels = [8, 16]
hidden = [16]
[train]
epochs = 1
batch_size = 64
lr = [1e-2]
[prune]
pattern = ["nm"]
nm = ["2:4"]
method = ["magnitude"]
finetune_epochs = 1
[kernel_tune]
strategy = "model"
budget = 1
batch_tokens = [4]
[evaluate]
batch_sizes = [1]
"#;

fn export(ws: &Workspace, key: &str, to: &str) -> Output {
    let store = ws.path("store").display().to_string();
    let to = ws.path(to).display().to_string();
    ws.cotune(
        BIN,
        &["store", "export", key, "--to", &to, "--store", &store],
        None,
    )
}

fn entry_dir(ws: &Workspace, key: &str) -> PathBuf {
    ws.path(&format!("store/objects/{}/{key}", &key[..2]))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `masks.bin` decoded here: per layer `None` (dense) or its keep bytes.
fn masks_bin(path: &Path) -> Vec<Option<Vec<u8>>> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"COTUNEM1");
    let u = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let mut at = 16;
    (0..u(8))
        .map(|_| {
            at += 1;
            if b[at - 1] == 0 {
                return None;
            }
            let n = u(at) * u(at + 8);
            at += 16 + n;
            Some(b[at - n..at].to_vec())
        })
        .collect()
}

fn string(row: &results::Row, column: &str) -> String {
    match row.get(column) {
        Some(results::Value::Str(s)) => s.clone(),
        other => panic!("{column}: {other:?}"),
    }
}

#[test]
fn a_pruned_cnn_exports_its_weights_masks_and_record_and_bad_keys_are_refused() {
    let ws = Workspace::new();
    ws.write("exp.toml", CNN);
    let o = ws.run(BIN, "exp.toml", "store", "out", &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = tables(&ws.path("out"), "export");
    let prune = keys(&t["prune"])[0].clone();
    let evaluated: Vec<_> = t["evaluate"]
        .iter()
        .filter(|r| string(r, "prune_key") == prune)
        .collect();
    let evaluate = string(evaluated[0], "key");

    let o = export(&ws, &prune[..10], "model");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("exported prune entry"),
        "{}",
        text(&o.stdout)
    );
    let (dir, out) = (entry_dir(&ws, &prune), ws.path("model"));
    assert_eq!(
        std::fs::read(out.join("weights.safetensors")).unwrap(),
        std::fs::read(dir.join("weights.safetensors")).unwrap(),
        "the weights are the stored file"
    );
    let (weights, _) = safetensors_io::read(&out.join("weights.safetensors"));
    let (masks, meta) = safetensors_io::read(&out.join("masks.safetensors"));
    assert_eq!(meta["cotune.format"], "cotune-masks-v1");
    let stored = masks_bin(&dir.join("masks.bin"));
    let layers: Vec<&String> = weights.keys().filter(|n| n.ends_with(".weight")).collect();
    let order = ["conv0.weight", "conv1.weight", "fc0.weight", "fc1.weight"];
    assert_eq!(layers, order, "{:?}", weights.keys());
    for (name, stored) in order.iter().zip(&stored) {
        let w = &weights[*name];
        let Some(m) = masks.get(&format!("{name}_mask")) else {
            assert!(
                stored.is_none(),
                "{name} is masked but exported without one"
            );
            continue;
        };
        assert_eq!(
            (m.0.as_str(), &m.1),
            ("BOOL", &w.1),
            "{name}: in the weight's shape"
        );
        assert_eq!(Some(&m.2), stored.as_ref(), "{name}: as masks.bin holds it");
        for (k, v) in m.2.iter().zip(f32s(w)) {
            assert!(
                *k == 1 || v.to_bits() == 0,
                "{name}: a masked weight is {v}"
            );
        }
        // 2:4 along each output's flattened inputs (a convolution's in × kh × kw).
        let cols = w.1[1..].iter().product::<usize>();
        for row in m.2.chunks(cols) {
            for g in row.chunks(4) {
                let kept = g.iter().filter(|&&k| k == 1).count();
                assert_eq!(kept, if g.len() == 4 { 2 } else { kept.min(2) }, "{name}");
            }
        }
    }
    assert!(masks.contains_key("conv1.weight_mask") && masks.len() >= 3);
    let entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("entry.json")).unwrap()).unwrap();
    assert_eq!(entry["key"], prune.as_str());
    assert_eq!(entry["stage"], "prune");
    assert_eq!(entry["inputs"][0]["stage"], "train");
    assert_eq!(entry["config"]["pattern.kind"], "nm");
    assert_eq!(
        entry["masks"]["tensors"].as_array().unwrap().len(),
        masks.len()
    );
    assert!(entry["metrics"]["accuracy"].as_f64().is_some());

    // An evaluation holds no model: its record, and its input prune named.
    let o = export(&ws, &evaluate, "eval");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("its input: prune {prune}")));
    // Into an existing empty folder, and through a link to one: the folder stays what it was
    // (the export is staged inside it) and holds the files alone.
    std::fs::create_dir(ws.path("here")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(ws.path("here"), ws.path("link")).unwrap();
    #[cfg(unix)]
    let targets = ["link"];
    #[cfg(not(unix))]
    let targets = ["here"];
    for to in targets {
        let o = export(&ws, &evaluate, to);
        assert!(o.status.success(), "{to}: {}", text(&o.stderr));
        let mut names: Vec<String> = std::fs::read_dir(ws.path("here"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["entry.json", "evaluation.txt"], "{to}");
    }

    #[cfg(unix)]
    std::os::unix::fs::symlink("nowhere", ws.path("dangling")).unwrap();
    for (key, to, why) in [
        (&prune[..10], "model", "not empty"),
        (&prune[..10], "store/objects/zz", "inside the store"),
        #[cfg(unix)]
        (&prune[..10], "dangling", "a link to nothing"),
        ("00000000", "x", "no entry"),
        ("12345", "x", "not a key"),
        ("not-hex-at-all", "x", "not a key"),
    ] {
        let o = export(&ws, key, to);
        assert_eq!(o.status.code(), Some(2), "{key} {to}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(why), "{key}: {}", text(&o.stderr));
    }
    // Two keys with the prefix: both listed.
    let twin = format!("{}{}", &prune[..8], "f".repeat(56));
    let twin = if twin == prune {
        format!("{}{}", &prune[..8], "e".repeat(56))
    } else {
        twin
    };
    std::fs::create_dir_all(entry_dir(&ws, &twin)).unwrap();
    let o = export(&ws, &prune[..8], "x");
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains(&prune) && text(&o.stderr).contains(&twin));
    std::fs::remove_dir(entry_dir(&ws, &twin)).unwrap();
    // A damaged entry is not exported.
    let w = dir.join("weights.safetensors");
    let mut bytes = std::fs::read(&w).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&w, bytes).unwrap();
    let o = export(&ws, &prune, "damaged");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("damaged"));
    assert!(!ws.path("damaged").exists());
    // Nor into an empty folder, which a failed export leaves empty; and nothing is left
    // beside it (an export is written beside `--to` and renamed to it once whole).
    std::fs::create_dir(ws.path("empty")).unwrap();
    let o = export(&ws, &prune, "empty");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_dir(ws.path("empty")).unwrap().count(), 0);
    let beside: Vec<String> = std::fs::read_dir(ws.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".export-"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
    // A `--to` that cannot be made is refused before anything is read (it was a failed
    // write, exit 1, after the checks).
    #[cfg(target_os = "linux")]
    {
        let o = export(&ws, &evaluate, "/proc/cotune-export");
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("cannot write in"),
            "{}",
            text(&o.stderr)
        );
    }
}

#[test]
fn a_layer_studys_masks_export_under_their_tensor_names() {
    let ws = Workspace::new();
    let (rows, cols) = (32, 24);
    let values = stages::prune::gaussian(rows * cols, 9);
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_safetensors(
        &ws.path("model.safetensors"),
        &[("enc.q.weight", "F32", vec![rows, cols], bytes)],
    );
    ws.write(
        "exp.toml",
        r#"name = "study"
seed = 3
[model]
kind = "checkpoint"
path = "model.safetensors"
layers = ["enc.*"]
calibration_tokens = 32
[prune]
pattern = ["nm"]
nm = ["2:4"]
method = ["magnitude"]
[kernel_tune]
strategy = "model"
budget = 1
batch_tokens = [8]
"#,
    );
    let o = ws.run(BIN, "exp.toml", "store", "out", &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let dir = results::current(&ws.path("out"), "study").unwrap();
    let study = keys(&results::read_table(&dir.join("layer_study")).unwrap())[0].clone();
    let o = export(&ws, &study, "study");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (masks, _) = safetensors_io::read(&ws.path("study/masks.safetensors"));
    let m = &masks["enc.q.weight_mask"];
    assert_eq!((m.0.as_str(), &m.1), ("BOOL", &vec![rows, cols]));
    // Magnitude 2:4: each group of 4 keeps its two largest |w|.
    for (g, kept) in values.chunks(4).zip(m.2.chunks(4)) {
        let mut order: Vec<usize> = (0..4).collect();
        order.sort_by(|&a, &b| g[b].abs().total_cmp(&g[a].abs()));
        let want: Vec<u8> = (0..4).map(|i| u8::from(order[..2].contains(&i))).collect();
        assert_eq!(kept, want.as_slice());
    }
}
