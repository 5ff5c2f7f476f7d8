//! Connectionist temporal classification: `ctc_loss` (Graves et al. 2006), with the
//! log-space forward (α) and backward (β) recursions in f64 and the fixed `exp`/`log` of
//! [`math64`], so loss values and gradients are bit-identical in fast and exact mode and on
//! every platform. Definitions, accuracy and the difference from PyTorch's gradient are in
//! `docs/ctc.md`.

use crate::Reduction;
use om_core::compute::Compute;
use om_core::kernels::math64;
use om_core::kernels::parallel::{for_each_tile_scratch, workers, Grid, Tiled};
use om_core::pool::{Buffer, F64Scratch};
use om_core::{Case, DType, Error, Result, Tensor};
use om_macros::{op, op_wrapper};

/// Sequence lengths: a slice of counts, or an `i32` tensor of shape `[B]`.
#[derive(Clone, Copy, Debug)]
pub enum Lengths<'a> {
    /// Counts given directly.
    Counts(&'a [usize]),
    /// An `i32` tensor of shape `[B]`.
    Tensor(&'a Tensor),
}

impl<'a> From<&'a [usize]> for Lengths<'a> {
    fn from(v: &'a [usize]) -> Self {
        Lengths::Counts(v)
    }
}

impl<'a> From<&'a Vec<usize>> for Lengths<'a> {
    fn from(v: &'a Vec<usize>) -> Self {
        Lengths::Counts(v)
    }
}

impl<'a, const N: usize> From<&'a [usize; N]> for Lengths<'a> {
    fn from(v: &'a [usize; N]) -> Self {
        Lengths::Counts(v)
    }
}

impl<'a> From<&'a Tensor> for Lengths<'a> {
    fn from(t: &'a Tensor) -> Self {
        Lengths::Tensor(t)
    }
}

/// Reads `B` lengths as counts into `out`: `arg` names them in errors.
fn read_lengths(arg: &'static str, lengths: Lengths<'_>, lp_shape: &[usize], out: &mut [usize]) -> Result<()> {
    const OP: &str = primitive::ctc_loss::NAME;
    let batch = out.len();
    let wrong_count = |n: usize| Error::shape(OP, &[lp_shape, &[n]], format!("`{arg}` has {n} entries for a batch of {batch}"));
    match lengths {
        Lengths::Counts(v) => {
            if v.len() != batch {
                return Err(wrong_count(v.len()));
            }
            out.copy_from_slice(v);
        }
        Lengths::Tensor(t) => {
            if t.dtype() != DType::I32 {
                return Err(Error::DType { op: OP, arg, expected: DType::I32, got: t.dtype() });
            }
            if t.rank() != 1 {
                return Err(Error::shape(OP, &[lp_shape, t.shape()], format!("`{arg}` must be a 1-d tensor of B lengths")));
            }
            t.try_with_i32(|raw| {
                if let Some((b, &l)) = raw.iter().enumerate().find(|(_, &l)| l < 0) {
                    return Err(Error::argument(OP, format!("`{arg}` must be non-negative, got {l} for sequence {b}")));
                }
                if raw.len() != batch {
                    return Err(wrong_count(raw.len()));
                }
                for (o, &l) in out.iter_mut().zip(raw) {
                    *o = l as usize;
                }
                Ok(())
            })
            .map_err(|e| e.with_op(OP))??;
        }
    }
    Ok(())
}

/// `v` as an `i32` entry of the lengths-and-labels tensor (lengths above `i32::MAX` would
/// need a `log_probs` of more than 2³¹ frames or target columns).
fn as_i32(v: usize, what: &str, b: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::argument(primitive::ctc_loss::NAME, format!("{what} {v} of sequence {b} exceeds i32::MAX")))
}

