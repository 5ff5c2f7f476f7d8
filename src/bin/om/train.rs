//! `om train`: its options (checked before any work starts), the training loop every task
//! shares (Adam with a cosine-decayed learning rate, seeded mini-batches, a progress bar,
//! one line per epoch, the final figures, the curves and the weights file), and the
//! default task: a small conv net learning the UCI optical digits (8×8 images, 10 classes;
//! `testdata/digits.safetensors`, embedded in the binary). `--task ocr` is in [`crate::ocr`],
//! `--task add` (a decoder-only transformer learning sums) in [`crate::add`]; a task may
//! bring its own optimizer, per-step learning-rate schedule and gradient clipping
//! ([`Task::optimizer`], [`Task::scheduler`], [`Task::max_grad_norm`]).
//!
//! Every step goes through [`DataParallel`]: `--shards S` cuts each mini-batch into `S`
//! shards whose gradients are summed in shard order (with `S = 1`, the default, the step is
//! the plain one bit for bit), on one process or (`--dist mpi`, feature `mpi`) over the
//! processes of `mpirun`, where rank 0 alone prints, plots and saves.

use crate::args::{at_least, check_writable, parse_count, remove_created, threads_parser, Failure, ModeArg, Outcome};
use crate::plot::{self, Curves};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use om_models::DigitNet;
use onemodel::core::{io, rng::Rng, ActivationScope};
use onemodel::dist::{Communicator, DataParallel};
use onemodel::ops::nn::{self, Forward, Module};
use onemodel::ops::optim::{clip_grad_norm, Adam, LrScheduler, Optimizer};
use onemodel::{no_grad, ops, Compute, Error, Mode, Result, Tensor};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

const DIGITS: &[u8] = include_bytes!("../../../testdata/digits.safetensors");

/// What `om train` trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TaskName {
    /// A conv net classifying the 8×8 digits
    Digits,
    /// A CRNN with CTC reading strings of 4-8 digits
    Ocr,
    /// A decoder-only transformer learning 3-digit sums written as characters
    Add,
}

/// Options of `om train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// What to train
    #[arg(long, value_enum, default_value_t = TaskName::Digits)]
    task: TaskName,
    /// Passes over the training data, at least 1 [default: 12 for digits, 4 for ocr, 6 for add]
    #[arg(long, value_parser = parse_count)]
    epochs: Option<usize>,
    /// Seed of the initial weights and of the batches' order
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Kernel threads, 1 to 256 [default: the cores available]
    #[arg(long, value_parser = threads_parser())]
    threads: Option<usize>,
    /// Arithmetic mode (exact: the same bits at every thread count)
    #[arg(long, value_enum, default_value_t = ModeArg::Fast)]
    mode: ModeArg,
    /// Examples per mini-batch, at least 2
    #[arg(long, default_value_t = 32, value_parser = |v: &str| at_least(v, 2))]
    batch: usize,
    /// The optimizer's initial (peak) learning rate, above 0 [default: 0.01 for digits, 0.005 for ocr, 0.003 for add]
    #[arg(long, value_parser = parse_lr)]
    lr: Option<f32>,
    /// Directory of the curves (train.png, train_ocr.png or train_add.png) and of `--save` without a file
    #[arg(long, value_name = "DIR", default_value = "target/om")]
    out: PathBuf,
    /// Save the trained weights as safetensors to FILE [default FILE: DIR/digits.safetensors, DIR/ocr.safetensors or DIR/add.safetensors, DIR from --out]
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    save: Option<Option<PathBuf>>,
    /// Shards of each mini-batch, at least 1 (gradients summed in shard order: the same bits on any number of processes in exact mode; batch norm uses per-shard statistics)
    #[arg(long, default_value_t = 1, value_parser = parse_count)]
    shards: usize,
    /// Run data-parallel over the processes of `mpirun` (needs the `mpi` feature)
    #[arg(long, value_enum)]
    dist: Option<DistArg>,
}

