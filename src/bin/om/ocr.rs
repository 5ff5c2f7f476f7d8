//! `om train --task ocr`: a CRNN reads strings of 4–8 digits made by placing 8×8 digit
//! images side by side, trained with CTC. Training strings use only the training images
//! and held-out strings only the test images; both are generated from seeded generators.
//! Reports the character error rate of greedy CTC decoding on the held-out strings.

use crate::train::{plot, plot_path, progress_style, Digits, Options};
use indicatif::{ProgressBar, ProgressDrawTarget};
use onemodel::core::rng::Rng;
use onemodel::ops::nn::{self, prefixed, BatchNorm2d, Conv2d, Conv2dOptions, Linear, Lstm, Module};
use onemodel::ops::optim::{Adam, Optimizer};
use onemodel::ops::{Reduction, RnnConfig};
use onemodel::{no_grad, ops, Compute, Result, Tensor};
use std::time::Instant;

/// Default epochs of `--task ocr`.
pub const EPOCHS: usize = 4;
/// Default batch size of `--task ocr`.
pub const BATCH: usize = 32;
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
const CLASSES: usize = 11;
/// Training strings per epoch (fresh each epoch) and held-out strings.
const TRAIN_STRINGS: usize = 4000;
const TEST_STRINGS: usize = 1000;

/// conv 1→16 3×3 pad 1, BN, ReLU, max-pool 2×2, conv 16→32 3×3 pad 1, BN, ReLU, max-pool
/// 2×1 (height only), the 32 channels × 2 rows of each column as a 64-feature frame,
/// bidirectional LSTM 64 → 2×64, linear 128 → 11, log-softmax.
struct Crnn {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    rnn: Lstm,
    fc: Linear,
}

impl Crnn {
    fn new(seed: u64) -> Result<Crnn> {
        let config = RnnConfig { layers: 1, bidirectional: true, batch_first: true };
        Ok(Crnn {
            conv1: Conv2d::with_options(1, 16, [3, 3], Conv2dOptions::padding(1), seed)?,
            bn1: BatchNorm2d::new(16)?,
            conv2: Conv2d::with_options(16, 32, [3, 3], Conv2dOptions::padding(1), seed + 1)?,
            bn2: BatchNorm2d::new(32)?,
            rnn: Lstm::new(64, 64, config, seed + 2)?,
            fc: Linear::new(128, CLASSES, seed + 3)?,
        })
    }

    /// Images `[B, 1, 8, W]` → log-probabilities `[W/2, B, 11]` (time-major, as CTC wants).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = ops::relu(&self.bn1.forward(&self.conv1.forward(x)?)?)?;
        let h = ops::max_pool2d(&h, [2, 2], [2, 2], [0, 0], [1, 1])?;
        let h = ops::relu(&self.bn2.forward(&self.conv2.forward(&h)?)?)?;
        let h = ops::max_pool2d(&h, [2, 1], [2, 1], [0, 0], [1, 1])?;
        // [B, C, H, T] → [B, T, C·H]
        let (b, t) = (h.shape()[0] as isize, h.shape()[3] as isize);
        let frames = ops::reshape(&ops::permute(&h, vec![0, 3, 1, 2])?, vec![b, t, -1])?;
        let y = self.rnn.forward(&frames, None, None)?.y;
        let logits = self.fc.forward(&y)?;
        ops::log_softmax(&ops::permute(&logits, vec![1, 0, 2])?)
    }
}

impl Module for Crnn {
    fn parameters(&self) -> Vec<(String, Tensor)> {
        let mut p = prefixed("conv1", self.conv1.parameters());
        p.extend(prefixed("bn1", self.bn1.parameters()));
        p.extend(prefixed("conv2", self.conv2.parameters()));
        p.extend(prefixed("bn2", self.bn2.parameters()));
        p.extend(prefixed("rnn", self.rnn.parameters()));
        p.extend(prefixed("fc", self.fc.parameters()));
        p
    }

    fn buffers(&self) -> Vec<(String, Tensor)> {
        let mut b = prefixed("bn1", self.bn1.buffers());
        b.extend(prefixed("bn2", self.bn2.buffers()));
        b
    }

    fn set_training(&mut self, training: bool) {
        self.bn1.set_training(training);
        self.bn2.set_training(training);
    }
}

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