/// CTC loss `−log p(target | input)` per sequence (Graves et al. 2006), reduced by
/// `reduction`, like `torch.nn.functional.ctc_loss`.
///
/// - `log_probs`: `f32` `[T, B, C]`, log-probabilities over `C` classes (blank included) at
///   each of `T` frames. The loss and gradient are defined for any values (they need not be
///   normalised); normally they come from a `log_softmax`.
/// - `targets`: `i32`, either padded `[B, S]` (row `b` holds the labels of sequence `b` in
///   its first `target_lengths[b]` entries; the rest is ignored) or the 1-d concatenation of
///   all target sequences (length `Σ target_lengths`), as PyTorch accepts.
/// - `input_lengths`, `target_lengths`: `B` counts, as a slice or an `i32` tensor `[B]`.
///   An input length may be 0 (loss 0 for an empty target, +∞ otherwise), as in PyTorch.
/// - `blank`: the blank class, `< C`; labels must be in `0..C` and differ from it.
/// - `zero_infinity`: an impossible alignment (input too short for its target, counting the
///   blank needed between repeated labels) gives loss +∞, or 0 when this is set; its
///   gradient is zero either way.
///
/// The gradient is the true partial derivative with respect to `log_probs` (PyTorch's adds
/// `exp(lp)·w` on every used frame; gradients through a `log_softmax` agree): see
/// `docs/ctc.md`. Errors name `ctc_loss`.
///
/// # Examples
///
/// ```
/// use om_core::Tensor;
/// use om_ops::{ctc_loss, Reduction};
/// // T = 3 frames, one sequence, 3 classes (blank 0), all equally likely.
/// let log_probs = Tensor::full(&[3, 1, 3], (1.0f32 / 3.0).ln())?;
/// let targets = Tensor::from_vec_i32(vec![1], &[1, 1])?;
/// let loss = ctc_loss(&log_probs, &targets, &[3usize][..], &[1usize][..], 0, Reduction::Sum, false)?;
/// // 6 of the 27 frame labellings collapse to [1] (__1, _1_, 1__, _11, 11_, 111).
/// assert!((loss.item()? - (27.0f32 / 6.0).ln()).abs() < 1e-5);
/// # Ok::<(), om_core::Error>(())
/// ```
#[op_wrapper(primitive::ctc_loss)]
pub fn ctc_loss<'a, 'b>(
    log_probs: &Tensor,
    targets: &Tensor,
    input_lengths: impl Into<Lengths<'a>>,
    target_lengths: impl Into<Lengths<'b>>,
    blank: usize,
    reduction: Reduction,
    zero_infinity: bool,
) -> Result<Tensor> {
    const OP: &str = primitive::ctc_loss::NAME;
    log_probs.expect_f32(OP, "log_probs")?;
    if log_probs.rank() != 3 {
        return Err(Error::shape(OP, &[log_probs.shape()], "`log_probs` must be [T, B, C]"));
    }
    let (t_max, batch, classes) = (log_probs.shape()[0], log_probs.shape()[1], log_probs.shape()[2]);
    let lp_shape = log_probs.shape();
    if targets.dtype() != DType::I32 {
        return Err(Error::DType { op: OP, arg: "targets", expected: DType::I32, got: targets.dtype() });
    }
    // Both length lists, as counts, in one pooled scratch.
    let words = batch.checked_mul(2).and_then(|w| w.checked_mul(std::mem::size_of::<usize>()));
    let mut scratch = Buffer::try_new(words.unwrap_or(usize::MAX)).map_err(|e| e.with_op(OP))?;
    let (input_lengths_out, rest) = scratch.usize_mut().split_at_mut(batch);
    let target_lengths_out = &mut rest[..batch];
    read_lengths("input_lengths", input_lengths.into(), lp_shape, input_lengths_out)?;
    read_lengths("target_lengths", target_lengths.into(), lp_shape, target_lengths_out)?;
    let (input_lengths, target_lengths) = (&*input_lengths_out, &*target_lengths_out);
    if blank >= classes {
        return Err(Error::argument(OP, format!("blank {blank} is out of range for {classes} classes")));
    }
    for (b, &l) in input_lengths.iter().enumerate() {
        if l > t_max {
            return Err(Error::argument(OP, format!("input length {l} of sequence {b} exceeds the {t_max} frames of `log_probs`")));
        }
    }
    let total: usize = target_lengths.iter().sum();
    // The column count of padded targets (0: concatenated 1-d targets).
    let columns = match targets.rank() {
        2 => {
            let s = targets.shape()[1];
            if targets.shape()[0] != batch {
                return Err(Error::shape(OP, &[lp_shape, targets.shape()], "padded `targets` must be [B, S]"));
            }
            if let Some((b, &l)) = target_lengths.iter().enumerate().find(|(_, &l)| l > s) {
                return Err(Error::argument(OP, format!("target length {l} of sequence {b} exceeds the {s} columns of `targets`")));
            }
            s
        }
        1 => {
            if targets.numel() != total {
                return Err(Error::shape(
                    OP,
                    &[lp_shape, targets.shape()],
                    format!("concatenated `targets` must hold Σ target_lengths = {total} labels"),
                ));
            }
            0
        }
        _ => return Err(Error::shape(OP, &[lp_shape, targets.shape()], "`targets` must be padded [B, S] or concatenated 1-d")),
    };
    let entries = total.checked_add(2 * batch).ok_or_else(|| Error::argument(OP, format!("{total} labels overflow")))?;
    let lengths_and_labels = targets
        .try_with_i32(|raw| {
            Tensor::build_i32(&[entries], |out| {
                let (lens, labels) = out.split_at_mut(2 * batch);
                for b in 0..batch {
                    lens[b] = as_i32(input_lengths[b], "input length", b)?;
                    lens[batch + b] = as_i32(target_lengths[b], "target length", b)?;
                }
                let mut next = 0;
                let mut offset = 0;
                for (b, &len) in target_lengths.iter().enumerate() {
                    let start = if columns > 0 { b * columns } else { offset };
                    offset += len;
                    for (i, &v) in raw[start..start + len].iter().enumerate() {
                        if v < 0 || v as usize >= classes {
                            return Err(Error::argument(
                                OP,
                                format!("label {v} at position {i} of sequence {b} is out of range for {classes} classes"),
                            ));
                        }
                        if v as usize == blank {
                            return Err(Error::argument(OP, format!("label {v} at position {i} of sequence {b} is the blank")));
                        }
                        labels[next] = v;
                        next += 1;
                    }
                }
                Ok(())
            })
        })
        .map_err(|e| e.with_op(OP))??;
    primitive::ctc_loss(log_probs, &lengths_and_labels, blank, zero_infinity, reduction)
}

