//! The UCI optical digits both tasks of `om train` learn from (8×8 images of 0–9, pixel
//! values 0–16; `testdata/digits.safetensors`, embedded in the binary), with the file's
//! train/test split.

use onemodel::core::io;
use onemodel::{Error, Result, Tensor};

const DIGITS: &[u8] = include_bytes!("../../../../testdata/digits.safetensors");

/// The digits as pixels scaled to [0, 1] (64 per image), labels, and the split.
pub(crate) struct Digits {
    pub(crate) pixels: Vec<f32>,
    pub(crate) labels: Vec<i32>,
    pub(crate) train: Vec<usize>,
    pub(crate) test: Vec<usize>,
}

impl Digits {
    /// The digits embedded from `testdata/digits.safetensors`.
    pub(crate) fn load() -> Result<Digits> {
        const FILE: &str = "testdata/digits.safetensors (embedded)";
        let named = |e: Error| Error::argument("digits", format!("{FILE}: {e}"));
        let t = io::from_bytes(DIGITS).map_err(named)?;
        let get = |n: &str| t.get(n).ok_or_else(|| Error::argument("digits", format!("{FILE} has no `{n}`")));
        let idx = |n: &str| -> Result<Vec<usize>> { Ok(get(n)?.to_vec_i32().into_iter().map(|i| i as usize).collect()) };
        let pixels = get("images")?.to_vec_i32().into_iter().map(|p| p as f32 / 16.0).collect();
        Ok(Digits { pixels, labels: get("labels")?.to_vec_i32(), train: idx("train_idx")?, test: idx("test_idx")? })
    }

    /// Images `[B, 1, 8, 8]` and labels `[B]` (`i32`) of the given rows, in their order.
    pub(crate) fn tensors(&self, rows: &[usize]) -> Result<(Tensor, Tensor)> {
        let x: Vec<f32> = rows.iter().flat_map(|&r| self.pixels[r * 64..(r + 1) * 64].iter().copied()).collect();
        let y: Vec<i32> = rows.iter().map(|&r| self.labels[r]).collect();
        Ok((Tensor::from_vec(x, &[rows.len(), 1, 8, 8])?, Tensor::from_vec_i32(y, &[rows.len()])?))
    }
}
