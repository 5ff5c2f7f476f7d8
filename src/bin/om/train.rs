//! `om train`: a small conv net learns the UCI optical digits (8×8 images, 10 classes;
//! `testdata/digits.safetensors`, embedded in the binary) with Adam and mini-batches in a
//! seeded order, then reports the test accuracy, the wall time and a loss/accuracy curve.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use onemodel::core::{io, rng::Rng, ActivationScope};
use onemodel::ops::models::DigitNet;
use onemodel::ops::nn::{self, Module};
use onemodel::ops::optim::{Adam, Optimizer};
use onemodel::{no_grad, ops, Compute, Error, Mode, Result, Tensor};
use std::path::PathBuf;
use std::time::Instant;

const DIGITS: &[u8] = include_bytes!("../../../testdata/digits.safetensors");
const FONT: &[u8] = include_bytes!("assets/DejaVuSansMono.ttf");

/// Command-line options of `om train`.
pub struct Options {
    /// `digits` (the conv net classifier) or `ocr` (CRNN + CTC on digit strings).
    pub task: Task,
    pub(crate) epochs: usize,
    pub(crate) seed: u64,
    pub(crate) threads: usize,
    pub(crate) mode: Mode,
    pub(crate) batch: usize,
    pub(crate) lr: f32,
    pub(crate) save: Option<PathBuf>,
}

/// What `om train` trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// The digits conv net (the default).
    Digits,
    /// A CRNN with CTC reading strings of 4–8 digits.
    Ocr,
}

impl Options {
    /// Parses `--task digits|ocr --epochs N --seed S --threads T --mode fast|exact --batch B
    /// --lr LR --save FILE`; the epochs, batch and learning rate default per task.
    pub fn parse(args: &[String]) -> Result<Options> {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let mut task = Task::Digits;
        if let Some(i) = args.iter().position(|a| a == "--task") {
            task = match args.get(i + 1).map(String::as_str) {
                Some("digits") => Task::Digits,
                Some("ocr") => Task::Ocr,
                Some(v) => return Err(Error::argument("train", format!("invalid value `{v}` for --task (digits or ocr)"))),
                None => return Err(Error::argument("train", "--task needs a value")),
            };
        }
        let (epochs, batch, lr) = match task {
            Task::Digits => (12, 32, 0.01),
            Task::Ocr => (crate::ocr::EPOCHS, crate::ocr::BATCH, crate::ocr::LR),
        };
        let mut o = Options { task, epochs, seed: 7, threads, mode: Mode::Fast, batch, lr, save: None };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let v = it.next().ok_or_else(|| Error::argument("train", format!("{flag} needs a value")))?;
            let bad = || Error::argument("train", format!("invalid value `{v}` for {flag}"));
            match flag.as_str() {
                "--task" => {}
                "--epochs" => o.epochs = v.parse().map_err(|_| bad())?,
                "--seed" => o.seed = v.parse().map_err(|_| bad())?,
                "--threads" => o.threads = v.parse().map_err(|_| bad())?,
                "--mode" => o.mode = Mode::parse(v).ok_or_else(bad)?,
                "--batch" => o.batch = v.parse().ok().filter(|&b| b > 1).ok_or_else(bad)?,
                "--lr" => o.lr = v.parse().ok().filter(|&l: &f32| l > 0.0).ok_or_else(bad)?,
                "--save" => o.save = Some(PathBuf::from(v)),
                other => return Err(Error::argument("train", format!("unknown option `{other}`"))),
            }
        }
        Ok(o)
    }
}

/// The digits as pixels scaled to [0, 1] (64 per image), labels, and the split.
pub(crate) struct Digits {
    pub(crate) pixels: Vec<f32>,
    pub(crate) labels: Vec<i32>,
    pub(crate) train: Vec<usize>,
    pub(crate) test: Vec<usize>,
}

impl Digits {
    pub(crate) fn load() -> Result<Digits> {
        let t = io::from_bytes(DIGITS)?;
        let get = |n: &str| t.get(n).ok_or_else(|| Error::argument("train", format!("digits data has no `{n}`")));
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

/// Fraction of `rows` whose arg-max logit is the label (evaluation mode, no grad).
fn accuracy(model: &mut DigitNet, data: &Digits, rows: &[usize]) -> Result<f64> {
    model.set_training(false);
    let (x, y) = data.batch(rows)?;
    let logits = no_grad(|| model.forward(&x))?;
    model.set_training(true);
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
    Ok(correct as f64 / rows.len() as f64)
}

/// Trains the chosen task and prints the figures.
pub fn run(o: &Options) -> Result<()> {
    match o.task {
        Task::Digits => run_digits(o),
        Task::Ocr => crate::ocr::run(o),
    }
}

/// The progress-bar style of both tasks.
pub(crate) fn progress_style() -> Result<ProgressStyle> {
    Ok(ProgressStyle::with_template("epoch {prefix:>3} [{bar:30}] {pos}/{len} {msg}")
        .map_err(|e| Error::argument("train", e.to_string()))?
        .progress_chars("=> "))
}

/// Where the curve `name` is drawn: `$CARGO_TARGET_DIR/om/<name>` (default `target/`).
pub(crate) fn plot_path(name: &str) -> PathBuf {
    PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into())).join("om").join(name)
}