/// The lengths and labels the primitive reads from its `i32` input `[2B + Σ L]`: the input
/// lengths, the target lengths, then every sequence's labels one after the other.
struct Plan<'a> {
    input_lengths: &'a [i32],
    target_lengths: &'a [i32],
    labels: &'a [i32],
}

impl<'a> Plan<'a> {
    /// Splits `entries` for a batch of `batch` (an error if they do not fit together).
    fn new(entries: &'a [i32], batch: usize) -> Result<Plan<'a>> {
        const OP: &str = primitive::ctc_loss::NAME;
        let Some((lens, labels)) = entries.split_at_checked(batch.saturating_mul(2)) else {
            return Err(Error::argument(OP, format!("{} lengths and labels are too few for a batch of {batch}", entries.len())));
        };
        let (input_lengths, target_lengths) = lens.split_at(batch);
        let total: i64 = target_lengths.iter().map(|&l| l as i64).sum();
        if total != labels.len() as i64 || lens.iter().any(|&l| l < 0) {
            return Err(Error::argument(OP, format!("the target lengths ({total} labels) do not match the {} labels", labels.len())));
        }
        Ok(Plan { input_lengths, target_lengths, labels })
    }

    /// Sequence `b`'s input length and labels.
    fn sequence(&self, b: usize) -> (usize, &'a [i32]) {
        let start: usize = self.target_lengths[..b].iter().map(|&l| l as usize).sum();
        (self.input_lengths[b] as usize, &self.labels[start..start + self.target_lengths[b] as usize])
    }

    /// The most values one sequence's α (or β) holds: `frames · (2L + 1)`.
    fn max_trellis(&self) -> usize {
        self.input_lengths.iter().zip(self.target_lengths).map(|(&f, &l)| f as usize * (2 * l as usize + 1)).max().unwrap_or(0)
    }
}

/// The per-sequence quantities shared by forward and backward.
struct Sequence<'a> {
    /// `log_probs` in row-major `[T, B, C]` order.
    lp: &'a [f32],
    batch: usize,
    classes: usize,
    b: usize,
    frames: usize,
    blank: usize,
    /// The target's labels; the extended sequence `l'` puts blanks around and between them.
    labels: &'a [i32],
}

