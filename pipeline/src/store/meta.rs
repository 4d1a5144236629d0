//! `meta.json`: what a store entry records about itself.

use crate::key::CanonConfig;
use results::{Row, Value};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;

/// The store's on-disk format version (in every meta.json). Since 2026-12-06 a record also
/// holds the blake3 of itself (`digest`), which a reader checks; a record without one (written
/// before) is read as it is, and older binaries, which ignore the field, still read new ones.
pub const META_FORMAT: u32 = 1;

/// Everything an entry says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    /// Full key, hex.
    pub key: String,
    /// Stage name.
    pub stage: String,
    /// Stage version.
    pub version: u32,
    /// Input keys, hex.
    pub inputs: Vec<String>,
    /// Canonical config the key covers.
    pub config: CanonConfig,
    /// The stage's metrics row.
    pub metrics: Row,
    /// Extra rows (kernel_tune: one per measured point).
    pub rows: Vec<Row>,
    /// Artifact file name → blake3 hex.
    pub artifacts: BTreeMap<String, String>,
    /// Host, start time (unix seconds), duration, cotune version.
    pub provenance: Provenance,
}

/// Where and when an entry was computed.
#[derive(Clone, Debug, PartialEq)]
pub struct Provenance {
    /// Host name.
    pub host: String,
    /// Start, seconds since the Unix epoch.
    pub started_at: f64,
    /// Duration of the computation, seconds.
    pub duration_s: f64,
    /// cotune version that computed it.
    pub cotune_version: String,
}

/// Encodes a cell with its type, exactly (non-finite floats as strings).
pub fn value_to_json(v: &Value) -> Json {
    fn f(x: f64) -> Json {
        if x.is_finite() {
            json!(x)
        } else {
            Json::String(format!("{x}"))
        }
    }
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => json!({ "bool": b }),
        Value::I64(i) => json!({ "i64": i }),
        Value::F64(x) => json!({ "f64": f(*x) }),
        Value::Str(s) => json!({ "str": s }),
        Value::ListF64(xs) => json!({ "list_f64": xs.iter().map(|&x| f(x)).collect::<Vec<_>>() }),
        Value::ListStr(xs) => json!({ "list_str": xs }),
    }
}

/// Decodes [`value_to_json`].
pub fn value_from_json(j: &Json) -> Option<Value> {
    fn f(j: &Json) -> Option<f64> {
        match j {
            Json::Number(n) => n.as_f64(),
            Json::String(s) => match s.as_str() {
                "NaN" => Some(f64::NAN),
                "inf" => Some(f64::INFINITY),
                "-inf" => Some(f64::NEG_INFINITY),
                _ => None,
            },
            _ => None,
        }
    }
    if j.is_null() {
        return Some(Value::Null);
    }
    let obj = j.as_object()?;
    let (tag, v) = obj.iter().next()?;
    Some(match tag.as_str() {
        "bool" => Value::Bool(v.as_bool()?),
        "i64" => Value::I64(v.as_i64()?),
        "f64" => Value::F64(f(v)?),
        "str" => Value::Str(v.as_str()?.to_owned()),
        "list_f64" => Value::ListF64(v.as_array()?.iter().map(f).collect::<Option<_>>()?),
        "list_str" => Value::ListStr(
            v.as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

fn row_to_json(row: &Row) -> Json {
    Json::Object(
        row.iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect::<Map<_, _>>(),
    )
}

fn row_from_json(j: &Json) -> Option<Row> {
    j.as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), value_from_json(v)?)))
        .collect()
}

impl Meta {
    /// Serialises to pretty JSON, with the blake3 of the record's compact form beside it
    /// ([`record_digest`]), so that a reader finds a record that changed after it was written.
    pub fn to_json(&self) -> String {
        let mut j = json!({
            "format": META_FORMAT,
            "key": self.key,
            "stage": self.stage,
            "version": self.version,
            "inputs": self.inputs,
            "config": self.config,
            "metrics": row_to_json(&self.metrics),
            "rows": self.rows.iter().map(row_to_json).collect::<Vec<_>>(),
            "artifacts": self.artifacts,
            "provenance": {
                "host": self.provenance.host,
                "started_at": self.provenance.started_at,
                "duration_s": self.provenance.duration_s,
                "cotune_version": self.provenance.cotune_version,
            },
        });
        let digest = record_digest(&j);
        if let Json::Object(m) = &mut j {
            m.insert("digest".into(), Json::String(digest));
        }
        serde_json::to_string_pretty(&j).expect("JSON of plain values always serialises")
    }

