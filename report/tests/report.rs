//! `write_report` on a hand-made experiment output: every plot drawn and non-empty, the
//! page's numbers equal to the tables', and bad input named.

use report::{write_report, ReportError};
use results::{write_parquet, Row, TableMeta, Value};
use std::path::Path;

fn row(cells: &[(&str, Value)]) -> Row {
    cells
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

fn meta() -> TableMeta {
    TableMeta::new("synthetic", "00ff")
}

/// Four trials measured against one dense model, one failed; three tunings of six
/// configurations; 2:4 … 2:16 best kernels; a layer study.
fn write_experiment(dir: &Path) {
    let eval = |key: &str, pattern: &str, m: i64, acc: f64, speedup: f64| {
        row(&[
            ("key", s(key)),
            ("status", s("ok")),
            ("error", Value::Null),
            ("prune.pattern", s(pattern)),
            ("prune.n", Value::I64(2)),
            ("prune.m", Value::I64(m)),
            ("prune.v", Value::I64(64)),
            ("prune.method", s("magnitude")),
            ("accuracy", Value::F64(acc)),
            ("speedup_vs_dense", Value::F64(speedup)),
            ("speedup_ci_lo", Value::F64(speedup * 0.97)),
            ("speedup_ci_hi", Value::F64(speedup * 1.02)),
            ("dense_model", s("mlp 64-32-10")),
            ("dense_latency_us", Value::F64(100.0 + m as f64 * 0.1)),
            ("latency_us_median", Value::F64(100.0 / speedup)),
            ("weight_bytes", Value::F64(40_000.0 / speedup)),
            (
                "layer_latency_us",
                Value::ListF64(vec![60.0 / speedup, 30.0 / speedup]),
            ),
            ("layer_dense_latency_us", Value::ListF64(vec![60.0, 30.0])),
            ("non_gemm_us", Value::F64(10.0)),
            ("host", s("testhost")),
            ("isa", s("avx2")),
            ("device", s("cpu")),
        ])
    };
    // 2:4 ran its second layer dense at its largest batch (`[evaluate] dense_where_faster`).
    let mut ran_dense = eval("e-24", "vnm", 4, 0.96, 1.6);
    let names = |v: &[&str]| Value::ListStr(v.iter().map(|s| s.to_string()).collect());
    ran_dense.insert("layer_names".into(), names(&["fc0", "fc1"]));
    ran_dense.insert("dense_layers_b1".into(), names(&["fc0"]));
    ran_dense.insert("dense_layers_b64".into(), names(&["fc1"]));
    let evaluate = vec![
        eval("e-dense", "dense", 4, 0.97, 1.0),
        ran_dense,
        eval("e-28", "vnm", 8, 0.93, 2.9),
        eval("e-216", "vnm", 16, 0.80, 2.8),
        row(&[
            ("key", s("e-bad")),
            ("status", s("failed")),
            ("error", s("out of memory")),
            ("prune.pattern", s("nm")),
        ]),
    ];
    std::fs::create_dir_all(dir.join("evaluate")).unwrap();
    write_parquet(&dir.join("evaluate/part-000.parquet"), &evaluate, &meta()).unwrap();
    let pareto: Vec<Row> = evaluate[..3]
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.insert(
                "front.latency_us".into(),
                Value::F64(100.0 / r["speedup_vs_dense"].as_f64().unwrap()),
            );
            r.insert(
                "front.tie".into(),
                Value::Bool(r["key"].as_str() == Some("e-24")),
            );
            r
        })
        .collect();
    write_parquet(&dir.join("pareto.parquet"), &pareto, &meta()).unwrap();
    let mut tunes = vec![];
    let mut best = vec![];
    for (t, m) in [4i64, 8, 16].iter().enumerate() {
        for c in 0..6 {
            let latency = 50.0 / *m as f64 * (1.0 + ((c * 7 + t) % 6) as f64 * 0.1);
            let r = row(&[
                ("key", s(&format!("k{m}"))),
                ("status", s("ok")),
                ("baseline", Value::Bool(false)),
                ("format.pattern", s("vnm")),
                ("format.n", Value::I64(2)),
                ("format.m", Value::I64(*m)),
                ("format.v", Value::I64(64)),
                ("format.rows", Value::I64(768)),
                ("format.cols", Value::I64(768)),
                ("kernel_tune.batch_tokens", Value::I64(512)),
                ("kernel_tune.backend", s("cpu")),
                ("kernel_tune.strategy", s("exhaustive")),
                ("kernel", s("vnm_rows")),
                ("params", s(&format!("c{c}"))),
                ("predicted_cost_s", Value::F64(1e-5 * (1.0 + c as f64))),
                ("latency_us_median", Value::F64(latency)),
                ("speedup_vs_dense", Value::F64(50.0 / latency)),
            ]);
            tunes.push(r);
        }
        let b = tunes[t * 6..]
            .iter()
            .min_by(|a, b| {
                a["latency_us_median"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["latency_us_median"].as_f64().unwrap())
            })
            .unwrap()
            .clone();
        best.push(b);
    }
    std::fs::create_dir_all(dir.join("kernel_tune")).unwrap();
    write_parquet(&dir.join("kernel_tune/part-000.parquet"), &tunes, &meta()).unwrap();
    write_parquet(&dir.join("kernel_best.parquet"), &best, &meta()).unwrap();
    let study: Vec<Row> = [
        ("nm", 8, 0.484),
        ("vnm", 8, 0.398),
        ("unstructured", 0, 0.516),
    ]
    .iter()
    .map(|(p, m, l1)| {
        row(&[
            ("key", s(&format!("s-{p}"))),
            ("status", s("ok")),
            ("prune.pattern", s(p)),
            ("prune.n", Value::I64(2)),
            ("prune.m", Value::I64(*m)),
            ("prune.v", Value::I64(64)),
            ("prune.sparsity", Value::F64(0.75)),
            ("retained_l1", Value::F64(*l1)),
        ])
    })
    .collect();
    std::fs::create_dir_all(dir.join("layer_study")).unwrap();
    write_parquet(&dir.join("layer_study/part-000.parquet"), &study, &meta()).unwrap();
}

