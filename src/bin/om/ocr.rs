//! `om train --task ocr`: a CRNN reads strings of 4–8 digits made by placing 8×8 digit
//! images side by side, trained with CTC. Training strings use only the training images
//! and held-out strings only the test images; both are generated from seeded generators.
//! Reports the character error rate of greedy CTC decoding on the held-out strings.

use crate::train::{plot, plot_path, progress_style, Digits, Options};
use indicatif::{ProgressBar, ProgressDrawTarget};
use onemodel::core::{rng::Rng, ActivationScope};
use onemodel::ops::models::{edit_distance, greedy_decode, Crnn};
use onemodel::ops::nn::{self, Module};
use onemodel::ops::optim::{Adam, Optimizer};
use onemodel::ops::Reduction;
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
            let _step = ActivationScope::new();
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