impl Sequence<'_> {
    fn new<'a>(lp: &'a [f32], shape: &[usize], blank: usize, b: usize, frames: usize, labels: &'a [i32]) -> Sequence<'a> {
        Sequence { lp, batch: shape[1], classes: shape[2], b, frames, blank, labels }
    }

    /// The length `2L + 1` of the extended label sequence `l'`.
    fn ext_len(&self) -> usize {
        2 * self.labels.len() + 1
    }

    /// `l'(s)`: the blank at even `s`, label `s / 2` (from 0) at odd `s`.
    fn ext(&self, s: usize) -> usize {
        if s.is_multiple_of(2) {
            self.blank
        } else {
            self.labels[s / 2] as usize
        }
    }

    fn lp(&self, t: usize, c: usize) -> f64 {
        self.lp[(t * self.batch + self.b) * self.classes + c] as f64
    }

    /// Whether the path may skip from `s − 2` to `s` (`l'(s)` a label differing from
    /// `l'(s − 2)`).
    fn can_skip(&self, s: usize) -> bool {
        s >= 2 && self.ext(s) != self.ext(s - 2)
    }

    /// `log α_t(s)`, `[frames, 2L+1]` row-major, into `a` (the first `frames · (2L+1)`
    /// values of the caller's scratch, returned).
    fn alpha<'s>(&self, a: &'s mut [f64]) -> &'s [f64] {
        let n = self.ext_len();
        let a = &mut a[..self.frames * n];
        a.fill(f64::NEG_INFINITY);
        if self.frames == 0 {
            return a;
        }
        a[0] = self.lp(0, self.ext(0));
        if n > 1 {
            a[1] = self.lp(0, self.ext(1));
        }
        for t in 1..self.frames {
            let (prev, cur) = a[(t - 1) * n..(t + 1) * n].split_at_mut(n);
            for s in 0..n {
                let x = prev[s];
                let y = if s >= 1 { prev[s - 1] } else { f64::NEG_INFINITY };
                let z = if self.can_skip(s) { prev[s - 2] } else { f64::NEG_INFINITY };
                cur[s] = math64::log_sum_exp3(x, y, z) + self.lp(t, self.ext(s));
            }
        }
        a
    }

    /// `log β_t(s)` (including the emission at `t`, as α does), `[frames, 2L+1]`, into
    /// `bt` (as [`Sequence::alpha`]).
    fn beta<'s>(&self, bt: &'s mut [f64]) -> &'s [f64] {
        let n = self.ext_len();
        let bt = &mut bt[..self.frames * n];
        bt.fill(f64::NEG_INFINITY);
        if self.frames == 0 {
            return bt;
        }
        let last = (self.frames - 1) * n;
        bt[last + n - 1] = self.lp(self.frames - 1, self.ext(n - 1));
        if n > 1 {
            bt[last + n - 2] = self.lp(self.frames - 1, self.ext(n - 2));
        }
        for t in (0..self.frames - 1).rev() {
            let (cur, next) = bt[t * n..(t + 2) * n].split_at_mut(n);
            for s in 0..n {
                let x = next[s];
                let y = if s + 1 < n { next[s + 1] } else { f64::NEG_INFINITY };
                let z = if s + 2 < n && self.can_skip(s + 2) { next[s + 2] } else { f64::NEG_INFINITY };
                cur[s] = math64::log_sum_exp3(x, y, z) + self.lp(t, self.ext(s));
            }
        }
        bt
    }

    /// `−log p(target | input)` from α: +∞ when no alignment exists.
    fn loss(&self, alpha: &[f64]) -> f64 {
        let n = self.ext_len();
        if self.frames == 0 {
            return if n == 1 { 0.0 } else { f64::INFINITY };
        }
        let last = &alpha[(self.frames - 1) * n..];
        let y = if n > 1 { last[n - 2] } else { f64::NEG_INFINITY };
        -math64::log_sum_exp3(last[n - 1], y, f64::NEG_INFINITY)
    }
}

mod primitive {
    use super::*;

    /// CTC loss of `[T, B, C]` log-probabilities (use [`crate::ctc_loss`], which validates
    /// and decodes the targets and lengths into `lengths_and_labels`, an `i32` tensor
    /// `[2B + Σ L]`: input lengths, target lengths, then the labels). Log-space α/β in f64
    /// with the fixed `exp`/`log`, bit-identical in every mode. Backward: per sequence
    /// `−exp(log Σ_{s: l'(s)=c} α_t(s)β_t(s) − lp[t,c] + loss)` on frames `t < input length`,
    /// times `g` and the reduction weight; zero for impossible alignments.
    #[op(saved = [log_probs, lengths_and_labels], attrs = [blank: usize, zero_infinity: bool, reduction: Reduction])]
    pub mod ctc_loss {
        use super::*;

        pub fn forward(
            log_probs: &Tensor,
            lengths_and_labels: &Tensor,
            blank: usize,
            zero_infinity: bool,
            reduction: Reduction,
        ) -> Result<Tensor> {
            let shape = log_probs.shape();
            let batch = shape[1];
            let threads = Compute::settings().threads;
            let mut losses = F64Scratch::try_zeroed(batch)?;
            let losses = losses.values();
            lengths_and_labels.try_with_i32(|entries| {
                let plan = Plan::new(entries, batch)?;
                // One chunk per sequence, each thread's α in its part of one scratch.
                let per = plan.max_trellis();
                let mut alphas = F64Scratch::try_zeroed(workers(threads, batch).saturating_mul(per))?;
                log_probs.try_with_f32(|lp| {
                    for_each_tile_scratch(
                        threads,
                        Tiled::row_bands(&mut losses[..], batch, 1, 1),
                        alphas.values(),
                        per,
                        |b, loss, part| {
                            let (frames, labels) = plan.sequence(b);
                            let seq = Sequence::new(lp, shape, blank, b, frames, labels);
                            let l = seq.loss(seq.alpha(part));
                            loss.into_slice()[0] = if zero_infinity && l == f64::INFINITY { 0.0 } else { l };
                        },
                    );
                })?;
                Ok(match reduction {
                    Reduction::None => Tensor::build_f32(&[batch], |out| {
                        for (o, &l) in out.iter_mut().zip(losses.iter()) {
                            *o = l as f32;
                        }
                        Ok(())
                    })?,
                    Reduction::Sum => Tensor::scalar(losses.iter().sum::<f64>() as f32),
                    Reduction::Mean => {
                        let s: f64 = losses.iter().zip(plan.target_lengths).map(|(&l, &n)| l / n.max(1) as f64).sum();
                        Tensor::scalar((s / batch as f64) as f32)
                    }
                })
            })?
        }

        fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
            gradients(r, g, d).map_err(|e| e.with_op(NAME))
        }

        /// The body of `backward` (`backward` names the operator in a refused buffer's error).
        fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
            if !d.needs_log_probs() {
                return Ok(());
            }
            let shape = &r.input_shapes[0];
            let (t_max, batch, classes) = (shape[0], shape[1], shape[2]);
            let threads = Compute::settings().threads;
            let grad = r.lengths_and_labels().try_with_i32(|entries| {
                let plan = Plan::new(entries, batch)?;
                // One chunk per sequence (its `[T, C]` column band of the `[T, B·C]`
                // gradient), each thread's α, β and class sums in its part of one scratch.
                let trellis = plan.max_trellis();
                let per = trellis.saturating_mul(2).saturating_add(classes);
                let mut scratch = F64Scratch::try_zeroed(workers(threads, batch).saturating_mul(per))?;
                g.try_with_f32(|gv| {
                    r.log_probs().try_with_f32(|lp| {
                        Tensor::build_f32(shape, |out| {
                            let grid = Grid {
                                rows: t_max,
                                cols: batch * classes,
                                row_stride: batch * classes,
                                band_rows: t_max,
                                band_cols: classes,
                            };
                            for_each_tile_scratch(threads, Tiled::new(out, grid), scratch.values(), per, |b, mut rows, part| {
                                for t in 0..t_max {
                                    rows.row(t).fill(0.0);
                                }
                                let (frames, labels) = plan.sequence(b);
                                let seq = Sequence::new(lp, shape, r.blank, b, frames, labels);
                                let (alpha, rest) = part.split_at_mut(trellis);
                                let (beta, lcab) = rest.split_at_mut(trellis);
                                let alpha = seq.alpha(alpha);
                                let loss = seq.loss(alpha);
                                if loss == f64::INFINITY {
                                    return; // impossible alignment: zero gradient (with or without zero_infinity)
                                }
                                let w = match r.reduction {
                                    Reduction::None => gv[b] as f64,
                                    Reduction::Sum => gv[0] as f64,
                                    Reduction::Mean => gv[0] as f64 / (batch as f64 * labels.len().max(1) as f64),
                                };
                                let beta = seq.beta(beta);
                                let lcab = &mut lcab[..classes];
                                let n = seq.ext_len();
                                for t in 0..seq.frames {
                                    lcab.fill(f64::NEG_INFINITY);
                                    for s in 0..n {
                                        let c = seq.ext(s);
                                        lcab[c] = math64::log_sum_exp2(lcab[c], alpha[t * n + s] + beta[t * n + s]);
                                    }
                                    for (c, o) in rows.row(t).iter_mut().enumerate() {
                                        if lcab[c] != f64::NEG_INFINITY {
                                            *o = (-math64::exp(lcab[c] - seq.lp(t, c) + loss) * w) as f32;
                                        }
                                    }
                                }
                            });
                            Ok(())
                        })
                    })
                })
            })????;
            d.log_probs(grad);
            Ok(())
        }

        fn cases() -> Vec<Case> {
            use crate::{ctc::ctc_loss as ctc, Reduction::*};
            let tg = |v: Vec<i32>, shape: &[usize]| Tensor::from_vec_i32(v, shape).unwrap();
            // Log-probabilities need not be normalised for the true partial derivative, so
            // the inputs are plain values in [-2.5, -0.2].
            let lp = |shape: &[usize], seed| Case::input(shape, -2.5, -0.2, seed);
            vec![
                Case::new("repeated_labels_mean", vec![lp(&[6, 2, 4], 1), tg(vec![1, 1, 2, 3, 3, 0], &[2, 3])], |x| {
                    ctc(&x[0], &x[1], &[6, 5], &[3, 2], 0, Mean, false)
                }),
                Case::new("empty_targets_sum", vec![lp(&[5, 3, 3], 2), tg(vec![0, 0, 2, 1, 1, 2], &[3, 2])], |x| {
                    ctc(&x[0], &x[1], &[5, 3, 4], &[0, 2, 0], 0, Sum, false)
                }),
                Case::new("unequal_lengths_none", vec![lp(&[6, 3, 5], 3), tg(vec![1, 2, 3, 4, 4, 1, 0, 0, 3, 0, 0, 0], &[3, 4])], |x| {
                    ctc(&x[0], &x[1], &[6, 4, 2], &[4, 2, 1], 0, None, false)
                }),
                // Non-zero blank, concatenated 1-d targets, lengths as an i32 tensor.
                Case::new("nonzero_blank_concatenated", vec![lp(&[5, 2, 4], 4), tg(vec![0, 3, 0, 3, 1], &[5])], |x| {
                    let il = Tensor::from_vec_i32(vec![5, 4], &[2])?;
                    ctc(&x[0], &x[1], &il, &[3, 2], 2, Mean, false)
                }),
                // Sequence 1 needs 3 frames for [1, 1] (a blank between the repeats) but has 2:
                // its loss is 0 with zero_infinity and its gradient zero.
                Case::new("impossible_zero_infinity_mean", vec![lp(&[4, 2, 3], 5), tg(vec![2, 1, 1, 1], &[2, 2])], |x| {
                    ctc(&x[0], &x[1], &[4, 2], &[2, 2], 0, Mean, true)
                }),
                Case::new("impossible_zero_infinity_sum", vec![lp(&[3, 3, 3], 6), tg(vec![1, 2, 1, 2, 2, 1, 1, 0, 0], &[3, 3])], |x| {
                    ctc(&x[0], &x[1], &[3, 3, 1], &[2, 3, 1], 0, Sum, true)
                }),
                // Without zero_infinity the impossible sequence's loss is +∞, and central
                // differences of a sum containing +∞ are NaN; so the case keeps only the
                // finite entries of the unreduced losses (the zero gradient of the impossible
                // sequence is asserted in the unit tests instead).
                Case::new("impossible_none_finite_entries", vec![lp(&[4, 3, 3], 7), tg(vec![1, 1, 1, 1, 2, 0], &[3, 2])], |x| {
                    let l = ctc(&x[0], &x[1], &[4, 2, 3], &[2, 2, 1], 0, None, false)?;
                    crate::slice(&l, 0, 0, 3, 2)
                }),
                // A [B, T, C] leaf transposed to [T, B, C]: strided log-probabilities.
                Case::new("transposed_input_sum", vec![lp(&[2, 5, 4], 8), tg(vec![3, 1, 2, 2], &[2, 2])], |x| {
                    ctc(&crate::transpose(&x[0], 0, 1)?, &x[1], &[5, 5], &[2, 2], 0, Sum, false)
                }),
            ]
        }
    }
}

