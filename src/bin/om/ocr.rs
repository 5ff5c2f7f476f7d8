//! `om train --task ocr`: a CRNN reads strings of 4–8 digits made by placing 8×8 digit
//! images side by side, trained with CTC. Training strings use only the training images
//! and held-out strings only the test images; both are generated from seeded generators.
//! Reports the character error rate of greedy CTC decoding on the held-out strings.

use crate::train::{Digits, Evaluation, Options, Task};
use om_models::{edit_distance, greedy_decode, Crnn};
use onemodel::core::rng::Rng;
use onemodel::ops::nn::{Forward, Module};
use onemodel::ops::Reduction;
use onemodel::{no_grad, ops, Result, Tensor};

/// Default epochs of `--task ocr`.
pub const EPOCHS: usize = 4;
/// Default learning rate of `--task ocr`.
pub const LR: f32 = 0.005;

/// Shortest and longest string.
const MIN_LEN: usize = 4;
const MAX_LEN: usize = 8;
/// Every image is padded (with zeros on the right) to the width of the longest string.
const WIDTH: usize = 8 * MAX_LEN;
/// Frames per digit after the network's width pooling (8 columns → 4 frames).
const FRAMES_PER_DIGIT: usize = 4;
/// Classes: the CTC blank (0) and the digits 0–9 as 1–10.
/// Training strings per epoch (fresh each epoch) and held-out strings.
const TRAIN_STRINGS: usize = 4000;
const TEST_STRINGS: usize = 1000;

/// `n` strings of `MIN_LEN..=MAX_LEN` image rows drawn (with replacement) from `pool`.
fn strings(pool: &[usize], n: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
    (0..n)
        .map(|_| {
            let len = MIN_LEN + rng.below(MAX_LEN - MIN_LEN + 1);
            (0..len).map(|_| pool[rng.below(pool.len())]).collect()
        })
        .collect()
}

/// A batch: images `[B, 1, 8, WIDTH]`, padded targets `[B, MAX_LEN]` (digit + 1), target
/// lengths and input lengths (the frames covering each string's digits).
struct Batch {
    x: Tensor,
    targets: Tensor,
    target_lengths: Vec<usize>,
    input_lengths: Vec<usize>,
}

fn batch(data: &Digits, rows: &[Vec<usize>]) -> Result<Batch> {
    let mut x = vec![0.0f32; rows.len() * 8 * WIDTH];
    let mut targets = vec![0i32; rows.len() * MAX_LEN];
    for (b, s) in rows.iter().enumerate() {
        for (j, &r) in s.iter().enumerate() {
            for y in 0..8 {
                let dst = b * 8 * WIDTH + y * WIDTH + 8 * j;
                x[dst..dst + 8].copy_from_slice(&data.pixels[r * 64 + y * 8..r * 64 + y * 8 + 8]);
            }
            targets[b * MAX_LEN + j] = data.labels[r] + 1;
        }
    }
    Ok(Batch {
        x: Tensor::from_vec(x, &[rows.len(), 1, 8, WIDTH])?,
        targets: Tensor::from_vec_i32(targets, &[rows.len(), MAX_LEN])?,
        target_lengths: rows.iter().map(Vec::len).collect(),
        input_lengths: rows.iter().map(|s| FRAMES_PER_DIGIT * s.len()).collect(),
    })
}

/// Character error rate on `strings` (total edit distance / total reference length) and
/// the fraction of strings read exactly, in evaluation mode without gradients.
fn evaluate(model: &mut Crnn, data: &Digits, strings: &[Vec<usize>]) -> Result<(f64, f64)> {
    model.set_training(false);
    let (mut errors, mut chars, mut exact) = (0usize, 0usize, 0usize);
    for rows in strings.chunks(250) {
        let b = batch(data, rows)?;
        let lp = no_grad(|| model.forward(&b.x))?;
        for (s, hyp) in rows.iter().zip(greedy_decode(&lp, &b.input_lengths)) {
            let reference: Vec<i32> = s.iter().map(|&r| data.labels[r]).collect();
            let d = edit_distance(&hyp, &reference);
            errors += d;
            chars += reference.len();
            exact += usize::from(d == 0);
        }
    }
    model.set_training(true);
    Ok((errors as f64 / chars as f64, exact as f64 / strings.len() as f64))
}

/// `om train --task ocr`: the CRNN, the digit images, the held-out strings and the
/// fraction of them the last evaluation read exactly.
pub(crate) struct OcrTask {
    data: Digits,
    model: Crnn,
    test: Vec<Vec<usize>>,
    exact: f64,
}

impl OcrTask {
    pub(crate) fn new(o: &Options) -> Result<OcrTask> {
        let data = Digits::load()?;
        let model = Crnn::new(o.seed)?;
        // held-out strings: test images only, from their own generator
        let test = strings(&data.test, TEST_STRINGS, &mut Rng::new(o.seed ^ 0x7e57));
        Ok(OcrTask { data, model, test, exact: 0.0 })
    }
}

impl Task for OcrTask {
    type Example = Vec<usize>;
    const UNIT: &'static str = "strings";
    const LOSS: &'static str = "CTC loss";
    const CURVE_TITLES: (&'static str, &'static str) = ("training loss (CTC)", "held-out CER (%)");

    fn describe(&self) -> String {
        let n_params: usize = self.model.parameters().iter().map(|(_, t)| t.numel()).sum();
        format!(
            "om train --task ocr: CRNN + CTC ({n_params} parameters), strings of {MIN_LEN}-{MAX_LEN} digits, {TRAIN_STRINGS} fresh training strings per epoch from {} train images, {TEST_STRINGS} held-out strings from {} test images",
            self.data.train.len(),
            self.data.test.len()
        )
    }

    fn model(&self) -> &dyn Module {
        &self.model
    }

    fn examples(&mut self, rng: &mut Rng) -> Vec<Vec<usize>> {
        strings(&self.data.train, TRAIN_STRINGS, rng)
    }

    fn loss(&mut self, rows: &[Vec<usize>]) -> Result<Tensor> {
        let b = batch(&self.data, rows)?;
        let lp = self.model.forward(&b.x)?;
        ops::ctc_loss(&lp, &b.targets, &b.input_lengths, &b.target_lengths, 0, Reduction::Mean, false)
    }

    /// The character error rate and the strings read exactly, on the held-out strings.
    fn evaluate(&mut self) -> Result<Evaluation> {
        let (cer, exact) = evaluate(&mut self.model, &self.data, &self.test)?;
        self.exact = exact;
        Ok(Evaluation {
            metric: 100.0 * cer,
            line: format!("held-out CER {:.2}%  strings read exactly {:.1}%", 100.0 * cer, 100.0 * exact),
        })
    }

    fn metric_range(&self, cers: &[f64]) -> std::ops::Range<f64> {
        0.0..cers.iter().copied().fold(0.0, f64::max).clamp(1.0, 100.0).ceil()
    }

    fn summary(&self, last: &Evaluation, wall: f64) -> String {
        format!(
            "held-out character error rate {:.2}% ({TEST_STRINGS} strings, greedy decoding), strings read exactly {:.1}%, wall time {wall:.2} s",
            last.metric,
            100.0 * self.exact
        )
    }
}