/// The `data-value` of every cell of `table` in `html`: (row's data-key, data-col, value).
fn cells(html: &str, table: &str) -> Vec<(String, String, String)> {
    let start = html
        .find(&format!("<table id=\"{table}\">"))
        .expect("table in page");
    let body = &html[start..start + html[start..].find("</table>").unwrap()];
    let mut out = vec![];
    for tr in body.split("<tr").skip(2) {
        let key = tr
            .split_once("data-key=\"")
            .map(|(_, r)| r[..r.find('"').unwrap()].to_string())
            .unwrap_or_default();
        for td in tr.split("<td").skip(1) {
            let attr = |name: &str| {
                td.split_once(&format!("{name}=\""))
                    .map(|(_, r)| r[..r.find('"').unwrap()].to_string())
            };
            if let (Some(col), Some(v)) = (attr("data-col"), attr("data-value")) {
                out.push((key.clone(), col, v));
            }
        }
    }
    out
}

#[test]
fn every_plot_is_drawn_and_the_page_numbers_are_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("synthetic");
    write_experiment(&exp);
    let to = dir.path().join("out");
    let w = write_report(&exp, &to, None).unwrap();
    assert!(w.skipped.is_empty(), "skipped: {:?}", w.skipped);
    for name in [
        "pareto",
        "layer_latency",
        "speedup_vs_m",
        "tuner_calibration",
        "tuner_regret",
        "retained_l1",
    ] {
        for ext in ["png", "svg"] {
            let f = to.join(format!("{name}.{ext}"));
            let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} has {len} bytes", f.display());
        }
        let png = std::fs::read(to.join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png is a PNG");
    }
    let html = std::fs::read_to_string(&w.html).unwrap();
    assert_eq!(html.matches("<svg").count(), 6, "six inline plots");
    assert!(
        !html.contains("http://")
            || html.matches("http://").count()
                == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "nothing but SVG namespaces names a URL"
    );
    assert!(!html.contains("<script"), "no script");
    // Every number of the trials table equals its row's cell in evaluate/ exactly.
    let evaluate = results::read_table(&exp.join("evaluate")).unwrap();
    let pareto = results::read_table(&exp.join("pareto.parquet")).unwrap();
    let found = cells(&html, "trials");
    assert!(found.len() >= 4 * 6, "{} cells", found.len());
    for (key, col, v) in &found {
        let source = if col == "front.latency_us" {
            &pareto
        } else {
            &evaluate
        };
        let cell = source
            .iter()
            .find(|r| r["key"].as_str() == Some(key.as_str()))
            .and_then(|r| r.get(col));
        match cell.and_then(Value::as_f64) {
            Some(x) => assert_eq!(v.parse::<f64>().unwrap(), x, "{key} {col}"),
            None => assert_eq!(v, "", "{key} {col} is empty in the table"),
        }
    }
    // The best-kernels table, likewise, and its fraction of the ideal M/2.
    let best = results::read_table(&exp.join("kernel_best.parquet")).unwrap();
    for (_, col, v) in cells(&html, "kernels")
        .iter()
        .filter(|c| c.1 == "speedup_vs_dense")
    {
        let v: f64 = v.parse().unwrap();
        assert!(
            best.iter().any(|r| r[col.as_str()].as_f64() == Some(v)),
            "{v}"
        );
    }
    assert!(
        html.contains("out of memory"),
        "the failed trial's error is shown"
    );
    // The layers a trial ran dense, at its largest batch (the speedup's), in the trials table
    // and in its bar's label on the per-layer plot.
    let trials = &html[html.find("<table id=\"trials\">").unwrap()..];
    let trials = &trials[..trials.find("</table>").unwrap()];
    assert!(trials.contains("<th>ran dense</th>"));
    let e24 = trials
        .split("<tr")
        .find(|tr| tr.contains("data-key=\"e-24\""))
        .unwrap();
    assert!(e24.contains("<td data-col=\"ran dense\">fc1</td>"), "{e24}");
    assert!(html.contains("(fc1 dense)"), "the bar's label names it");
    // The dense passes read 100.4–101.6 µs: the trials' note says how far apart.
    assert!(
        html.contains("Dense drift 1.2 %"),
        "the dense drift is noted"
    );
}

