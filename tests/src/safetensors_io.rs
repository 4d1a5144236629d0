//! Safetensors files written and read by hand (8-byte little-endian header length, the JSON
//! header, the data), so that the tests check cotune's files with a decoder of their own.

use std::collections::BTreeMap;
use std::path::Path;

/// A tensor as a file holds it: dtype name, shape, little-endian bytes.
pub type Tensor = (String, Vec<usize>, Vec<u8>);

/// Writes `(name, dtype, shape, little-endian bytes)` tensors.
pub fn write(path: &Path, tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) {
    let mut header = String::from("{");
    let mut data = vec![];
    for (i, (name, dtype, shape, bytes)) in tensors.iter().enumerate() {
        let (start, end) = (data.len(), data.len() + bytes.len());
        data.extend_from_slice(bytes);
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{start},{end}]}}"
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

/// Reads every tensor (by name) and the `__metadata__` strings; panics on a malformed file.
pub fn read(path: &Path) -> (BTreeMap<String, Tensor>, BTreeMap<String, String>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut tensors = BTreeMap::new();
    let mut meta = BTreeMap::new();
    for (name, t) in header.as_object().unwrap() {
        if name == "__metadata__" {
            for (k, v) in t.as_object().unwrap() {
                meta.insert(k.clone(), v.as_str().unwrap().to_string());
            }
            continue;
        }
        let shape = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let off = t["data_offsets"].as_array().unwrap();
        let (a, b) = (
            off[0].as_u64().unwrap() as usize,
            off[1].as_u64().unwrap() as usize,
        );
        tensors.insert(
            name.clone(),
            (
                t["dtype"].as_str().unwrap().to_string(),
                shape,
                data[a..b].to_vec(),
            ),
        );
    }
    (tensors, meta)
}

/// The values of an F32 tensor.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    assert_eq!(t.0, "F32");
    t.2.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
