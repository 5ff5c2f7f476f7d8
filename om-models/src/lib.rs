//! # om-models
//!
//! Ready-made models used by the `om` binary (`om train`, `om ocr`, `om bench`), the training
//! tests and the benchmarks (application and test code, not part of the library): the digits classifier
//! and the CRNN that reads digit strings with CTC, plus greedy CTC decoding and the edit
//! distance behind the character error rate; and the small decoder-only transformer of
//! `om train --task add` ([`transformer`]).

pub mod benchmarks;
pub mod transformer;

pub use transformer::{DecoderConfig, DecoderOnly};

use om_core::{Result, Tensor};
use om_ops::nn::{BatchNorm2d, Conv2d, Conv2dOptions, Forward, Linear, Lstm, Module};
use om_ops::{self as ops, RnnConfig};

/// Classes of the OCR model: the CTC blank (0) and the digits 0–9 (1–10).
pub const OCR_CLASSES: usize = 11;

/// The digits classifier of `om train`: conv 1→c1 3×3 pad 1, BN, ReLU, conv c1→c2 3×3
/// pad 1, BN, ReLU, max-pool 2, flatten, linear 16·c2 → 10. Its weights are drawn from
/// `seed` (the same model on every call and machine).
#[derive(Module)]
pub struct DigitNet {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    fc: Linear,
}

impl DigitNet {
    /// The `om train` model (`widths = [16, 32]`), or a narrower one.
    pub fn new(widths: [usize; 2], seed: u64) -> Result<DigitNet> {
        let [c1, c2] = widths;
        Ok(DigitNet {
            conv1: Conv2d::with_seed(1, c1, [3, 3], Conv2dOptions::default().padding(1), seed)?,
            bn1: BatchNorm2d::new(c1)?,
            conv2: Conv2d::with_seed(c1, c2, [3, 3], Conv2dOptions::default().padding(1), seed + 1)?,
            bn2: BatchNorm2d::new(c2)?,
            fc: Linear::with_seed(c2 * 4 * 4, 10, true, seed + 2)?,
        })
    }
}

impl Forward for DigitNet {
    /// `[B, 1, 8, 8]` → logits `[B, 10]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = ops::relu(&self.bn1.forward(&self.conv1.forward(x)?)?)?;
        let h = ops::relu(&self.bn2.forward(&self.conv2.forward(&h)?)?)?;
        let h = ops::max_pool2d(&h, 2)?;
        let b = h.shape()[0] as isize;
        self.fc.forward(&ops::reshape(&h, [b, -1])?)
    }
}

/// The OCR model of `om train --task ocr` (11 classes: blank 0, then digits 0–9):
/// conv 1→16 3×3 pad 1, BN, ReLU, max-pool 2×2, conv 16→32 3×3 pad 1, BN, ReLU, max-pool
/// 2×1 (height only), the 32 channels × 2 rows of each column as a 64-feature frame,
/// bidirectional LSTM 64 → 2×64, linear 128 → 11, log-softmax. Its weights are drawn
/// from `seed`.
#[derive(Module)]
pub struct Crnn {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    rnn: Lstm,
    fc: Linear,
}

impl Crnn {
    /// A freshly initialised model.
    pub fn new(seed: u64) -> Result<Crnn> {
        let config = RnnConfig { layers: 1, bidirectional: true, batch_first: true };
        Ok(Crnn {
            conv1: Conv2d::with_seed(1, 16, [3, 3], Conv2dOptions::default().padding(1), seed)?,
            bn1: BatchNorm2d::new(16)?,
            conv2: Conv2d::with_seed(16, 32, [3, 3], Conv2dOptions::default().padding(1), seed + 1)?,
            bn2: BatchNorm2d::new(32)?,
            rnn: Lstm::with_seed(64, 64, config, seed + 2)?,
            fc: Linear::with_seed(128, OCR_CLASSES, true, seed + 3)?,
        })
    }
}

impl Forward for Crnn {
    /// Images `[B, 1, 8, W]` → log-probabilities `[W/2, B, 11]` (time-major, as CTC wants).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = ops::relu(&self.bn1.forward(&self.conv1.forward(x)?)?)?;
        let h = ops::max_pool2d(&h, 2)?;
        let h = ops::relu(&self.bn2.forward(&self.conv2.forward(&h)?)?)?;
        let h = ops::max_pool2d(&h, [2, 1])?;
        // [B, C, H, T] → [B, T, C·H]
        let (b, t) = (h.shape()[0] as isize, h.shape()[3] as isize);
        let frames = ops::reshape(&ops::permute(&h, [0, 3, 1, 2])?, [b, t, -1])?;
        let y = self.rnn.forward(&frames, None, None)?.y;
        let logits = self.fc.forward(&y)?;
        ops::log_softmax(&ops::permute(&logits, [1, 0, 2])?, -1)
    }
}

/// Greedy CTC decoding of `log_probs` `[T, B, C]`: per sequence, the arg-max class of each
/// of its first `lengths[b]` frames, repeats collapsed, blanks (0) dropped, as digits.
pub fn greedy_decode(log_probs: &Tensor, lengths: &[usize]) -> Vec<Vec<i32>> {
    let (t, b, c) = (log_probs.shape()[0], log_probs.shape()[1], log_probs.shape()[2]);
    let lp = log_probs.to_vec();
    (0..b)
        .map(|s| {
            let mut out = Vec::new();
            let mut prev = 0;
            for f in 0..lengths[s].min(t) {
                let row = &lp[(f * b + s) * c..(f * b + s + 1) * c];
                let best = row.iter().enumerate().fold(0, |m, (i, &v)| if v > row[m] { i } else { m });
                if best != 0 && best != prev {
                    out.push(best as i32 - 1);
                }
                prev = best;
            }
            out
        })
        .collect()
}

/// Levenshtein distance between two label sequences.
pub fn edit_distance(a: &[i32], b: &[i32]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let next = (diag + usize::from(x != y)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_substitutions() {
        assert_eq!(edit_distance(&[1, 2, 3], &[1, 2, 3]), 0);
        assert_eq!(edit_distance(&[1, 2, 3], &[1, 3]), 1);
        assert_eq!(edit_distance(&[], &[4, 5]), 2);
        assert_eq!(edit_distance(&[1, 2, 3, 4], &[2, 1, 3, 5]), 3);
    }

    #[test]
    fn greedy_decoding_collapses_repeats_and_drops_blanks() {
        // frames (one sequence): 3 3 0 3 5 5 0 → digits 2 2 4
        let classes = [3usize, 3, 0, 3, 5, 5, 0];
        let mut lp = vec![-10.0f32; classes.len() * OCR_CLASSES];
        for (f, &c) in classes.iter().enumerate() {
            lp[f * OCR_CLASSES + c] = 0.0;
        }
        let lp = Tensor::from_vec(lp, &[classes.len(), 1, OCR_CLASSES]).unwrap();
        assert_eq!(greedy_decode(&lp, &[7]), vec![vec![2, 2, 4]]);
        assert_eq!(greedy_decode(&lp, &[4]), vec![vec![2, 2]]);
    }
}