#[test]
fn a_missing_column_skips_its_plot_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("synthetic");
    write_experiment(&exp);
    // Per-layer latencies gone from the front: that plot is skipped, the others drawn.
    let pareto: Vec<Row> = results::read_table(&exp.join("pareto.parquet"))
        .unwrap()
        .into_iter()
        .map(|mut r| {
            r.remove("layer_latency_us");
            r
        })
        .collect();
    write_parquet(&exp.join("pareto.parquet"), &pareto, &meta()).unwrap();
    let w = write_report(&exp, &dir.path().join("out"), None).unwrap();
    assert_eq!(w.skipped.len(), 1, "{:?}", w.skipped);
    assert!(w.skipped[0].1.contains("layer_latency_us"));
    let html = std::fs::read_to_string(&w.html).unwrap();
    assert!(html.contains("Plots not drawn") && html.contains("layer_latency_us"));
}

#[test]
fn a_folder_without_tables_and_an_unknown_schema_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let err = report::experiment_dirs(dir.path()).unwrap_err();
    assert!(
        matches!(err, ReportError::NoTables { .. }) && err.is_bad_input(),
        "{err}"
    );
    let exp = dir.path().join("future");
    std::fs::create_dir_all(exp.join("evaluate")).unwrap();
    let mut m = meta();
    m.schema_version = 99;
    write_parquet(
        &exp.join("evaluate/part-000.parquet"),
        &[row(&[("key", s("a"))])],
        &m,
    )
    .unwrap();
    assert_eq!(
        report::experiment_dirs(dir.path()).unwrap(),
        vec![exp.clone()]
    );
    let err = write_report(&exp, &dir.path().join("out"), None).unwrap_err();
    assert!(
        matches!(err, ReportError::UnknownSchema { .. }) && err.is_bad_input(),
        "{err}"
    );
    assert!(err.to_string().contains("schema version 99"), "{err}");
    // A table that is not Parquet is bad input too, naming the file.
    std::fs::write(exp.join("evaluate/part-000.parquet"), b"not parquet").unwrap();
    let err = write_report(&exp, &dir.path().join("out"), None).unwrap_err();
    assert!(
        err.is_bad_input() && err.to_string().contains("part-000.parquet"),
        "{err}"
    );
}

