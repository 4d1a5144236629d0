//! The shipped VENOM Fig. 11 reproduction through the real `cotune`: its layer study of the
//! shipped checkpoint, and `cotune report --expected` as a check (within the tolerance, exit 0;
//! outside it or matching no row, exit 1 naming the metric).

use e2e::harness::Workspace;
use results::Value;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_cotune-real");

/// The shipped VENOM Fig. 11 reproduction (`experiments/repro/venom-fig11/`) through the real
/// `cotune run` and `cotune report --expected`: every published retained L1 is matched within
/// its tolerance (±0.02), the page's measured numbers are the layer-study table's, and the
/// plots its tables support are drawn.
#[test]
fn the_venom_fig11_reproduction_lands_within_the_published_values() {
    let ws = Workspace::new();
    let repro = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/repro/venom-fig11");
    let (file, expected) = (repro.join("experiment.toml"), repro.join("expected.toml"));
    // The shipped matrix is the query weight the gaussian_checkpoint example writes.
    let shipped = stages::model::read_checkpoint(
        &repro.join("gaussian-query-768.safetensors"),
        &["*".to_string()],
        false,
    )
    .unwrap();
    assert_eq!(shipped.len(), 1);
    assert_eq!(shipped[0].values, stages::prune::gaussian(768 * 768, 100));
    let (store, out, to) = (ws.path("store"), ws.path("out"), ws.path("report"));
    let arg = |p: &Path| p.to_str().unwrap().to_string();
    let o = ws.cotune(
        BIN,
        &[
            "run",
            &arg(&file),
            "--store",
            &arg(&store),
            "--out",
            &arg(&out),
            "-q",
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exp_dir = out.join("repro-venom-fig11");
    let o = ws.cotune(
        BIN,
        &[
            "report",
            &arg(&exp_dir),
            "--expected",
            &arg(&expected),
            "--to",
            &arg(&to),
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains(
            "12 metric(s), 12 within tolerance, 0 outside, 0 measured without a tolerance, 0 not \
             measured"
        ),
        "{said}"
    );
    // Regression: an expected file whose metrics match no row (or miss their tolerance)
    // exited 0 with every metric "not measured"; now the check fails, naming them.
    let text = std::fs::read_to_string(&expected).unwrap();
    for (edit, needle) in [
        (
            text.replacen("\"prune.m\" = 8", "\"prune.m\" = 9", 1),
            "`layer_study` table that matches has a value in the metric's column: 2:8",
        ),
        (
            text.replacen("published = 0.4848", "published = 0.6848", 1),
            "outside the tolerance: 2:8",
        ),
    ] {
        assert_ne!(edit, text);
        let other = ws.write("other.toml", &edit);
        let o = ws.cotune(
            BIN,
            &["report", &arg(&exp_dir), "--expected", &arg(&other)],
            None,
        );
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{err}");
    }
    for plot in ["retained_l1", "tuner_calibration", "tuner_regret"] {
        for ext in ["png", "svg"] {
            let len = std::fs::metadata(to.join(format!("{plot}.{ext}"))).map_or(0, |m| m.len());
            assert!(len > 1000, "{plot}.{ext}: {len} bytes");
        }
    }
    let html = std::fs::read_to_string(to.join("report.html")).unwrap();
    let table = &html[html.find("<table id=\"expected\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let studies = results::read_table(&exp_dir.join("layer_study")).unwrap();
    let l1s: Vec<f64> = studies
        .iter()
        .filter_map(|r| r.get("retained_l1").and_then(Value::as_f64))
        .collect();
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 12, "the figure's 12 points");
    for tr in rows {
        assert!(tr.contains(">within</td>"), "outside the tolerance: {tr}");
        let measured = tr
            .split("data-col=\"measured\" data-value=\"")
            .nth(1)
            .unwrap();
        let measured: f64 = measured[..measured.find('"').unwrap()].parse().unwrap();
        assert!(l1s.contains(&measured), "{measured} is a layer-study value");
    }
    // A folder without tables is bad input.
    let empty = ws.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = ws.cotune(BIN, &["report", &arg(&empty)], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no cotune tables"));
}
