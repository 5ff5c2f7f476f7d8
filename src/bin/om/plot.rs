//! The training curves `om train` draws into a PNG: the loss on a log scale (every
//! mini-batch's loss as a faint trace, each epoch's mean as a marked point in the middle of
//! its epoch) beside the held-out metric after each epoch, both against the epoch with
//! whole-number ticks that never repeat.

use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;
use std::ops::Range;
use std::path::Path;

const FONT: &[u8] = include_bytes!("assets/DejaVuSansMono.ttf");

/// What one training run plots.
pub struct Curves<'a> {
    /// Title of the loss panel.
    pub loss_title: &'a str,
    /// Every mini-batch's loss at its position in epochs (batch `i` of `n` in epoch `e`
    /// at `e - 1 + (i + 1) / n`).
    pub batch_losses: &'a [(f64, f64)],
    /// Each epoch's mean loss (epoch 1 first).
    pub epoch_losses: &'a [f64],
    /// Title of the metric panel.
    pub metric_title: &'a str,
    /// The metric after each epoch.
    pub metrics: &'a [f64],
    /// The metric axis' range.
    pub metric_range: Range<f64>,
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Draws `curves` into the PNG at `path` (its directory must exist).
pub fn draw(path: &Path, curves: &Curves<'_>) -> DrawResult {
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| "the embedded font is invalid")?;
    let root = BitMapBackend::new(path, (1200, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(600);
    let epochs = curves.epoch_losses.len().max(1);
    draw_loss(&left, curves, epochs)?;
    draw_metric(&right, curves, epochs)?;
    root.present()?;
    Ok(())
}

/// The epoch axis, 0 (before training) to `epochs` with a little room on both sides.
fn epoch_range(epochs: usize) -> Range<f64> {
    -0.3..epochs as f64 + 0.3
}

/// How many epoch ticks to ask for: one per epoch up to 12 epochs. The axis then steps by
/// a round whole number (1, 2, 5, 10, ...) at least `epochs / 12`, so no tick label repeats.
fn epoch_ticks(epochs: usize) -> usize {
    epochs.min(12) + 1
}

/// A tick label with as many decimals as the value's leading digit needs (0.02, 0.5, 3).
fn short(v: f64) -> String {
    let decimals = if v > 0.0 && v < 1.0 { (-v.log10().floor()) as usize } else { 0 };
    format!("{v:.decimals$}")
}

/// The left panel: per-batch losses and per-epoch means, log-scale.
fn draw_loss(area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>, c: &Curves<'_>, epochs: usize) -> DrawResult {
    let positive = c.batch_losses.iter().map(|&(_, l)| l).chain(c.epoch_losses.iter().copied()).filter(|l| l.is_finite() && *l > 0.0);
    let (lo, hi) = positive.fold((f64::INFINITY, 0.0f64), |(lo, hi), l| (lo.min(l), hi.max(l)));
    let (lo, hi) = if hi > 0.0 { (lo / 1.3, hi * 1.3) } else { (1e-3, 1.0) };
    let mut chart = ChartBuilder::on(area)
        .caption(c.loss_title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(epoch_range(epochs), (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .x_labels(epoch_ticks(epochs))
        .y_labels(12)
        .light_line_style(BLACK.mix(0.04))
        .y_desc("loss (log scale)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| short(*y))
        .draw()?;
    let finite = |&&(x, l): &&(f64, f64)| l.is_finite() && l > 0.0 && x.is_finite();
    chart
        .draw_series(LineSeries::new(c.batch_losses.iter().filter(finite).copied(), RED.mix(0.3).stroke_width(1)))?
        .label("mini-batch")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED.mix(0.3).stroke_width(2)));
    // each epoch's mean sits in the middle of the batches it averages
    let means: Vec<(f64, f64)> = c.epoch_losses.iter().enumerate().map(|(i, &l)| (i as f64 + 0.5, l)).filter(|p| finite(&p)).collect();
    chart.draw_series(LineSeries::new(means.iter().copied(), RED.stroke_width(2)))?;
    chart
        .draw_series(means.iter().map(|&p| Circle::new(p, 4, RED.filled())))?
        .label("epoch mean")
        .legend(|(x, y)| Circle::new((x + 8, y), 4, RED.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    Ok(())
}

/// The right panel: the held-out metric after each epoch.
fn draw_metric(area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>, c: &Curves<'_>, epochs: usize) -> DrawResult {
    let mut chart = ChartBuilder::on(area)
        .caption(c.metric_title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(epoch_range(epochs), c.metric_range.clone())?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .x_labels(epoch_ticks(epochs))
        .light_line_style(BLACK.mix(0.04))
        .y_desc(c.metric_title)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    let points: Vec<(f64, f64)> = c.metrics.iter().enumerate().map(|(i, &m)| (i as f64 + 1.0, m)).filter(|(_, m)| m.is_finite()).collect();
    chart.draw_series(LineSeries::new(points.iter().copied(), BLUE.stroke_width(2)))?;
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))?;
    Ok(())
}
