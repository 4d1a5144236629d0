//! MNIST-style IDX files: `idx3-ubyte` images (magic 0x00000803) and `idx1-ubyte` labels
//! (magic 0x00000801), big-endian dimensions, optionally gzip-compressed (`.gz` suffix).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::split::{class_count, split, Samples};
use crate::{Dataset, DatasetError, DatasetSpec};

/// Reads a whole file, decompressing it when its name ends in `.gz`.
fn read_maybe_gz(path: &Path) -> Result<Vec<u8>, DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| DatasetError::bad(path, format!("not a valid gzip file: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Parses an unsigned-byte IDX file of `ndim` dimensions: returns the dimensions and the data.
fn parse(path: &Path, bytes: &[u8], ndim: u8) -> Result<(Vec<usize>, Vec<u8>), DatasetError> {
    let expected = 0x0800u32 | ndim as u32;
    if bytes.len() < 4 {
        return Err(DatasetError::bad(
            path,
            format!("truncated: {} bytes, no IDX header", bytes.len()),
        ));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if magic != expected {
        return Err(DatasetError::bad(
            path,
            format!("wrong magic number 0x{magic:08x}, expected 0x{expected:08x} (unsigned bytes, {ndim} dimensions)"),
        ));
    }
    let header = 4 + 4 * ndim as usize;
    if bytes.len() < header {
        return Err(DatasetError::bad(
            path,
            format!("truncated header: {} bytes, expected {header}", bytes.len()),
        ));
    }
    let dims: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let len = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let len =
        len.ok_or_else(|| DatasetError::bad(path, format!("dimensions {dims:?} overflow")))?;
    if len > crate::VALUES_MAX {
        return Err(DatasetError::bad(
            path,
            format!(
                "dimensions {dims:?} hold {len} values, more than {}, the most a data set may hold",
                crate::VALUES_MAX
            ),
        ));
    }
    let body = &bytes[header..];
    if body.len() < len {
        return Err(DatasetError::bad(
            path,
            format!(
                "truncated: dimensions {dims:?} need {len} data bytes, found {}",
                body.len()
            ),
        ));
    }
    if body.len() > len {
        return Err(DatasetError::bad(
            path,
            format!("{} trailing bytes after the data", body.len() - len),
        ));
    }
    Ok((dims, body.to_vec()))
}

/// Reads one (images, labels) pair; returns (h, w, pixels scaled to [0, 1], labels).
fn read_pair(
    images: &Path,
    labels: &Path,
) -> Result<(usize, usize, Vec<f32>, Vec<u32>), DatasetError> {
    let (idims, pixels) = parse(images, &read_maybe_gz(images)?, 3)?;
    let (ldims, labs) = parse(labels, &read_maybe_gz(labels)?, 1)?;
    if idims[0] != ldims[0] {
        return Err(DatasetError::bad(
            labels,
            format!(
                "{} labels for {} images in {}",
                ldims[0],
                idims[0],
                images.display()
            ),
        ));
    }
    let x = pixels.iter().map(|&p| p as f32 / 255.0).collect();
    Ok((
        idims[1],
        idims[2],
        x,
        labs.into_iter().map(u32::from).collect(),
    ))
}

pub(crate) fn load(spec: &DatasetSpec) -> Result<Dataset, DatasetError> {
    let DatasetSpec::Idx {
        images,
        labels,
        test_images,
        test_labels,
        n_classes,
        test_fraction,
        split_seed,
    } = spec
    else {
        unreachable!("idx::load is only called with an Idx spec")
    };
    let (h, w, x, y) = read_pair(images, labels)?;
    let name = images
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "idx".into());
    let k = class_count(labels, &y, *n_classes)?;
    let samples = |x, y, k| Samples {
        name: name.clone(),
        n_features: h * w,
        n_classes: k,
        x,
        y,
        image_shape: Some((1, h, w)),
    };
    match (test_images, test_labels) {
        (Some(ti), Some(tl)) => {
            let (th, tw, tx, ty) = read_pair(ti, tl)?;
            if (th, tw) != (h, w) {
                return Err(DatasetError::bad(
                    ti,
                    format!("images are {th}×{tw}, the training images {h}×{w}"),
                ));
            }
            let tk = class_count(tl, &ty, *n_classes)?;
            let k = k.max(tk);
            if y.is_empty() || ty.is_empty() {
                let empty: &PathBuf = if y.is_empty() { images } else { ti };
                return Err(DatasetError::bad(empty, "no samples"));
            }
            let s = samples(x, y, k);
            Ok(Dataset {
                name: s.name,
                n_features: s.n_features,
                n_classes: k,
                train_x: s.x,
                train_y: s.y,
                test_x: tx,
                test_y: ty,
                image_shape: s.image_shape,
            })
        }
        _ => split(samples(x, y, k), *test_fraction, *split_seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(magic_ndim: u8, dims: &[u32], body: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 8, magic_ndim];
        for d in dims {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v.extend_from_slice(body);
        v
    }

    fn spec(dir: &Path, test: bool) -> DatasetSpec {
        DatasetSpec::Idx {
            images: dir.join("img"),
            labels: dir.join("lab"),
            test_images: test.then(|| dir.join("timg.gz")),
            test_labels: test.then(|| dir.join("tlab")),
            n_classes: None,
            test_fraction: 0.25,
            split_seed: 0,
        }
    }

    #[test]
    fn idx_round_trip_with_gzip_test_files() {
        let dir = tempfile::tempdir().unwrap();
        let pixels: Vec<u8> = (0..4 * 6).map(|i| (i * 10) as u8).collect();
        std::fs::write(dir.path().join("img"), idx(3, &[4, 2, 3], &pixels)).unwrap();
        std::fs::write(dir.path().join("lab"), idx(1, &[4], &[0, 1, 2, 1])).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &idx(3, &[1, 2, 3], &[255; 6])).unwrap();
        std::fs::write(dir.path().join("timg.gz"), gz.finish().unwrap()).unwrap();
        std::fs::write(dir.path().join("tlab"), idx(1, &[1], &[3])).unwrap();

        let d = crate::load(&spec(dir.path(), true)).unwrap();
        assert_eq!(
            (d.n_train(), d.n_test(), d.n_features, d.n_classes),
            (4, 1, 6, 4)
        );
        assert_eq!(d.image_shape, Some((1, 2, 3)));
        assert_eq!(d.train_x[7], 70.0 / 255.0);
        assert_eq!(d.test_x, vec![1.0; 6]);
        assert_eq!(d.train_y, vec![0, 1, 2, 1]);

        let split = crate::load(&spec(dir.path(), false)).unwrap();
        assert_eq!((split.n_train(), split.n_test()), (3, 1));
        assert_eq!(
            crate::file_digests(&spec(dir.path(), true)).unwrap().len(),
            4
        );
    }

    #[test]
    fn bad_idx_files_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let lab = dir.path().join("lab");
        std::fs::write(&lab, idx(1, &[2], &[0, 1])).unwrap();
        let msg = |d: &Path| crate::load(&spec(d, false)).unwrap_err().to_string();

        std::fs::write(&img, idx(1, &[2], &[0, 1])).unwrap(); // a labels file as images
        let e = msg(dir.path());
        assert!(
            e.contains("img") && e.contains("wrong magic number 0x00000801"),
            "{e}"
        );

        std::fs::write(&img, idx(3, &[2, 2, 2], &[0; 7])).unwrap();
        let e = msg(dir.path());
        assert!(e.contains("truncated") && e.contains("found 7"), "{e}");

        // Past the values a data set may hold: refused from the header, before any copy.
        std::fs::write(&img, idx(3, &[17, 8192, 8192], &[])).unwrap();
        let e = msg(dir.path());
        assert!(e.contains("1140850688 values, more than 268435456"), "{e}");

        std::fs::write(&img, idx(3, &[3, 1, 1], &[0; 3])).unwrap();
        let e = msg(dir.path());
        assert!(
            e.contains("lab") && e.contains("2 labels for 3 images"),
            "{e}"
        );

        std::fs::write(&img, idx(3, &[2, 1, 1], &[0; 2])).unwrap();
        std::fs::write(&lab, idx(1, &[2], &[0, 12])).unwrap();
        let mut s = spec(dir.path(), false);
        if let DatasetSpec::Idx { n_classes, .. } = &mut s {
            *n_classes = Some(10);
        }
        let e = crate::load(&s).unwrap_err().to_string();
        assert!(e.contains("label 12") && e.contains("out of range"), "{e}");

        let e = crate::load(&spec(&dir.path().join("missing"), false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
