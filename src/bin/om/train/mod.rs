//! `om train`: its options (checked before any work starts), the [`Task`] trait each task
//! implements (its data as a `onemodel::data::DataLoader`, model, loss, evaluation and
//! defaults), and the training loop every task shares: Adam with a cosine-decayed learning
//! rate (or the task's own optimizer, per-step schedule and gradient clipping:
//! [`Task::optimizer`], [`Task::scheduler`], [`Task::max_grad_norm`]), the loader's
//! mini-batches, a progress bar, one line per epoch, the final figures, the curves and the
//! weights file, and (`--checkpoint DIR`) a checkpoint after every epoch that `--resume DIR`
//! continues from bit for bit ([`checkpoint`]).
//!
//! The tasks: [`digits`] (the default; a conv net on the UCI digits) and [`ocr`] (a CRNN
//! reading strings of digits), both on the images of [`images`], and [`add`] (a
//! decoder-only transformer learning sums, on generated data); no task imports another.
//!
//! Every step goes through [`DataParallel`]: `--shards S` cuts each mini-batch into `S`
//! shards whose gradients are summed in shard order (with `S = 1`, the default, the step is
//! the plain one bit for bit), on one process or (`--dist mpi`, feature `mpi`) over the
//! processes of `mpirun`, where rank 0 alone prints, plots, saves and writes checkpoints.

mod add;
mod checkpoint;
mod digits;
mod images;
mod ocr;

use crate::args::{at_least, check_writable, parse_count, remove_created, threads_parser, Failure, ModeArg, Outcome};
use crate::plot::{self, Curves};
use add::AddTask;
use clap::{Args, ValueEnum};
use digits::DigitsTask;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ocr::OcrTask;
use onemodel::core::{rng::Rng, ActivationScope};
use onemodel::data::{Collate, DataLoader, Dataset};
use onemodel::dist::{Communicator, DataParallel};
use onemodel::ops::nn::{self, Module};
use onemodel::ops::optim::{clip_grad_norm, Adam, LrScheduler, Optimizer};
use onemodel::{Compute, Error, Mode, Result, Tensor};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

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