/// How the processes of a data-parallel run talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DistArg {
    /// MPI (`mpirun -np N om train --dist mpi ...`)
    Mpi,
}

fn parse_lr(v: &str) -> std::result::Result<f32, String> {
    match v.parse::<f32>() {
        Ok(lr) if lr > 0.0 && lr.is_finite() => Ok(lr),
        _ => Err("expected a finite number above 0".into()),
    }
}

/// `om train`'s options with the task's defaults filled in and the output paths checked.
pub struct Options {
    pub(crate) epochs: usize,
    pub(crate) seed: u64,
    pub(crate) threads: usize,
    pub(crate) mode: Mode,
    pub(crate) batch: usize,
    pub(crate) lr: f32,
    pub(crate) shards: usize,
    /// Where the curves go (absolute).
    pub(crate) plot: PathBuf,
    /// Where the weights go (absolute), if anywhere.
    pub(crate) save: Option<PathBuf>,
}

impl TrainArgs {
    /// Fills in the task's defaults and checks every option, then that the curve and the
    /// weights can be written, before anything is trained. A usage error leaves no
    /// directory behind.
    fn options(&self) -> Outcome<Options> {
        let mut created = Vec::new();
        let o = self.checked_options(&mut created);
        if o.is_err() {
            remove_created(&created);
        }
        o
    }

    fn checked_options(&self, created: &mut Vec<PathBuf>) -> Outcome<Options> {
        let (epochs, lr, plot, weights) = match self.task {
            TaskName::Digits => (12, 0.01, "train.png", "digits.safetensors"),
            TaskName::Ocr => (crate::ocr::EPOCHS, crate::ocr::LR, "train_ocr.png", "ocr.safetensors"),
            TaskName::Add => (crate::add::EPOCHS, crate::add::LR, "train_add.png", "add.safetensors"),
        };
        if self.shards > self.batch {
            return Err(Failure::Usage(format!(
                "--shards {} needs --batch of at least {} (one example per shard)",
                self.shards, self.shards
            )));
        }
        if self.dist == Some(DistArg::Mpi) && !cfg!(feature = "mpi") {
            return Err(Failure::Usage("--dist mpi: this om was built without MPI (cargo build --release --features mpi)".into()));
        }
        let plot = check_writable(&self.out.join(plot), "--out", created)?;
        let save = match &self.save {
            None => None,
            Some(file) => Some(check_writable(&file.clone().unwrap_or_else(|| self.out.join(weights)), "--save", created)?),
        };
        let threads = self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(Options {
            epochs: self.epochs.unwrap_or(epochs),
            seed: self.seed,
            threads: threads.min(onemodel::compute::MAX_THREADS),
            mode: self.mode.into(),
            batch: self.batch,
            lr: self.lr.unwrap_or(lr),
            shards: self.shards,
            plot,
            save,
        })
    }
}

/// Runs `om train ...`: checks the options, then trains the chosen task.
pub fn run(args: &TrainArgs) -> Outcome {
    let o = args.options()?;
    Compute::set_threads(o.threads)?;
    Compute::set_mode(o.mode);
    match args.dist {
        None => train_task(args.task, &o, onemodel::dist::Single).map_err(Into::into),
        Some(DistArg::Mpi) => run_mpi(args.task, &o),
    }
}

/// Trains `task` with the ranks of `comm`.
fn train_task<C: Communicator>(task: TaskName, o: &Options, comm: C) -> Result<()> {
    match task {
        TaskName::Digits => train(&mut DigitsTask::new(o)?, o, comm),
        TaskName::Ocr => train(&mut crate::ocr::OcrTask::new(o)?, o, comm),
        TaskName::Add => train(&mut crate::add::AddTask::new(o)?, o, comm),
    }
}

