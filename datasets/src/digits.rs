//! The shipped UCI optical digits (see `data/README.md` for source and licence).

use std::io::Read;

use crate::split::{split, Samples};
use crate::{Dataset, DatasetError};

/// The gzip-compressed CSV, compiled into the binary so that loading needs no file and no network.
pub(crate) const DIGITS_GZ: &[u8] = include_bytes!("../data/digits.csv.gz");

/// The name errors and digests give the shipped file.
pub(crate) const SHIPPED_PATH: &str = "<shipped>/digits.csv.gz";

const N_PIXELS: usize = 64;

/// Parses the shipped CSV: 64 pixel values in 0..=16 then a label in 0..=9 per line.
fn parse(text: &str) -> Result<Samples, DatasetError> {
    let mut x = Vec::new();
    let mut y = Vec::new();
    for (line_no, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad =
            |what: String| DatasetError::bad(SHIPPED_PATH, format!("line {}: {what}", line_no + 1));
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != N_PIXELS + 1 {
            return Err(bad(format!(
                "{} fields, expected {}",
                fields.len(),
                N_PIXELS + 1
            )));
        }
        for f in &fields[..N_PIXELS] {
            let v: f32 = f
                .trim()
                .parse()
                .map_err(|_| bad(format!("pixel {f:?} is not a number")))?;
            if !(0.0..=16.0).contains(&v) {
                return Err(bad(format!("pixel {v} outside 0..=16")));
            }
            x.push(v / 16.0);
        }
        let label: u32 = fields[N_PIXELS]
            .trim()
            .parse()
            .map_err(|_| bad(format!("label {:?} is not an integer", fields[N_PIXELS])))?;
        if label > 9 {
            return Err(bad(format!("label {label} out of range 0..=9")));
        }
        y.push(label);
    }
    Ok(Samples {
        name: "digits".into(),
        n_features: N_PIXELS,
        n_classes: 10,
        x,
        y,
        image_shape: Some((1, 8, 8)),
    })
}

/// Loads and splits the shipped digits.
pub(crate) fn load(test_fraction: f64, split_seed: u64) -> Result<Dataset, DatasetError> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(DIGITS_GZ)
        .read_to_string(&mut text)
        .map_err(|source| DatasetError::Io {
            path: SHIPPED_PATH.into(),
            source,
        })?;
    split(parse(&text)?, test_fraction, split_seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_digits_have_the_documented_shape() {
        let d = load(0.2, 0).unwrap();
        assert_eq!(d.n_train() + d.n_test(), 1797);
        assert_eq!(d.n_test(), 359); // round(1797 * 0.2)
        assert_eq!(d.train_x.len(), d.n_train() * 64);
        assert!(d
            .train_x
            .iter()
            .chain(&d.test_x)
            .all(|v| (0.0..=1.0).contains(v)));
        // Every class is present in both parts.
        for c in 0..10 {
            assert!(d.train_y.contains(&c) && d.test_y.contains(&c));
        }
        // The first shipped row (a zero) lands somewhere with its exact pixels.
        let first: Vec<f32> = [0., 0., 5., 13., 9., 1., 0., 0.]
            .iter()
            .map(|v| v / 16.0)
            .collect();
        let found = d
            .train_x
            .chunks_exact(64)
            .chain(d.test_x.chunks_exact(64))
            .any(|row| row[..8] == first[..]);
        assert!(found);
    }

    #[test]
    fn bad_digit_lines_name_the_line() {
        let err = parse("1,2\n").err().unwrap().to_string();
        assert!(err.contains("line 1") && err.contains("2 fields"), "{err}");
        let row = format!("{}11", "0,".repeat(64));
        let err = parse(&row).err().unwrap().to_string();
        assert!(err.contains("label 11 out of range"), "{err}");
    }
}