#[cfg(test)]
mod oracle_tests {
    use super::{ctc_loss, Reduction};
    use crate::oracle::{both_modes, scaled_error, Oracle};
    use om_core::compute::{Compute, Mode};
    use om_core::Tensor;
    use std::cell::{Cell, RefCell};

    const CASES: [&str; 2] = ["pad", "cat"];
    const REDUCTIONS: [(&str, Reduction); 3] = [("none", Reduction::None), ("sum", Reduction::Sum), ("mean", Reduction::Mean)];

    fn load() -> Oracle {
        Oracle::load_file("ctc", "tools/oracle_ctc.py")
    }

    /// The loss of case `name` on a fresh leaf of its log-probabilities.
    fn run(o: &Oracle, name: &str, red: Reduction, zero_infinity: bool) -> (Tensor, Tensor) {
        let lp = o.get(&format!("{name}_lp"));
        let blank = o.get(&format!("{name}_blank")).to_vec_i32()[0] as usize;
        let (il, tl) = (o.get(&format!("{name}_il")), o.get(&format!("{name}_tl")));
        let y = ctc_loss(&lp, &o.get(&format!("{name}_targets")), &il, &tl, blank, red, zero_infinity).unwrap();
        (lp, y)
    }

    /// Relative error of the losses, with infinities required to match exactly.
    fn loss_error(ours: &Tensor, want: &Tensor) -> f64 {
        assert_eq!(ours.shape(), want.shape());
        ours.to_vec().iter().zip(want.to_vec()).fold(0.0, |m, (&a, b)| {
            if b.is_infinite() || a.is_infinite() {
                assert_eq!(a, b, "infinite losses must match");
                m
            } else {
                m.max((a as f64 - b as f64).abs() / (b as f64).abs().max(1e-30))
            }
        })
    }

