//! `om train --task add`: a small decoder-only transformer ([`DecoderOnly`]) learns sums of
//! two 3-digit numbers written as characters. A sum is the 12-token string
//! `"123+456=9750"`: both operands zero-padded to 3 digits, then the 4 digits of the answer
//! least-significant first (`579` → `0579` → reversed `9750`; reversed answers let the model
//! produce each digit after the digits its carry depends on). The loss is the
//! cross-entropy of the 4 answer tokens given everything before them (teacher forcing).
//!
//! Data are generated from seeded generators, nothing is downloaded: 1000 held-out sums
//! from their own generator, and fresh training sums every epoch (drawn from the run's
//! generator into the loader's dataset, in order) that never include a held-out pair. Trained with AdamW, a linear warm-up then cosine decay of the learning
//! rate per step (`optim::SequentialLR` of `LinearLR` and `CosineAnnealingLR`) and gradient
//! clipping (`optim::clip_grad_norm`); after each epoch, the held-out exact-match accuracy
//! of greedy decoding (the prompt `"123+456="` alone, the 4 answer tokens generated one at
//! a time).

use super::{Batch, Defaults, Evaluation, Options, Task};
use om_models::{DecoderConfig, DecoderOnly};
use onemodel::core::rng::Rng;
use onemodel::data::{DataLoader, Dataset};
use onemodel::ops::nn::Module;
use onemodel::ops::optim::{Adam, AdamConfig, CosineAnnealingLR, LinearLR, LrScheduler, SequentialLR};
use onemodel::ops::{self, CrossEntropyOptions};
use onemodel::{Error, Result, Tensor};
use std::collections::HashSet;

/// Digits of each operand.
const DIGITS: usize = 3;
/// The largest operand plus one.
const RANGE: u32 = 10u32.pow(DIGITS as u32);
/// Tokens: the digits 0–9, then `+` and `=`.
const PLUS: i32 = 10;
const EQUALS: i32 = 11;
const VOCAB: usize = 12;
/// `"123+456="`: the prompt's length.
const PROMPT: usize = 2 * DIGITS + 2;
/// The answer's digits (one more than an operand's, for the carry).
const ANSWER: usize = DIGITS + 1;
/// The whole string; the model reads all but its last token.
const LEN: usize = PROMPT + ANSWER;
/// Fresh training sums per epoch, and held-out sums.
const TRAIN_SUMS: usize = 10_000;
const TEST_SUMS: usize = 1000;
/// The model's sizes.
const CONFIG: DecoderConfig = DecoderConfig { vocab: VOCAB, max_len: LEN - 1, dim: 64, heads: 4, layers: 2, ff: 256 };
/// The warm-up's share of the steps, and the factor of the first step's rate.
const WARMUP_FRACTION: f64 = 0.05;
const WARMUP_START: f64 = 0.01;
/// The largest joint gradient norm.
const MAX_GRAD_NORM: f32 = 1.0;

/// One sum `a + b`.
type Sum = (u32, u32);

/// The tokens of `a + b` as written: `a` and `b` in `DIGITS` digits each, `+`, `=`, then
/// the `ANSWER` digits of the sum least-significant first.
fn tokens((a, b): Sum) -> [i32; LEN] {
    let mut t = [0i32; LEN];
    for i in 0..DIGITS {
        let p = 10u32.pow((DIGITS - 1 - i) as u32);
        t[i] = ((a / p) % 10) as i32;
        t[DIGITS + 1 + i] = ((b / p) % 10) as i32;
    }
    t[DIGITS] = PLUS;
    t[2 * DIGITS + 1] = EQUALS;
    let mut s = a + b;
    for d in &mut t[PROMPT..] {
        *d = (s % 10) as i32;
        s /= 10;
    }
    t
}

/// `n` sums of operands drawn uniformly from `0..RANGE`, skipping those in `exclude`.
fn draw(n: usize, rng: &mut Rng, exclude: &HashSet<Sum>) -> Vec<Sum> {
    let mut sums = Vec::with_capacity(n);
    while sums.len() < n {
        let s = (rng.below(RANGE as usize) as u32, rng.below(RANGE as usize) as u32);
        if !exclude.contains(&s) {
            sums.push(s);
        }
    }
    sums
}

/// Linear warm-up then cosine decay to 0, per optimizer step: `LinearLR` from
/// `WARMUP_START` to 1 over the first `warm-up` steps (returned), then `CosineAnnealingLR`
/// over the rest, as PyTorch's `SequentialLR([LinearLR, CosineAnnealingLR],
/// milestones=[warm-up])` (whose rates `tests/optim_oracle.rs` checks bit for bit).
fn warmup_cosine(opt: &mut Adam, total_steps: usize) -> Result<(SequentialLR, usize)> {
    let steps = ((total_steps as f64 * WARMUP_FRACTION).round() as usize).clamp(1, total_steps.max(2) - 1);
    let warmup: Box<dyn LrScheduler> = Box::new(LinearLR::new(opt, WARMUP_START, 1.0, steps)?);
    let cosine = Box::new(CosineAnnealingLR::new(opt, total_steps.saturating_sub(steps).max(1), 0.0)?);
    Ok((SequentialLR::new(opt, vec![warmup, cosine], &[steps])?, steps))
}