/// `--dist mpi`: trains over the processes of `mpirun`; a rank that fails aborts them all
/// (`MPI_Abort`) rather than leaving the others waiting in a collective.
#[cfg(feature = "mpi")]
fn run_mpi(task: TaskName, o: &Options) -> Outcome {
    let world = onemodel::dist::MpiWorld::init()?;
    if let Err(e) = train_task(task, o, &world) {
        eprintln!("om train: rank {}: {e}", world.rank());
        world.abort(1);
    }
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_task: TaskName, _o: &Options) -> Outcome {
    Err(Failure::Usage("--dist mpi: this om was built without MPI (cargo build --release --features mpi)".into()))
}

/// What a task of `om train` evaluates after an epoch.
pub(crate) struct Evaluation {
    /// The value plotted (a percentage).
    pub(crate) metric: f64,
    /// The epoch line's words about it.
    pub(crate) line: String,
}

/// One task of `om train`: its data, model, loss and evaluation. [`train`] runs the rest.
pub(crate) trait Task {
    /// One training example.
    type Example;
    /// What the examples are called in rates (`images`, `strings`).
    const UNIT: &'static str;
    /// The loss's name in the printed lines (`loss`, `CTC loss`).
    const LOSS: &'static str;
    /// The titles of the loss panel and of the metric panel.
    const CURVE_TITLES: (&'static str, &'static str);
    /// The first printed line up to the training settings (model, parameters, data).
    fn describe(&self) -> String;
    /// The trained module.
    fn model(&self) -> &dyn Module;
    /// The parameters the optimizer updates.
    fn parameters(&self) -> Vec<Tensor> {
        self.model().parameter_tensors()
    }
    /// The model's buffers (batch norm's running statistics).
    fn buffers(&self) -> Vec<Tensor> {
        self.model().buffers().into_iter().map(|(_, t)| t).collect()
    }
    /// The optimizer at learning rate `lr` and its words in the first printed line
    /// (default: Adam).
    fn optimizer(&self, lr: f32) -> Result<(Adam, String)> {
        Ok((Adam::new(self.parameters(), lr)?, format!("Adam lr {lr}")))
    }
    /// A per-step learning-rate schedule over the run's `total_steps` optimizer steps,
    /// stepped after each of them; `None` (the default) keeps the per-epoch cosine decay.
    fn scheduler(&self, _opt: &mut Adam, _total_steps: usize) -> Result<Option<Box<dyn LrScheduler>>> {
        Ok(None)
    }
    /// The largest joint 2-norm of the gradients: clipped to it before each optimizer step
    /// (`clip_grad_norm`); `None` (the default) does not clip.
    fn max_grad_norm(&self) -> Option<f32> {
        None
    }
    /// This epoch's training examples, in order (drawn from `rng`).
    fn examples(&mut self, rng: &mut Rng) -> Vec<Self::Example>;
    /// The mean loss of one mini-batch, recorded for backward.
    fn loss(&mut self, batch: &[Self::Example]) -> Result<Tensor>;
    /// Evaluates on held-out data (evaluation mode, no gradients).
    fn evaluate(&mut self) -> Result<Evaluation>;
    /// The metric axis' range for the plotted values.
    fn metric_range(&self, values: &[f64]) -> std::ops::Range<f64>;
    /// The closing line, from the last evaluation and the wall time in seconds.
    fn summary(&self, last: &Evaluation, wall: f64) -> String;
}