    /// Backpropagates `sum(y · w)` (w = `<name>_none_r` for `None`, 1 otherwise) and returns
    /// the gradient with respect to the log-probabilities.
    fn grad_lp(o: &Oracle, name: &str, red: Reduction, zero_infinity: bool) -> (Tensor, Tensor) {
        let (lp, y) = run(o, name, red, zero_infinity);
        let w = if red == Reduction::None { o.get(&format!("{name}_none_r")).detach() } else { Tensor::scalar(1.0) };
        y.backward_with(Some(&w), false).unwrap();
        (lp.detach(), lp.grad().unwrap())
    }

    /// `g − exp(lp)·Σ_c g` per row: the log-softmax backward, in f64.
    fn through_log_softmax(lp: &Tensor, g: &Tensor) -> Tensor {
        let c = *lp.shape().last().unwrap();
        let (lpv, gv) = (lp.to_vec(), g.to_vec());
        let mut dz = vec![0.0f32; gv.len()];
        for (row, (l, gr)) in lpv.chunks(c).zip(gv.chunks(c)).enumerate() {
            let s: f64 = gr.iter().map(|&v| v as f64).sum();
            for j in 0..c {
                dz[row * c + j] = (gr[j] as f64 - (l[j] as f64).exp() * s) as f32;
            }
        }
        Tensor::from_vec(dz, lp.shape()).unwrap()
    }

    /// Compares a gradient with PyTorch's float64 evaluation `<key>64` (within 1e-6 scaled)
    /// and its float32 one `<key>` (within 1e-5: PyTorch's float32 kernel itself is up to
    /// 1.5e-6 scaled away from its float64 result on these cases).
    fn check_pair(o: &Oracle, key: &str, ours: &Tensor) {
        let e64 = scaled_error(ours, &o.get(&format!("{key}64")));
        let e32 = scaled_error(ours, &o.get(key));
        println!("oracle ctc {key} [{}]: scaled error {e64:.2e} vs torch float64, {e32:.2e} vs torch float32", Compute::mode());
        assert!(e64 <= 1e-6, "{key}64: scaled error {e64:e}");
        assert!(e32 <= 1e-5, "{key}: scaled error {e32:e}");
    }

    #[test]
    fn ctc_loss_values_match_pytorch_and_are_bit_identical_in_both_modes() {
        let o = load();
        let bits: RefCell<Vec<Vec<u32>>> = RefCell::new(Vec::new());
        let worst = Cell::new(0.0f64);
        both_modes(|| {
            let mut mine = Vec::new();
            for name in CASES {
                for (rname, red) in REDUCTIONS {
                    for zi in [false, true] {
                        let key = format!("{name}_{rname}{}_y", if zi { "_zi" } else { "" });
                        let (lp, y) = run(&o, name, red, zi);
                        let e = loss_error(&y, &o.get(&key));
                        println!("oracle ctc {key} [{}]: relative error {e:.2e}", Compute::mode());
                        assert!(e <= 1e-5, "{key}: relative error {e:e}");
                        worst.set(worst.get().max(e));
                        mine.extend(y.to_vec().iter().map(|v| v.to_bits()));
                        let w = Tensor::randn_with_seed(y.shape(), 3).unwrap();
                        y.backward_with(Some(&w), false).unwrap();
                        mine.extend(lp.grad().unwrap().to_vec().iter().map(|v| v.to_bits()));
                    }
                }
            }
            bits.borrow_mut().push(mine);
        });
        let b = bits.into_inner();
        assert!(b[0] == b[1], "fast and exact mode differ in some bit of a loss or gradient");
        println!("ctc worst loss relative error vs PyTorch: {:.2e}", worst.get());
        assert_eq!(Compute::mode(), Mode::Fast);
    }

    #[test]
    fn gradients_with_respect_to_logits_match_pytorch() {
        let o = load();
        both_modes(|| {
            for name in CASES {
                for (rname, red) in REDUCTIONS {
                    let (lp, g) = grad_lp(&o, name, red, true);
                    let dz = through_log_softmax(&lp, &g);
                    check_pair(&o, &format!("{name}_{rname}_gz"), &dz);
                }
            }
        });
    }