/// Trains the digits conv net and prints the figures.
fn run_digits(o: &Options) -> Result<()> {
    Compute::set_threads(o.threads)?;
    Compute::set_mode(o.mode);
    let data = Digits::load()?;
    let mut model = DigitNet::new([16, 32], o.seed)?;
    let mut opt = Adam::new(model.parameter_tensors(), o.lr)?;
    let n_params: usize = model.parameters().iter().map(|(_, t)| t.numel()).sum();
    println!(
        "om train: digits conv net ({n_params} parameters), {} train / {} test images, {} epochs, batch {}, Adam lr {}, mode {}, {} thread(s)",
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
    let mut order = data.train.clone();
    let (mut losses, mut accs) = (Vec::new(), Vec::new());
    let mut last_loss = f32::NAN;
    let start = Instant::now();
    for epoch in 1..=o.epochs {
        // cosine decay of the learning rate over the epochs
        opt.set_lr(o.lr * 0.5 * (1.0 + (std::f32::consts::PI * (epoch - 1) as f32 / o.epochs as f32).cos()));
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let batches: Vec<&[usize]> = order.chunks(o.batch).filter(|b| b.len() > 1).collect();
        let pb = ProgressBar::with_draw_target(Some(batches.len() as u64), ProgressDrawTarget::stderr()).with_style(style.clone());
        pb.set_prefix(epoch.to_string());
        let t0 = Instant::now();
        let (mut sum, mut seen) = (0.0f64, 0usize);
        for rows in &batches {
            let _step = ActivationScope::new();
            let (x, y) = data.batch(rows)?;
            let loss = ops::cross_entropy(&model.forward(&x)?, &y, true, None)?;
            opt.zero_grad()?;
            loss.backward()?;
            opt.step()?;
            last_loss = loss.item()?;
            sum += last_loss as f64 * rows.len() as f64;
            seen += rows.len();
            pb.inc(1);
            pb.set_message(format!("loss {:.4}  {:.0} images/s", sum / seen as f64, seen as f64 / t0.elapsed().as_secs_f64()));
        }
        pb.finish_and_clear();
        let acc = accuracy(&mut model, &data, &data.test)?;
        let epoch_loss = sum / seen as f64;
        losses.push(epoch_loss);
        accs.push(acc);
        println!(
            "epoch {epoch:>3}  loss {epoch_loss:.4}  test accuracy {:.2}%  {:.0} images/s",
            100.0 * acc,
            seen as f64 / t0.elapsed().as_secs_f64()
        );
    }
    let wall = start.elapsed().as_secs_f64();
    let acc = accuracy(&mut model, &data, &data.test)?;
    let epoch_loss = losses.last().map_or(f32::NAN, |&l| l as f32);
    println!(
        "final loss {epoch_loss:.6} (bits {:08x}, last epoch's mean), {last_loss:.6} (bits {:08x}, last batch)",
        epoch_loss.to_bits(),
        last_loss.to_bits()
    );
    println!("test accuracy {:.2}% ({} images), wall time {wall:.2} s", 100.0 * acc, data.test.len());
    let png = plot_path("train.png");
    let acc_pct: Vec<f64> = accs.iter().map(|a| 100.0 * a).collect();
    let lo = acc_pct.iter().copied().fold(100.0, f64::min).min(90.0).floor();
    match plot(&png, ("training loss (cross-entropy)", &losses), ("test accuracy (%)", &acc_pct, lo..100.0)) {
        Ok(()) => println!("curve: {}", png.display()),
        Err(e) => eprintln!("om train: could not draw {}: {e}", png.display()),
    }
    if let Some(path) = &o.save {
        nn::save(&model, path)?;
        println!("weights: {}", path.display());
    }
    Ok(())
}

/// A curve's title and per-epoch values.
type Curve<'a> = (&'a str, &'a [f64]);

/// Draws the per-epoch training loss and a test metric (its title, values and y range)
/// side by side into a PNG.
pub(crate) fn plot(
    path: &std::path::Path,
    (loss_title, losses): Curve<'_>,
    (metric_title, metric, metric_range): (&str, &[f64], std::ops::Range<f64>),
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| "the embedded font is invalid")?;
    let root = BitMapBackend::new(path, (960, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(480);
    let n = losses.len().max(2) as f64;
    let series = |area: &DrawingArea<BitMapBackend<'_>, _>, title: &str, ys: &[f64], y_range: std::ops::Range<f64>, color: RGBColor| {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(1.0..n, y_range)?;
        chart.configure_mesh().x_desc("epoch").x_label_formatter(&|x| format!("{x:.0}")).draw()?;
        chart.draw_series(LineSeries::new(ys.iter().enumerate().map(|(i, &y)| (i as f64 + 1.0, y)), color.stroke_width(2)))?;
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    let max_loss = losses.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.05;
    series(&left, loss_title, losses, 0.0..max_loss, RED)?;
    series(&right, metric_title, metric, metric_range, BLUE)?;
    root.present()?;
    Ok(())
}