/// Greedy CTC decoding of `log_probs` `[T, B, C]`: per sequence, the arg-max class of each
/// of its first `lengths[b]` frames, repeats collapsed, blanks (0) dropped, as digits.
fn greedy_decode(log_probs: &Tensor, lengths: &[usize]) -> Vec<Vec<i32>> {
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
fn edit_distance(a: &[i32], b: &[i32]) -> usize {
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

/// Trains the CRNN and prints the figures.
pub fn run(o: &Options) -> Result<()> {
    Compute::set_threads(o.threads)?;
    Compute::set_mode(o.mode);
    let data = Digits::load()?;
    let mut model = Crnn::new(o.seed)?;
    let mut opt = Adam::new(model.parameter_tensors(), o.lr)?;
    let n_params: usize = model.parameters().iter().map(|(_, t)| t.numel()).sum();
    // held-out strings: test images only, from their own generator
    let test = strings(&data.test, TEST_STRINGS, &mut Rng::new(o.seed ^ 0x7e57));
    println!(
        "om train --task ocr: CRNN + CTC ({n_params} parameters), strings of {MIN_LEN}-{MAX_LEN} digits, {TRAIN_STRINGS} fresh training strings per epoch from {} train images, {TEST_STRINGS} held-out strings from {} test images, {} epochs, batch {}, Adam lr {}, mode {}, {} thread(s)",
        data.train.len(),
        data.test.len(),
        o.epochs,
        o.batch,
        o.lr,
        o.mode,
        o.threads
    );
    let style = progress_style()?;
    let mut rng = Rng::new(o.seed);
    let (mut losses, mut cers) = (Vec::new(), Vec::new());
    let mut last_loss = f32::NAN;
    let start = Instant::now();
    for epoch in 1..=o.epochs {
        opt.set_lr(o.lr * 0.5 * (1.0 + (std::f32::consts::PI * (epoch - 1) as f32 / o.epochs as f32).cos()));
        let train = strings(&data.train, TRAIN_STRINGS, &mut rng);
        let batches: Vec<&[Vec<usize>]> = train.chunks(o.batch).filter(|b| b.len() > 1).collect();
        let pb = ProgressBar::with_draw_target(Some(batches.len() as u64), ProgressDrawTarget::stderr()).with_style(style.clone());
        pb.set_prefix(epoch.to_string());
        let t0 = Instant::now();
        let (mut sum, mut seen) = (0.0f64, 0usize);
        for rows in &batches {
            let b = batch(&data, rows)?;
            let lp = model.forward(&b.x)?;
            let loss = ops::ctc_loss(&lp, &b.targets, &b.input_lengths, &b.target_lengths, 0, Reduction::Mean, false)?;
            opt.zero_grad()?;
            loss.backward()?;
            opt.step()?;
            last_loss = loss.item()?;
            sum += last_loss as f64 * rows.len() as f64;
            seen += rows.len();
            pb.inc(1);
            pb.set_message(format!("loss {:.4}  {:.0} strings/s", sum / seen as f64, seen as f64 / t0.elapsed().as_secs_f64()));
        }
        pb.finish_and_clear();
        let (cer, exact) = evaluate(&mut model, &data, &test)?;
        let epoch_loss = sum / seen as f64;
        losses.push(epoch_loss);
        cers.push(100.0 * cer);
        println!(
            "epoch {epoch:>3}  CTC loss {epoch_loss:.4}  held-out CER {:.2}%  strings read exactly {:.1}%  {:.0} strings/s",
            100.0 * cer,
            100.0 * exact,
            seen as f64 / t0.elapsed().as_secs_f64()
        );
    }
    let wall = start.elapsed().as_secs_f64();
    let (cer, exact) = evaluate(&mut model, &data, &test)?;
    let epoch_loss = losses.last().map_or(f32::NAN, |&l| l as f32);
    println!(
        "final CTC loss {epoch_loss:.6} (bits {:08x}, last epoch's mean), {last_loss:.6} (bits {:08x}, last batch)",
        epoch_loss.to_bits(),
        last_loss.to_bits()
    );
    println!(
        "held-out character error rate {:.2}% ({TEST_STRINGS} strings, greedy decoding), strings read exactly {:.1}%, wall time {wall:.2} s",
        100.0 * cer,
        100.0 * exact
    );
    let png = plot_path("train_ocr.png");
    let hi = cers.iter().copied().fold(0.0, f64::max).clamp(1.0, 100.0).ceil();
    match plot(&png, ("training loss (CTC)", &losses), ("held-out CER (%)", &cers, 0.0..hi)) {
        Ok(()) => println!("curve: {}", png.display()),
        Err(e) => eprintln!("om train: could not draw {}: {e}", png.display()),
    }
    if let Some(path) = &o.save {
        nn::save(&model, path)?;
        println!("weights: {}", path.display());
    }
    Ok(())
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
        let mut lp = vec![-10.0f32; classes.len() * CLASSES];
        for (f, &c) in classes.iter().enumerate() {
            lp[f * CLASSES + c] = 0.0;
        }
        let lp = Tensor::from_vec(lp, &[classes.len(), 1, CLASSES]).unwrap();
        assert_eq!(greedy_decode(&lp, &[7]), vec![vec![2, 2, 4]]);
        assert_eq!(greedy_decode(&lp, &[4]), vec![vec![2, 2]]);
    }
}