    /// PyTorch's gradient with respect to the log-probabilities is ours plus `exp(lp)·w` on
    /// every frame `t < input length` of a sequence with a finite loss (`w` the sequence's
    /// weight: `r_b`, 1, or `1/(B·max(1, target length))`).
    #[test]
    fn ctc_gradient_differs_from_pytorchs_by_the_softmax_term() {
        let o = load();
        for name in CASES {
            let il = o.get(&format!("{name}_il")).to_vec_i32();
            let tl = o.get(&format!("{name}_tl")).to_vec_i32();
            let losses = o.get(&format!("{name}_none_y")).to_vec();
            let r = o.get(&format!("{name}_none_r")).to_vec();
            for (rname, red) in REDUCTIONS {
                let (lp, g) = grad_lp(&o, name, red, true);
                let (t_max, batch, c) = (lp.shape()[0], lp.shape()[1], lp.shape()[2]);
                let (lpv, mut gv) = (lp.to_vec(), g.to_vec());
                for t in 0..t_max {
                    for b in 0..batch {
                        if t >= il[b] as usize || losses[b].is_infinite() {
                            continue;
                        }
                        let w = match red {
                            Reduction::None => r[b] as f64,
                            Reduction::Sum => 1.0,
                            Reduction::Mean => 1.0 / (batch as f64 * tl[b].max(1) as f64),
                        };
                        for k in 0..c {
                            let i = (t * batch + b) * c + k;
                            gv[i] = (gv[i] as f64 + (lpv[i] as f64).exp() * w) as f32;
                        }
                    }
                }
                check_pair(&o, &format!("{name}_{rname}_glp"), &Tensor::from_vec(gv, lp.shape()).unwrap());
            }
        }
    }

    #[test]
    fn impossible_alignments_have_zero_gradient_with_and_without_zero_infinity() {
        let o = load();
        // In `cat`, sequences 1 and 3 are impossible.
        for zi in [false, true] {
            for (_, red) in REDUCTIONS {
                let (lp, g) = grad_lp(&o, "cat", red, zi);
                let (t_max, batch, c) = (lp.shape()[0], lp.shape()[1], lp.shape()[2]);
                let gv = g.to_vec();
                assert!(gv.iter().all(|v| v.is_finite()));
                for t in 0..t_max {
                    for b in 0..batch {
                        let row = &gv[(t * batch + b) * c..][..c];
                        let zero = row.iter().all(|&v| v == 0.0);
                        // Sequence 0 is finite with 7 frames; 1 and 3 impossible; 2 has no frames;
                        // 4 uses 6 of 7 frames.
                        let expect_zero = matches!(b, 1..=3) || (b == 4 && t == 6);
                        assert_eq!(zero, expect_zero, "{red:?} zero_infinity={zi} t={t} b={b}: {row:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn losses_and_gradients_have_the_same_bits_at_any_thread_count() {
        // The sequences run as chunks on the team: the oracle's cases (impossible
        // alignments, a sequence without frames, padded and concatenated targets) and a
        // larger odd batch, in both modes, every reduction, with and without zero_infinity.
        let o = load();
        let big_lp = crate::log_softmax(&Tensor::rand_uniform(&[23, 11, 7], -3.0, 3.0, 5).unwrap(), 2).unwrap().detach();
        let big_tl: Vec<usize> = (0..11).map(|b| (b * 5) % 12).collect();
        let big_il: Vec<usize> = (0..11).map(|b| 23 - (b * 3) % 9).collect();
        let labels: Vec<i32> = (0..11 * 12).map(|k: i32| 1 + (k * 7 + k / 5) % 6).collect();
        let big_targets = Tensor::from_vec_i32(labels, &[11, 12]).unwrap();
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let run = |name: &str, red: Reduction, zi: bool| {
            let (lp, y) = if name == "big" {
                let lp = big_lp.detach().requires_grad().unwrap();
                let y = ctc_loss(&lp, &big_targets, &big_il, &big_tl, 0, red, zi).unwrap();
                (lp, y)
            } else {
                let (lp, _) = run(&o, name, red, zi);
                let lp = lp.detach().requires_grad().unwrap();
                let blank = o.get(&format!("{name}_blank")).to_vec_i32()[0] as usize;
                let (il, tl) = (o.get(&format!("{name}_il")), o.get(&format!("{name}_tl")));
                (lp.clone(), ctc_loss(&lp, &o.get(&format!("{name}_targets")), &il, &tl, blank, red, zi).unwrap())
            };
            let c = Tensor::rand_uniform(y.shape(), 0.5, 1.5, 3).unwrap();
            crate::sum(&crate::mul(&y, &c).unwrap(), None, false).unwrap().backward().unwrap();
            (bits(&y), bits(&lp.grad().unwrap()))
        };
        for mode in [Mode::Fast, Mode::Exact] {
            Compute::set_mode(mode);
            for name in ["pad", "cat", "big"] {
                for (_, red) in REDUCTIONS {
                    for zi in [false, true] {
                        Compute::set_threads(1).unwrap();
                        let want = run(name, red, zi);
                        for threads in [2, 3] {
                            Compute::set_threads(threads).unwrap();
                            assert!(run(name, red, zi) == want, "{mode:?} {name} {red:?} zero_infinity={zi} at {threads} threads");
                        }
                    }
                }
            }
        }
        Compute::set_mode(Mode::Fast);
        Compute::set_threads(1).unwrap();
    }
}
