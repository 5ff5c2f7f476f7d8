//! `om train --task ocr`: a CRNN reads strings of 4–8 digits made by placing 8×8 digit
//! images side by side, trained with CTC. Training strings use only the training images
//! and held-out strings only the test images; both are generated from seeded generators.
//! Reports the character error rate of greedy CTC decoding on the held-out strings.

use super::images::Digits;
use super::{Batch, Defaults, Evaluation, Options, Task};
use om_models::{edit_distance, greedy_decode, Crnn};
use onemodel::core::rng::Rng;
use onemodel::data::{DataLoader, Dataset};
use onemodel::ops::nn::{Forward, Module};
use onemodel::ops::Reduction;
use onemodel::{no_grad, ops, Error, Result, Tensor};
use std::sync::Arc;

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

/// Strings of digit images as examples: image `[1, 8, WIDTH]` (zero-padded on the right),
/// targets `[MAX_LEN]` (`i32`, digit + 1, zero-padded) and the string's length (`i32`
/// scalar); collated, `[B, 1, 8, WIDTH]`, `[B, MAX_LEN]` and `[B]`.
pub(crate) struct Strings {
    data: Arc<Digits>,
    strings: Vec<Vec<usize>>,
}

impl Dataset for Strings {
    type Item = Vec<Tensor>;

    fn len(&self) -> usize {
        self.strings.len()
    }

    fn get(&self, i: usize) -> Result<Vec<Tensor>> {
        let s = self.strings.get(i).ok_or_else(|| Error::argument("ocr strings", format!("no string {i}")))?;
        let mut x = vec![0.0f32; 8 * WIDTH];
        let mut targets = vec![0i32; MAX_LEN];
        for (j, &r) in s.iter().enumerate() {
            for y in 0..8 {
                let dst = y * WIDTH + 8 * j;
                x[dst..dst + 8].copy_from_slice(&self.data.pixels[r * 64 + y * 8..r * 64 + y * 8 + 8]);
            }
            targets[j] = self.data.labels[r] + 1;
        }
        Ok(vec![
            Tensor::from_vec(x, &[1, 8, WIDTH])?,
            Tensor::from_vec_i32(targets, &[MAX_LEN])?,
            Tensor::from_vec_i32(vec![s.len() as i32], &[])?,
        ])
    }
}

/// A collated batch's images, targets, target lengths and input lengths (the frames
/// covering each string's digits).
fn unpack(batch: &[Tensor]) -> (&Tensor, &Tensor, Vec<usize>, Vec<usize>) {
    let lengths: Vec<usize> = batch[2].to_vec_i32().into_iter().map(|n| n as usize).collect();
    let input_lengths = lengths.iter().map(|n| FRAMES_PER_DIGIT * n).collect();
    (&batch[0], &batch[1], lengths, input_lengths)
}

/// Character error rate on the loader's strings (total edit distance / total reference
/// length) and the fraction of strings read exactly, in evaluation mode without gradients.
fn evaluate(model: &mut Crnn, strings: &mut DataLoader<Strings>) -> Result<(f64, f64)> {
    model.set_training(false);
    let (mut errors, mut chars, mut exact) = (0usize, 0usize, 0usize);
    let mut outcome = Ok(());
    for b in strings.epoch() {
        let read = b.and_then(|b| {
            let (x, targets, lengths, input_lengths) = unpack(&b);
            let lp = no_grad(|| model.forward(x))?;
            let targets = targets.to_vec_i32();
            Ok(greedy_decode(&lp, &input_lengths)
                .into_iter()
                .enumerate()
                .map(|(i, hyp)| {
                    let reference: Vec<i32> = targets[i * MAX_LEN..i * MAX_LEN + lengths[i]].iter().map(|t| t - 1).collect();
                    (edit_distance(&hyp, &reference), reference.len())
                })
                .collect::<Vec<_>>())
        });
        match read {
            Ok(rows) => {
                for (d, n) in rows {
                    errors += d;
                    chars += n;
                    exact += usize::from(d == 0);
                }
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    model.set_training(true);
    outcome?;
    let n = strings.dataset().len();
    Ok((errors as f64 / chars as f64, exact as f64 / n as f64))
}

/// `om train --task ocr`: the CRNN, the digit images, the held-out strings and the
/// fraction of them the last evaluation read exactly.
pub(crate) struct OcrTask {
    data: Arc<Digits>,
    model: Crnn,
    test: DataLoader<Strings>,
    exact: f64,
}

impl Task for OcrTask {
    type Data = Strings;
    const NAME: &'static str = "ocr";
    const DEFAULTS: Defaults = Defaults { epochs: 4, lr: 0.005, plot: "train_ocr.png", weights: "ocr.safetensors" };
    const UNIT: &'static str = "strings";
    const LOSS: &'static str = "CTC loss";
    const CURVE_TITLES: (&'static str, &'static str) = ("training loss (CTC)", "held-out CER (%)");

    fn new(o: &Options) -> Result<OcrTask> {
        let data = Arc::new(Digits::load()?);
        let model = Crnn::new(o.seed)?;
        // held-out strings: test images only, from their own generator
        let strings = strings(&data.test, TEST_STRINGS, &mut Rng::new(o.seed ^ 0x7e57));
        let test = DataLoader::new(Strings { data: data.clone(), strings }, 250)?;
        Ok(OcrTask { data, model, test, exact: 0.0 })
    }

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

    /// The epoch's strings in order (no shuffle: they are fresh every epoch).
    fn loader(&self, o: &Options) -> Result<DataLoader<Strings>> {
        let empty = vec![Vec::new(); TRAIN_STRINGS];
        DataLoader::new(Strings { data: self.data.clone(), strings: empty }, o.batch)
    }

    /// Fresh training strings (training images only), drawn from the run's generator.
    fn next_epoch(&mut self, loader: &mut DataLoader<Strings>, rng: &mut Rng) -> Result<()> {
        loader.set_dataset(Strings { data: self.data.clone(), strings: strings(&self.data.train, TRAIN_STRINGS, rng) })
    }

    fn loss(&mut self, batch: Batch<Self>) -> Result<Tensor> {
        let (x, targets, target_lengths, input_lengths) = unpack(&batch);
        let lp = self.model.forward(x)?;
        ops::ctc_loss(&lp, targets, &input_lengths, &target_lengths, 0, Reduction::Mean, false)
    }

    /// The character error rate and the strings read exactly, on the held-out strings.
    fn evaluate(&mut self) -> Result<Evaluation> {
        let (cer, exact) = evaluate(&mut self.model, &mut self.test)?;
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
