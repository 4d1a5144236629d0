//! `meta.json`: what a store entry records about itself.

use crate::key::CanonConfig;
use results::{Row, Value};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;

/// The store's on-disk format version (in every meta.json).
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
    /// Serialises to pretty JSON.
    pub fn to_json(&self) -> String {
        let j = json!({
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
        serde_json::to_string_pretty(&j).expect("JSON of plain values always serialises")
    }

    /// Parses meta.json; `None` when it is not a complete entry of this format.
    pub fn from_json(text: &str) -> Option<Meta> {
        let j: Json = serde_json::from_str(text).ok()?;
        if j.get("format")?.as_u64()? != META_FORMAT as u64 {
            return None;
        }
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