#[test]
fn expected_numbers_are_compared_and_a_bad_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("synthetic");
    write_experiment(&exp);
    let expected = dir.path().join("expected.toml");
    std::fs::write(
        &expected,
        r#"paper = "P"
figure = "Fig. 1"
table = "layer_study"
[[metric]]
label = "2:8"
column = "retained_l1"
where = { "prune.pattern" = "nm", "prune.m" = 8 }
published = 0.4848
tolerance = 0.02
[[metric]]
label = "64:2:8"
column = "retained_l1"
where = { "prune.pattern" = "vnm" }
independent = 0.30
tolerance = 0.02
[[metric]]
label = "absent"
column = "retained_l1"
where = { "prune.pattern" = "csr" }
published = 0.5
"#,
    )
    .unwrap();
    let e = report::Expected::read(&expected).unwrap();
    let exp_rows = report::read_experiment(&exp).unwrap();
    let c = e.compare(&exp_rows);
    assert_eq!(c[0].measured, Some(0.484));
    assert_eq!(c[0].within(), Some(true));
    assert_eq!(c[1].within(), Some(false));
    assert_eq!((c[2].measured, c[2].rows), (None, 0));
    // A decimal boundary is inside: 0.484 − 0.504 is −0.020000000000000018 in binary.
    let mut edge = e.clone();
    edge.metric[0].published = Some(0.504);
    assert!((0.484f64 - 0.504).abs() > 0.02);
    assert_eq!(edge.compare(&exp_rows)[0].within(), Some(true));
    // A NaN among the matching rows is no measurement (it was a mean of NaN, "within" no
    // tolerance, exit 0).
    let mut nan_rows = report::read_experiment(&exp).unwrap();
    for r in &mut nan_rows.layer_study {
        if r.get("prune.m").and_then(Value::as_f64) == Some(8.0) {
            r.insert("retained_l1".into(), Value::F64(f64::NAN));
        }
    }
    let c = e.compare(&nan_rows);
    assert_eq!((c[0].measured, c[0].non_finite), (None, 1));
    assert_eq!(c[0].within(), None);
    let w = write_report(&exp, &dir.path().join("out"), Some(&expected)).unwrap();
    let html = std::fs::read_to_string(&w.html).unwrap();
    let table = cells(&html, "expected");
    assert!(table
        .iter()
        .any(|(_, col, v)| col == "measured" && v == "0.484"));
    assert!(html.contains("OUTSIDE") && html.contains("not measured"));

    std::fs::write(&expected, "paper = \"P\"\nfigure = 3\n").unwrap();
    let err = report::Expected::read(&expected).unwrap_err();
    assert!(
        err.is_bad_input() && err.to_string().contains("line 2"),
        "{err}"
    );
    // Values that compare to nothing: a tolerance below 0, a reference that is no number, and
    // a file with no metric at all.
    let head = "paper = \"P\"\nfigure = \"1\"\nsource = \"s\"\ntable = \"evaluate\"\n";
    let metric = "[[metric]]\nlabel = \"a\"\ncolumn = \"accuracy\"\nwhere = {}\n";
    for (body, says) in [
        (
            format!("{metric}published = 0.5\ntolerance = -1.0\n"),
            "tolerance",
        ),
        (
            format!("{metric}published = nan\n"),
            "`published` is not a number",
        ),
        (String::new(), "no [[metric]]"),
        (
            format!("{metric}published = 0.5\n{metric}published = 0.6\n"),
            "metric \"a\" is there twice",
        ),
        (
            "[[metric]]\nlabel = \" \"\ncolumn = \"accuracy\"\npublished = 0.5\n".into(),
            "empty `label`",
        ),
        (
            "[[metric]]\nlabel = \"a\"\ncolumn = \"accuracy\"\nwhere = { \"prune.m\" = [8] }\npublished = 0.5\n".into(),
            "expected a string, number or boolean",
        ),
    ] {
        std::fs::write(&expected, format!("{head}{body}")).unwrap();
        let err = report::Expected::read(&expected).unwrap_err();
        assert!(
            err.is_bad_input() && err.to_string().contains(says),
            "{err}"
        );
    }
    std::fs::write(&expected, b"paper = \"P\xff\"\n").unwrap();
    let err = report::Expected::read(&expected).unwrap_err();
    assert!(
        err.is_bad_input() && err.to_string().contains("not UTF-8"),
        "{err}"
    );
    // Columns the table does not have, or that hold no numbers: bad files, before any output
    // (they read as "not measured" before).
    for (metric, says) in [
        (
            "column = \"acuracy\"\nwhere = {}\n",
            "column \"acuracy\" is not a column of table \"evaluate\"",
        ),
        (
            "column = \"prune.pattern\"\nwhere = {}\n",
            "holds no numbers",
        ),
        (
            "column = \"accuracy\"\nwhere = { \"prune.patern\" = \"nm\" }\n",
            "`where` column \"prune.patern\" is not a column",
        ),
        (
            "column = \"accuracy\"\nwhere = { \"prune.pattern\" = 8 }\n",
            "is a number, but the column holds a string",
        ),
    ] {
        let body = format!("{head}[[metric]]\nlabel = \"a\"\n{metric}published = 0.5\n");
        std::fs::write(&expected, body).unwrap();
        let to = dir.path().join("bad-columns");
        let err = write_report(&exp, &to, Some(&expected)).unwrap_err();
        assert!(
            err.is_bad_input() && err.to_string().contains(says),
            "{err}"
        );
        assert!(!to.exists(), "nothing written for a bad file");
    }
}