impl TaskName {
    fn defaults(self) -> Defaults {
        match self {
            TaskName::Digits => DigitsTask::DEFAULTS,
            TaskName::Ocr => OcrTask::DEFAULTS,
            TaskName::Add => AddTask::DEFAULTS,
        }
    }
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
    /// Write a checkpoint to DIR after every epoch (model, optimizer, RNG and loader states, epoch; each replaced atomically)
    #[arg(long, value_name = "DIR")]
    checkpoint: Option<PathBuf>,
    /// Continue the run checkpointed in DIR (same --task, --seed, --batch, --lr, --shards); checkpoints continue there unless --checkpoint names another DIR
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Stop after this epoch (after its checkpoint), as an interrupted run would (for tests)
    #[arg(long, hide = true, value_parser = parse_count)]
    stop_after_epoch: Option<usize>,
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

/// What a task uses when an option is not given: epochs, learning rate, the curve's file
/// name under `--out` and the weights' file name of `--save` without a file.
pub(crate) struct Defaults {
    pub(crate) epochs: usize,
    pub(crate) lr: f32,
    pub(crate) plot: &'static str,
    pub(crate) weights: &'static str,
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
    /// Where a checkpoint goes after every epoch, if anywhere.
    pub(crate) checkpoint: Option<PathBuf>,
    /// The checkpoint to continue from.
    pub(crate) resume: Option<PathBuf>,
    /// The epoch after which the run stops.
    pub(crate) stop_after: Option<usize>,
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
        let d = self.task.defaults();
        if self.shards > self.batch {
            return Err(Failure::Usage(format!(
                "--shards {} needs --batch of at least {} (one example per shard)",
                self.shards, self.shards
            )));
        }
        if self.dist == Some(DistArg::Mpi) && !cfg!(feature = "mpi") {
            return Err(Failure::Usage("--dist mpi: this om was built without MPI (cargo build --release --features mpi)".into()));
        }
        if let Some(dir) = &self.resume {
            if !dir.join(checkpoint::STATE).is_file() {
                return Err(Failure::Usage(format!("--resume {}: no checkpoint there (no {})", dir.display(), checkpoint::STATE)));
            }
        }
        let plot = check_writable(&self.out.join(d.plot), "--out", created)?;
        let save = match &self.save {
            None => None,
            Some(file) => Some(check_writable(&file.clone().unwrap_or_else(|| self.out.join(d.weights)), "--save", created)?),
        };
        let checkpoint = match self.checkpoint.as_ref().or(self.resume.as_ref()) {
            None => None,
            Some(dir) => {
                let probe = check_writable(&dir.join(format!(".{}.probe", checkpoint::STATE)), "--checkpoint", created)?;
                probe.parent().map(PathBuf::from)
            }
        };
        let threads = self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(Options {
            epochs: self.epochs.unwrap_or(d.epochs),
            seed: self.seed,
            threads: threads.min(onemodel::compute::MAX_THREADS),
            mode: self.mode.into(),
            batch: self.batch,
            lr: self.lr.unwrap_or(d.lr),
            shards: self.shards,
            plot,
            save,
            checkpoint,
            resume: self.resume.clone(),
            stop_after: self.stop_after_epoch,
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
        TaskName::Ocr => train(&mut OcrTask::new(o)?, o, comm),
        TaskName::Add => train(&mut AddTask::new(o)?, o, comm),
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

/// A collated mini-batch of task `T`.
pub(crate) type Batch<T> = <<<T as Task>::Data as Dataset>::Item as Collate>::Batch;

/// One task of `om train`: its defaults, data, model, loss and evaluation. [`train`] runs
/// the rest.
pub(crate) trait Task: Sized {
    /// The training examples (a dataset whose examples collate into a [`Batch`]).
    type Data: Dataset<Item: Collate>;
    /// The task's name (`--task`), recorded in checkpoints.
    const NAME: &'static str;
    /// Epochs, learning rate and file names when the options do not say.
    const DEFAULTS: Defaults;
    /// What the examples are called in rates (`images`, `strings`).
    const UNIT: &'static str;
    /// The loss's name in the printed lines (`loss`, `CTC loss`).
    const LOSS: &'static str;
    /// The titles of the loss panel and of the metric panel.
    const CURVE_TITLES: (&'static str, &'static str);
    /// The task's data and freshly initialised model (from `o.seed`).
    fn new(o: &Options) -> Result<Self>;
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
    /// built when `opt` is at the base rate and stepped after each step; `None` (the
    /// default) keeps the per-epoch cosine decay. A resumed run rebuilds it and steps it
    /// past the steps already done, so it must be a function of the steps alone.
    fn scheduler(&self, _opt: &mut Adam, _total_steps: usize) -> Result<Option<Box<dyn LrScheduler>>> {
        Ok(None)
    }
    /// The largest joint 2-norm of the gradients: clipped to it before each optimizer step
    /// (`clip_grad_norm`); `None` (the default) does not clip.
    fn max_grad_norm(&self) -> Option<f32> {
        None
    }
    /// The loader of the training examples (its batch size `o.batch`; shuffled or not).
    fn loader(&self, o: &Options) -> Result<DataLoader<Self::Data>>;
    /// Prepares the next epoch's examples before its batches are drawn: a task with fresh
    /// data every epoch replaces the loader's dataset, drawing from `rng` (the run's
    /// generator, saved in checkpoints). By default nothing changes.
    fn next_epoch(&mut self, _loader: &mut DataLoader<Self::Data>, _rng: &mut Rng) -> Result<()> {
        Ok(())
    }
    /// The mean loss of one mini-batch (or shard), recorded for backward.
    fn loss(&mut self, batch: Batch<Self>) -> Result<Tensor>;
    /// Evaluates on held-out data (evaluation mode, no gradients).
    fn evaluate(&mut self) -> Result<Evaluation>;
    /// The metric axis' range for the plotted values.
    fn metric_range(&self, values: &[f64]) -> std::ops::Range<f64>;
    /// The closing line, from the last evaluation and the wall time in seconds.
    fn summary(&self, last: &Evaluation, wall: f64) -> String;
}

/// What a run has recorded so far (the curves and the final figures), kept in checkpoints.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct History {
    /// (epoch + fraction of it, loss) of every batch.
    pub(crate) batch_losses: Vec<(f64, f64)>,
    /// The mean loss of every epoch.
    pub(crate) epoch_losses: Vec<f64>,
    /// The metric after every epoch.
    pub(crate) metrics: Vec<f64>,
    /// The last batch's loss.
    pub(crate) last_loss: f32,
}

/// The task's per-step schedule ([`Task::scheduler`]) of a run of `total` steps of which
/// `done` are taken: built from the base rate `lr` (a resumed optimizer holds the last
/// step's rate) and stepped past the `done` steps, so `opt` ends at the rate an
/// uninterrupted run has there, bit for bit.
pub(crate) fn schedule<T: Task>(task: &T, opt: &mut Adam, lr: f32, total: usize, done: usize) -> Result<Option<Box<dyn LrScheduler>>> {
    opt.set_lr(lr);
    let mut scheduler = task.scheduler(opt, total)?;
    if let Some(s) = scheduler.as_mut() {
        for _ in 0..done {
            s.step(opt)?;
        }
    }
    Ok(scheduler)
}

/// Trains `task` with its optimizer (Adam with a cosine-decayed learning rate unless the
/// task brings its own, with its per-step schedule and clipping) over the loader's mini-batches
/// cut into `o.shards` shards dealt to the ranks of `comm`; rank 0 prints one line per
/// epoch, the final figures, the curves and the weights file, and writes the checkpoints.
/// Every rank checks at the end that its parameters are rank 0's bit for bit.
pub(crate) fn train<T: Task, C: Communicator>(task: &mut T, o: &Options, comm: C) -> Result<()> {
    let (mut opt, optimizer) = task.optimizer(o.lr)?;
    let (params, clip) = (task.parameters(), task.max_grad_norm());
    let mut scheduler: Option<Box<dyn LrScheduler>> = None;
    let mut rng = Rng::new(o.seed);
    let mut loader = task.loader(o)?;
    let mut history = History { last_loss: f32::NAN, ..History::default() };
    let mut done = 0;
    if let Some(dir) = &o.resume {
        let r = checkpoint::load(dir, T::NAME, o, task.model(), &mut opt, &mut loader)?;
        (done, rng, history) = (r.epoch, r.rng, r.history);
        onemodel::core::rng::set_rng_state(r.default_rng);
        if done >= o.epochs {
            return Err(Error::argument(
                "om train --resume",
                format!("{}: the run is at epoch {done} of --epochs {}: nothing left to train", dir.display(), o.epochs),
            ));
        }
    }
    let mut dp = DataParallel::new(comm, task.parameters(), task.buffers(), o.shards)?;
    let (lead, ranks) = (dp.comm().rank() == 0, dp.comm().size());
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
        if let Some(dir) = &o.resume {
            outln!("resumed from {} after epoch {done}", dir.display());
        }
    }
    let style = ProgressStyle::with_template("epoch {prefix:>3} [{bar:30}] {pos}/{len} {msg}")
        .map_err(|e| Error::argument("progress bar", e.to_string()))?
        .progress_chars("=> ");
    let mut last_eval = None;
    let start = Instant::now();
    for epoch in done + 1..=o.epochs {
        task.next_epoch(&mut loader, &mut rng)?;
        let batches: Vec<Vec<usize>> = loader.next_batches().into_iter().filter(|b| b.len() > 1 && b.len() >= o.shards).collect();
        if epoch == done + 1 {
            // every epoch has as many batches
            scheduler = schedule(task, &mut opt, o.lr, batches.len() * o.epochs, batches.len() * done)?;
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
            history.last_loss = dp.step(rows, |shard| task.loss(loader.collate(shard)?))?;
            if let Some(max_norm) = clip {
                clip_grad_norm(&params, max_norm, 2.0, true)?;
            }
            opt.step()?;
            if let Some(s) = scheduler.as_mut() {
                s.step(&mut opt)?;
            }
            let loss = history.last_loss as f64;
            history.batch_losses.push(((epoch - 1) as f64 + (i + 1) as f64 / batches.len() as f64, loss));
            sum += loss * rows.len() as f64;
            seen += rows.len();
            pb.inc(1);
            pb.set_message(format!("loss {:.4}  {:.0} {}/s", sum / seen as f64, seen as f64 / t0.elapsed().as_secs_f64(), T::UNIT));
        }
        pb.finish_and_clear();
        let rate = seen as f64 / t0.elapsed().as_secs_f64();
        if lead {
            let eval = task.evaluate()?;
            let epoch_loss = sum / seen as f64;
            history.epoch_losses.push(epoch_loss);
            history.metrics.push(eval.metric);
            outln!("epoch {epoch:>3}  {} {epoch_loss:.4}  {}  {rate:.0} {}/s", T::LOSS, eval.line, T::UNIT);
            last_eval = Some(eval);
            if let Some(dir) = &o.checkpoint {
                let state = checkpoint::State { epoch, rng: &rng, loader: loader.state(), history: &history };
                checkpoint::save(dir, T::NAME, o, task.model(), &opt, &state)?;
            }
        }
        if o.stop_after == Some(epoch) && epoch < o.epochs {
            dp.check_replicas()?;
            if lead {
                outln!("stopped after epoch {epoch} of {}", o.epochs);
            }
            return Ok(());
        }
    }
    let wall = start.elapsed().as_secs_f64();
    dp.check_replicas()?;
    if !lead {
        return Ok(());
    }
    let epoch_loss = history.epoch_losses.last().map_or(f32::NAN, |&l| l as f32);
    outln!(
        "final {} {epoch_loss:.6} (bits {:08x}, last epoch's mean), {:.6} (bits {:08x}, last batch)",
        T::LOSS,
        epoch_loss.to_bits(),
        history.last_loss,
        history.last_loss.to_bits()
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
        batch_losses: &history.batch_losses,
        epoch_losses: &history.epoch_losses,
        metric_title,
        metrics: &history.metrics,
        metric_range: task.metric_range(&history.metrics),
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