/// Trains `task` with Adam (cosine-decayed learning rate) over seeded mini-batches cut
/// into `o.shards` shards dealt to the ranks of `comm`; rank 0 prints one line per epoch,
/// the final figures, the curves and the weights file. Every rank checks at the end that
/// its parameters are rank 0's bit for bit.
pub(crate) fn train<T: Task, C: Communicator>(task: &mut T, o: &Options, comm: C) -> Result<()> {
    let mut dp = DataParallel::new(comm, task.parameters(), task.buffers(), o.shards)?;
    let (lead, ranks) = (dp.comm().rank() == 0, dp.comm().size());
    let (mut opt, optimizer) = task.optimizer(o.lr)?;
    let (params, clip) = (task.parameters(), task.max_grad_norm());
    let mut scheduler = None;
    let sharding = match (o.shards, ranks) {
        (1, 1) => String::new(),
        (s, 1) => format!(", {s} shards"),
        (s, n) => format!(", {s} shards over {n} processes"),
    };
    if lead {
        outln!(
            "{}, {} epochs, batch {}{sharding}, {optimizer}, mode {}, {} thread(s)",
            task.describe(),
            o.epochs,
            o.batch,
            o.mode,
            o.threads
        );
    }
    let style = ProgressStyle::with_template("epoch {prefix:>3} [{bar:30}] {pos}/{len} {msg}")
        .map_err(|e| Error::argument("progress bar", e.to_string()))?
        .progress_chars("=> ");
    let mut rng = Rng::new(o.seed);
    let (mut epoch_losses, mut batch_losses, mut metrics) = (Vec::new(), Vec::new(), Vec::new());
    let (mut last_loss, mut last_eval) = (f32::NAN, None);
    let start = Instant::now();
    for epoch in 1..=o.epochs {
        let examples = task.examples(&mut rng);
        let batches: Vec<&[T::Example]> = examples.chunks(o.batch).filter(|b| b.len() > 1 && b.len() >= o.shards).collect();
        if epoch == 1 {
            // every epoch of a task has the same number of batches
            scheduler = task.scheduler(&mut opt, batches.len() * o.epochs)?;
        }
        if scheduler.is_none() {
            // cosine decay of the learning rate over the epochs, in f32 (optim::CosineAnnealingLR
            // gives rates a few ulps apart, so other exact-mode bits: see docs/optim.md)
            opt.set_lr(o.lr * 0.5 * (1.0 + (std::f32::consts::PI * (epoch - 1) as f32 / o.epochs as f32).cos()));
        }
        let target = if lead { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let pb = ProgressBar::with_draw_target(Some(batches.len() as u64), target).with_style(style.clone());
        pb.set_prefix(epoch.to_string());
        let t0 = Instant::now();
        let (mut sum, mut seen) = (0.0f64, 0usize);
        for (i, rows) in batches.iter().enumerate() {
            let _step = ActivationScope::new();
            last_loss = dp.step(rows, |shard| task.loss(shard))?;
            if let Some(max_norm) = clip {
                clip_grad_norm(&params, max_norm, 2.0, true)?;
            }
            opt.step()?;
            if let Some(s) = scheduler.as_mut() {
                s.step(&mut opt)?;
            }
            batch_losses.push(((epoch - 1) as f64 + (i + 1) as f64 / batches.len() as f64, last_loss as f64));
            sum += last_loss as f64 * rows.len() as f64;
            seen += rows.len();
            pb.inc(1);
            pb.set_message(format!("loss {:.4}  {:.0} {}/s", sum / seen as f64, seen as f64 / t0.elapsed().as_secs_f64(), T::UNIT));
        }
        pb.finish_and_clear();
        let rate = seen as f64 / t0.elapsed().as_secs_f64();
        if !lead {
            continue;
        }
        let eval = task.evaluate()?;
        let epoch_loss = sum / seen as f64;
        epoch_losses.push(epoch_loss);
        metrics.push(eval.metric);
        outln!("epoch {epoch:>3}  {} {epoch_loss:.4}  {}  {rate:.0} {}/s", T::LOSS, eval.line, T::UNIT);
        last_eval = Some(eval);
    }
    let wall = start.elapsed().as_secs_f64();
    dp.check_replicas()?;
    if !lead {
        return Ok(());
    }
    let epoch_loss = epoch_losses.last().map_or(f32::NAN, |&l| l as f32);
    outln!(
        "final {} {epoch_loss:.6} (bits {:08x}, last epoch's mean), {last_loss:.6} (bits {:08x}, last batch)",
        T::LOSS,
        epoch_loss.to_bits(),
        last_loss.to_bits()
    );
    if let Some(last) = &last_eval {
        outln!("{}", task.summary(last, wall));
    }
    if !sharding.is_empty() {
        outln!("parameters: hash {:016x}, bit-identical on {ranks} process(es)", dp.hash());
    }
    let (loss_title, metric_title) = T::CURVE_TITLES;
    let curves = Curves {
        loss_title,
        batch_losses: &batch_losses,
        epoch_losses: &epoch_losses,
        metric_title,
        metrics: &metrics,
        metric_range: task.metric_range(&metrics),
    };
    match plot::draw(&o.plot, &curves) {
        Ok(()) => outln!("curve: {}", o.plot.display()),
        Err(e) => eprintln!("om train: could not draw {}: {e}", o.plot.display()),
    }
    if let Some(path) = &o.save {
        nn::save(task.model(), path)?;
        outln!("weights: {}", path.display());
    }
    Ok(())
}

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

    /// Images `[B, 1, 8, 8]` and labels `[B]` of the given rows.
    fn batch(&self, rows: &[usize]) -> Result<(Tensor, Tensor)> {
        let x: Vec<f32> = rows.iter().flat_map(|&r| self.pixels[r * 64..(r + 1) * 64].iter().copied()).collect();
        let y: Vec<i32> = rows.iter().map(|&r| self.labels[r]).collect();
        Ok((Tensor::from_vec(x, &[rows.len(), 1, 8, 8])?, Tensor::from_vec_i32(y, &[rows.len()])?))
    }
}