#[test]
fn several_experiments_get_an_index_with_their_fronts_together() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("out");
    for name in ["grid", "unified"] {
        write_experiment(&root.join(name));
    }
    let dirs = report::experiment_dirs(&root).unwrap();
    assert_eq!(dirs.len(), 2);
    let written: Vec<_> = dirs
        .iter()
        .map(|d| {
            let to = root.join(format!(
                "{}-report",
                d.file_name().unwrap().to_string_lossy()
            ));
            write_report(d, &to, None).unwrap()
        })
        .collect();
    let experiments: Vec<_> = dirs
        .iter()
        .map(|d| report::read_experiment(d).unwrap())
        .collect();
    let index = report::write_index(&experiments, &written, &root).unwrap();
    assert!(index.skipped.is_empty(), "{:?}", index.skipped);
    assert_eq!(index.files.len(), 2);
    let html = std::fs::read_to_string(&index.html).unwrap();
    assert!(html.contains("href=\"grid-report/report.html\""), "{html}");
    assert!(html.contains("href=\"unified-report/report.html\""));
    assert_eq!(html.matches("<svg").count(), 1, "the fronts plot inline");
    for ext in ["png", "svg"] {
        assert!(
            std::fs::metadata(root.join(format!("fronts.{ext}")))
                .unwrap()
                .len()
                > 1000
        );
    }
    // The index's folder is not itself taken for an experiment.
    assert_eq!(report::experiment_dirs(&root).unwrap().len(), 2);
}