    /// Parses and verifies meta.json: the error says why it is not a whole entry record (not
    /// JSON, another format, a field missing, or a record that differs from its digest).
    pub fn from_json(text: &str) -> Result<Meta, String> {
        let mut j: Json =
            serde_json::from_str(text).map_err(|e| format!("meta.json is not JSON: {e}"))?;
        if j.get("format").and_then(Json::as_u64) != Some(u64::from(META_FORMAT)) {
            return Err(format!("meta.json is not of format {META_FORMAT}"));
        }
        if let Some(recorded) = j.as_object_mut().and_then(|m| m.remove("digest")) {
            if recorded.as_str() != Some(record_digest(&j).as_str()) {
                return Err("meta.json does not match its recorded blake3".into());
            }
        }
        Self::from_record(&j).ok_or_else(|| "meta.json is not a complete entry record".into())
    }

    fn from_record(j: &Json) -> Option<Meta> {
        let p = j.get("provenance")?;
        Some(Meta {
            key: j.get("key")?.as_str()?.to_owned(),
            stage: j.get("stage")?.as_str()?.to_owned(),
            version: j.get("version")?.as_u64()? as u32,
            inputs: serde_json::from_value(j.get("inputs")?.clone()).ok()?,
            config: serde_json::from_value(j.get("config")?.clone()).ok()?,
            metrics: row_from_json(j.get("metrics")?)?,
            rows: j
                .get("rows")?
                .as_array()?
                .iter()
                .map(row_from_json)
                .collect::<Option<_>>()?,
            artifacts: serde_json::from_value(j.get("artifacts")?.clone()).ok()?,
            provenance: Provenance {
                host: p.get("host")?.as_str()?.to_owned(),
                started_at: p.get("started_at")?.as_f64()?,
                duration_s: p.get("duration_s")?.as_f64()?,
                cotune_version: p.get("cotune_version")?.as_str()?.to_owned(),
            },
        })
    }
}

/// The blake3 of a record's compact JSON (keys sorted, numbers in their shortest round-trip
/// form: what the record parses back to serialises to the same text).
fn record_digest(j: &Json) -> String {
    let text = serde_json::to_string(j).expect("JSON of plain values always serialises");
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::CanonValue;

    fn meta() -> Meta {
        let row: Row = [
            ("accuracy".to_owned(), Value::F64(0.3064066852367688)),
            ("latency".to_owned(), Value::F64(f64::INFINITY)),
            ("status".to_owned(), Value::Str("ok".into())),
        ]
        .into_iter()
        .collect();
        Meta {
            key: "ab".repeat(32),
            stage: "evaluate".into(),
            version: 3,
            inputs: vec!["cd".repeat(32)],
            config: CanonConfig::new().with("lr", CanonValue::F64Bits(1e-3f64.to_bits())),
            metrics: row.clone(),
            rows: vec![row],
            artifacts: [("weights.bin".to_owned(), "ef".repeat(32))].into(),
            provenance: Provenance {
                host: "h".into(),
                started_at: 1.7e9 + 0.25,
                duration_s: 0.1,
                cotune_version: "0.1.0".into(),
            },
        }
    }

    #[test]
    fn a_record_reads_back_whole_and_verified() {
        let m = meta();
        let text = m.to_json();
        assert!(text.contains("\"digest\""));
        assert_eq!(Meta::from_json(&text), Ok(m));
    }

    /// A value changed after the write (one digit, a type, a field removed) is found, as a
    /// changed artifact is.
    #[test]
    fn a_changed_record_is_refused() {
        let text = meta().to_json();
        let edits = [
            text.replace("0.3064066852367688", "9.3064066852367688"),
            text.replacen(r#""f64": 0.3064066852367688"#, r#""str": "x""#, 1),
            text.replacen(r#""host": "h","#, "", 1),
        ];
        for edited in edits {
            assert_ne!(edited, text);
            let err = Meta::from_json(&edited).unwrap_err();
            assert!(err.contains("does not match its recorded blake3"), "{err}");
        }
        assert!(Meta::from_json(&text[..text.len() / 2]).is_err());
    }

    /// Entries written before records carried their digest are still read.
    #[test]
    fn a_record_without_a_digest_is_read_as_it_is() {
        let m = meta();
        let mut j: Json = serde_json::from_str(&m.to_json()).unwrap();
        j.as_object_mut().unwrap().remove("digest");
        assert_eq!(Meta::from_json(&j.to_string()), Ok(m));
        j["format"] = json!(2);
        assert!(Meta::from_json(&j.to_string()).is_err());
    }
}