/// `om train --task digits`: the conv net, its training order (reshuffled each epoch) and
/// the test images.
struct DigitsTask {
    data: Digits,
    model: DigitNet,
    order: Vec<usize>,
}

impl DigitsTask {
    fn new(o: &Options) -> Result<DigitsTask> {
        let data = Digits::load()?;
        let order = data.train.clone();
        Ok(DigitsTask { data, model: DigitNet::new([16, 32], o.seed)?, order })
    }
}

impl Task for DigitsTask {
    type Example = usize;
    const UNIT: &'static str = "images";
    const LOSS: &'static str = "loss";
    const CURVE_TITLES: (&'static str, &'static str) = ("training loss (cross-entropy)", "test accuracy (%)");

    fn describe(&self) -> String {
        let n_params: usize = self.model.parameters().iter().map(|(_, t)| t.numel()).sum();
        format!("om train: digits conv net ({n_params} parameters), {} train / {} test images", self.data.train.len(), self.data.test.len())
    }

    fn model(&self) -> &dyn Module {
        &self.model
    }

    fn examples(&mut self, rng: &mut Rng) -> Vec<usize> {
        for i in (1..self.order.len()).rev() {
            self.order.swap(i, rng.below(i + 1));
        }
        self.order.clone()
    }

    fn loss(&mut self, rows: &[usize]) -> Result<Tensor> {
        let (x, y) = self.data.batch(rows)?;
        ops::cross_entropy(&self.model.forward(&x)?, &y, None, Default::default())
    }

    /// The fraction of test images whose arg-max logit is the label.
    fn evaluate(&mut self) -> Result<Evaluation> {
        self.model.set_training(false);
        let (x, y) = self.data.batch(&self.data.test)?;
        let logits = no_grad(|| self.model.forward(&x));
        self.model.set_training(true);
        let logits = logits?;
        let classes = logits.shape()[1];
        let correct = logits.with_f32(|l| {
            y.with_i32(|y| {
                l.chunks_exact(classes)
                    .zip(y)
                    .filter(|(row, &label)| {
                        let best = row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b });
                        best as i32 == label
                    })
                    .count()
            })
        });
        let acc = 100.0 * correct as f64 / self.data.test.len() as f64;
        Ok(Evaluation { metric: acc, line: format!("test accuracy {acc:.2}%") })
    }

    fn metric_range(&self, accuracies: &[f64]) -> std::ops::Range<f64> {
        accuracies.iter().copied().fold(100.0, f64::min).min(90.0).floor()..100.0
    }

    fn summary(&self, last: &Evaluation, wall: f64) -> String {
        format!("test accuracy {:.2}% ({} images), wall time {wall:.2} s", last.metric, self.data.test.len())
    }
}