/// Sums as examples: the model's input, the first `LEN - 1` tokens (`i32` `[LEN - 1]`), and
/// its targets, position `i` predicting token `i + 1` with only the answer's tokens counted
/// (`-100`, ignored, before them); collated, `[B, LEN - 1]` each.
pub(crate) struct Sums(Vec<Sum>);

impl Dataset for Sums {
    type Item = (Tensor, Tensor);

    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, i: usize) -> Result<(Tensor, Tensor)> {
        let &s = self.0.get(i).ok_or_else(|| Error::argument("add sums", format!("no sum {i}")))?;
        let t = tokens(s);
        let targets = (1..LEN).map(|i| if i >= PROMPT { t[i] } else { -100 }).collect();
        Ok((Tensor::from_vec_i32(t[..LEN - 1].to_vec(), &[LEN - 1])?, Tensor::from_vec_i32(targets, &[LEN - 1])?))
    }
}

/// `om train --task add`: the transformer, the held-out sums and the share of answer
/// digits the last evaluation got right.
pub(crate) struct AddTask {
    model: DecoderOnly,
    test: Vec<Sum>,
    held_out: HashSet<Sum>,
    digits: f64,
}

impl AddTask {
    /// The fraction of held-out sums whose greedy answer is exact, and of answer digits.
    fn evaluate_sums(&self) -> Result<(f64, f64)> {
        let (mut exact, mut digits) = (0usize, 0usize);
        for chunk in self.test.chunks(500) {
            let strings: Vec<[i32; LEN]> = chunk.iter().map(|&s| tokens(s)).collect();
            let prompts: Vec<Vec<i32>> = strings.iter().map(|t| t[..PROMPT].to_vec()).collect();
            for (t, answer) in strings.iter().zip(self.model.generate(&prompts, ANSWER)?) {
                let right = t[PROMPT..].iter().zip(&answer).filter(|(a, b)| a == b).count();
                digits += right;
                exact += usize::from(right == ANSWER);
            }
        }
        let n = self.test.len() as f64;
        Ok((exact as f64 / n, digits as f64 / (n * ANSWER as f64)))
    }
}

impl Task for AddTask {
    type Data = Sums;
    const NAME: &'static str = "add";
    const DEFAULTS: Defaults = Defaults { epochs: 6, lr: 0.003, plot: "train_add.png", weights: "add.safetensors" };
    const UNIT: &'static str = "sums";
    const LOSS: &'static str = "loss";
    const CURVE_TITLES: (&'static str, &'static str) = ("training loss (cross-entropy of the answer digits)", "held-out exact match (%)");

    fn new(o: &Options) -> Result<AddTask> {
        let test = draw(TEST_SUMS, &mut Rng::new(o.seed ^ 0xadd_7e57), &HashSet::new());
        let held_out = test.iter().copied().collect();
        Ok(AddTask { model: DecoderOnly::new(CONFIG, o.seed)?, test, held_out, digits: 0.0 })
    }

    fn describe(&self) -> String {
        let n_params: usize = self.model.parameters().iter().map(|(_, t)| t.numel()).sum();
        let c = CONFIG;
        format!(
            "om train --task add: decoder-only transformer ({n_params} parameters, {} pre-norm layers, width {}, {} heads), \
             {DIGITS}-digit sums with reversed answers (\"123+456=9750\"), {TRAIN_SUMS} fresh training sums per epoch, \
             {TEST_SUMS} held-out sums",
            c.layers, c.dim, c.heads
        )
    }

    fn model(&self) -> &dyn Module {
        &self.model
    }

    fn optimizer(&self, lr: f32) -> Result<(Adam, String)> {
        let opt = AdamConfig::adamw().lr(lr).build(self.parameters())?;
        let words = format!(
            "AdamW lr {lr} (weight decay {}, {:.0}% linear warm-up then cosine, per step), gradient norm clipped to {MAX_GRAD_NORM}",
            opt.config().weight_decay,
            100.0 * WARMUP_FRACTION
        );
        Ok((opt, words))
    }

    fn scheduler(&self, opt: &mut Adam, total_steps: usize) -> Result<Option<Box<dyn LrScheduler>>> {
        Ok(Some(Box::new(warmup_cosine(opt, total_steps)?.0)))
    }

    fn max_grad_norm(&self) -> Option<f32> {
        Some(MAX_GRAD_NORM)
    }

    /// The epoch's sums in order (no shuffle: they are fresh every epoch).
    fn loader(&self, o: &Options) -> Result<DataLoader<Sums>> {
        DataLoader::new(Sums(vec![(0, 0); TRAIN_SUMS]), o.batch)
    }

    /// Fresh training sums (never a held-out one), drawn from the run's generator.
    fn next_epoch(&mut self, loader: &mut DataLoader<Sums>, rng: &mut Rng) -> Result<()> {
        loader.set_dataset(Sums(draw(TRAIN_SUMS, rng, &self.held_out)))
    }

    fn loss(&mut self, (ids, targets): Batch<Self>) -> Result<Tensor> {
        let n = ids.numel() as isize;
        let logits = self.model.forward(&ids)?;
        let logits = ops::reshape(&logits, [n, VOCAB as isize])?;
        ops::cross_entropy(&logits, &ops::reshape(&targets, [n])?, None, CrossEntropyOptions::default())
    }

    /// Greedy decoding of every held-out sum: the exact-match and digit accuracies.
    fn evaluate(&mut self) -> Result<Evaluation> {
        self.model.set_training(false);
        let result = self.evaluate_sums();
        self.model.set_training(true);
        let (exact, digits) = result?;
        self.digits = digits;
        Ok(Evaluation {
            metric: 100.0 * exact,
            line: format!("held-out exact match {:.1}%  answer digits {:.2}%", 100.0 * exact, 100.0 * digits),
        })
    }

    fn metric_range(&self, accuracies: &[f64]) -> std::ops::Range<f64> {
        accuracies.iter().copied().fold(100.0, f64::min).min(90.0).floor().max(0.0)..100.0
    }

    fn summary(&self, last: &Evaluation, wall: f64) -> String {
        format!(
            "held-out exact match {:.1}% ({TEST_SUMS} sums of two {DIGITS}-digit numbers, greedy decoding), answer digits {:.2}%, wall time {wall:.2} s",
            last.metric,
            100.0 * self.digits
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_are_written_with_reversed_answers() {
        // "123+456=" then 579 → 0579 reversed
        assert_eq!(tokens((123, 456)), [1, 2, 3, PLUS, 4, 5, 6, EQUALS, 9, 7, 5, 0]);
        // "999+001=" then 1000 reversed
        assert_eq!(tokens((999, 1)), [9, 9, 9, PLUS, 0, 0, 1, EQUALS, 0, 0, 0, 1]);
    }

    #[test]
    fn the_rate_warms_up_linearly_then_follows_a_cosine_to_zero() -> Result<()> {
        use onemodel::ops::optim::Optimizer;
        let mut opt = Adam::adamw(vec![Tensor::ones(&[1])?.requires_grad()?], 0.5)?;
        let total = 100;
        let (mut s, steps) = warmup_cosine(&mut opt, total)?;
        assert_eq!(steps, 5);
        let mut rates = vec![opt.lr() as f64];
        for _ in 0..total {
            s.step(&mut opt)?;
            rates.push(s.lr());
            assert_eq!(opt.lr(), s.lr() as f32);
        }
        let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
        // 0.5 · (0.01 + 0.99 · e/5) for e ≤ 5, then 0.5 · (1 + cos(π (e − 5)/95)) / 2
        for (e, &r) in rates.iter().enumerate() {
            let want = if e <= 5 {
                0.5 * (WARMUP_START + (1.0 - WARMUP_START) * e as f64 / 5.0)
            } else {
                0.25 * (1.0 + (std::f64::consts::PI * (e - 5) as f64 / 95.0).cos())
            };
            assert!(near(r, want), "step {e}: {r} vs {want}");
        }
        Ok(())
    }

    /// The rate after every step of a run of `total` steps resumed after `done` of them
    /// (the optimizer then holding another rate, as one loaded from a checkpoint does).
    fn rates_resumed_after(task: &AddTask, total: usize, done: usize) -> Result<Vec<u32>> {
        use crate::train::schedule;
        use onemodel::ops::optim::Optimizer;
        let (mut opt, _) = task.optimizer(AddTask::DEFAULTS.lr)?;
        if done > 0 {
            opt.set_lr(0.123);
        }
        let mut s = schedule(task, &mut opt, AddTask::DEFAULTS.lr, total, done)?.expect("a per-step schedule");
        let mut rates = vec![opt.lr().to_bits()];
        for _ in done..total {
            s.step(&mut opt)?;
            rates.push(opt.lr().to_bits());
        }
        Ok(rates)
    }

    #[test]
    fn a_resumed_schedule_continues_with_the_same_rates() -> Result<()> {
        let o = Options {
            epochs: 2,
            seed: 7,
            threads: 1,
            mode: onemodel::Mode::Exact,
            batch: 32,
            lr: AddTask::DEFAULTS.lr,
            shards: 1,
            plot: std::path::PathBuf::new(),
            save: None,
            checkpoint: None,
            resume: None,
            stop_after: None,
        };
        let task = AddTask::new(&o)?;
        let total = 2 * TRAIN_SUMS.div_ceil(32);
        let whole = rates_resumed_after(&task, total, 0)?;
        for done in [1, 17, total / 2, total - 1] {
            assert_eq!(rates_resumed_after(&task, total, done)?, whole[done..], "resumed after step {done}");
        }
        Ok(())
    }

    #[test]
    fn training_sums_avoid_the_held_out_ones() {
        let test = draw(1000, &mut Rng::new(1), &HashSet::new());
        let held: HashSet<Sum> = test.iter().copied().collect();
        let train = draw(50_000, &mut Rng::new(2), &held);
        assert!(train.iter().all(|s| !held.contains(s)));
        assert!(train.iter().all(|&(a, b)| a < RANGE && b < RANGE));
    }
}
