//! Pooling: `max_pool2d` (saves the winner's index), `avg_pool2d` and the composition
//! `global_avg_pool2d` of `[N, C, H, W]` or unbatched `[C, H, W]` images, with PyTorch's CPU
//! semantics (`ceil_mode`'s output size and divisor included; see `docs/ops-conv.md` for
//! ties, NaN and padding). The arithmetic lives in
//! `om_core::kernels::pooling` (vectorised 2×2 and 2×1 paths, planes in parallel; see
//! `docs/kernels-norm-pool.md`).

use crate::conv::Pair;
use crate::image::Images;
use om_core::compute::Compute;
use om_core::kernels::pooling::{self as kernel, Divisor, Pool2d as Geometry};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

/// PyTorch's arguments of `F.max_pool2d` and `F.avg_pool2d`, with PyTorch's defaults:
/// `Pool2d::new(k)` is a `k` window (an int or (kH, kW)) with stride `k`, padding 0,
/// dilation 1, `ceil_mode` off, `count_include_pad` on and no `divisor_override`; the builders change one knob
/// each (an int or a pair). An int or a pair converts to it (`max_pool2d(&x, 2)`), so the
/// short form reads as PyTorch's. Every value is checked where the operator reads it: a
/// kernel, stride or dilation of 0, negative values, and padding above half the kernel
/// (PyTorch's rule) are `Error::Argument`s; `avg_pool2d` refuses a dilation other than 1
/// (PyTorch's has none) and `max_pool2d` the divisor knobs (`count_include_pad(false)`,
/// `divisor_override`).
///
/// ```
/// use om_ops::{max_pool2d, Pool2d, Tensor};
/// let x = Tensor::randn(&[8, 1, 8, 8])?;
/// // F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
/// let p = Pool2d::new(3).stride(2).padding(1).ceil_mode(true);
/// assert_eq!(max_pool2d(&x, p)?.shape(), &[8, 1, 5, 5]);
/// // The short form: stride = kernel.
/// assert_eq!(max_pool2d(&x, 2)?.to_vec(), max_pool2d(&x, Pool2d::new(2).stride(2))?.to_vec());
/// assert_eq!(max_pool2d(&x, [2, 1])?.shape(), &[8, 1, 4, 8]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2d {
    kernel: Pair,
    stride: Option<Pair>,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
}

impl Pool2d {
    /// A `kernel` window (an int or (kH, kW)) with PyTorch's defaults: stride = kernel,
    /// padding 0, dilation 1, `ceil_mode` off, `count_include_pad` on.
    pub fn new(kernel: impl Into<Pair>) -> Pool2d {
        Pool2d {
            kernel: kernel.into(),
            stride: None,
            padding: Pair::new(0, 0),
            dilation: Pair::new(1, 1),
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }

    /// Step between windows: an int or (rows, columns). Default: the kernel size.
    pub fn stride(self, stride: impl Into<Pair>) -> Pool2d {
        Pool2d { stride: Some(stride.into()), ..self }
    }

    /// Implicit padding on both sides (−∞ for max, zeros for average), at most half the
    /// kernel: an int or (rows, columns). Default 0.
    pub fn padding(self, padding: impl Into<Pair>) -> Pool2d {
        Pool2d { padding: padding.into(), ..self }
    }

    /// Spacing between window elements (`max_pool2d` only): an int or (rows, columns).
    /// Default 1.
    pub fn dilation(self, dilation: impl Into<Pair>) -> Pool2d {
        Pool2d { dilation: dilation.into(), ..self }
    }

    /// Whether the output size rounds up, as PyTorch's `ceil_mode` (the last window must
    /// still start inside the input or its left padding). Default off.
    pub fn ceil_mode(self, ceil_mode: bool) -> Pool2d {
        Pool2d { ceil_mode, ..self }
    }

    /// Whether `avg_pool2d` divides by the window's area including the padding (on, the
    /// default) or by its in-bounds elements only.
    pub fn count_include_pad(self, count_include_pad: bool) -> Pool2d {
        Pool2d { count_include_pad, ..self }
    }

    /// `avg_pool2d` divides every window's sum by `divisor` (at least 1) instead of its
    /// size (PyTorch's `divisor_override`). Default: none.
    pub fn divisor_override(self, divisor: usize) -> Pool2d {
        Pool2d { divisor_override: Some(divisor), ..self }
    }

    /// What `avg_pool2d` divides a window's sum by.
    fn divisor(&self) -> Divisor {
        match (self.divisor_override, self.count_include_pad) {
            (Some(d), _) => Divisor::Override(d),
            (None, true) => Divisor::IncludePad,
            (None, false) => Divisor::ExcludePad,
        }
    }

    /// The window as `[kernel, stride, padding, dilation]`, checked as operator `op` reads
    /// it (`kind`: which pooling): no negative values, kernel, stride and dilation at least
    /// 1, padding at most half the kernel (PyTorch's rule), no dilation for an average and
    /// no `count_include_pad(false)` for a max.
    pub(crate) fn checked(&self, op: &'static str, kind: PoolKind) -> Result<[[usize; 2]; 4]> {
        let kernel = self.kernel.get(op, "kernel size")?;
        let stride = match self.stride {
            Some(s) => s.get(op, "stride")?,
            None => kernel,
        };
        let (padding, dilation) = (self.padding.get(op, "padding")?, self.dilation.get(op, "dilation")?);
        if kernel.contains(&0) {
            return Err(Error::argument(op, format!("kernel size must be at least 1, got {kernel:?}")));
        }
        if stride.contains(&0) {
            return Err(Error::argument(op, format!("stride must be at least 1, got {stride:?}")));
        }
        if dilation.contains(&0) {
            return Err(Error::argument(op, format!("dilation must be at least 1, got {dilation:?}")));
        }
        if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
            return Err(Error::argument(
                op,
                format!("padding {padding:?} must be at most half the kernel size {kernel:?} (as in PyTorch)"),
            ));
        }
        match kind {
            PoolKind::Max if !self.count_include_pad || self.divisor_override.is_some() => {
                return Err(Error::argument(
                    op,
                    "count_include_pad and divisor_override apply to avg_pool2d only; max_pool2d has no divisor",
                ));
            }
            PoolKind::Avg if self.divisor_override == Some(0) => {
                return Err(Error::argument(op, "divisor_override must not be zero (as in PyTorch)"));
            }
            PoolKind::Avg if dilation != [1, 1] => {
                return Err(Error::argument(op, format!("avg_pool2d has no dilation (as in PyTorch), got {dilation:?}")));
            }
            _ => {}
        }
        Ok([kernel, stride, padding, dilation])
    }
}

/// Which pooling reads a [`Pool2d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolKind {
    Max,
    Avg,
}

macro_rules! pool_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Pool2d {
            /// A window of this size with stride = kernel (PyTorch's `kernel_size` alone).
            fn from(kernel: $t) -> Pool2d {
                Pool2d::new(kernel)
            }
        }
    )*};
}
pool_from!(i32, usize, [i32; 2], [usize; 2], (i32, i32), (usize, usize), Pair);

/// The output length of a pooling along one axis of length `len` (PyTorch's
/// `pooling_output_shape`): `(len + 2p − d(k−1) − 1)/s + 1`, rounded down, or up with
/// `ceil_mode` — then less one if the last window would start past the input and its left
/// padding. `None` when no window fits.
/// `Err` (naming `op` and the attribute) when the padded length or the dilated window's
/// extent overflows an index.
fn out_len(op: &'static str, len: usize, k: usize, s: usize, p: usize, d: usize, ceil_mode: bool) -> Result<Option<usize>> {
    let padded = p.checked_mul(2).and_then(|v| v.checked_add(len)).filter(|&v| v <= isize::MAX as usize);
    let padded = padded.ok_or_else(|| Error::argument(op, format!("padding {p} overflows the padded input length ({len} + 2·{p})")))?;
    let extent = (k - 1).checked_mul(d).and_then(|v| v.checked_add(1));
    let extent = extent.ok_or_else(|| Error::argument(op, format!("dilation {d} with a window of {k} overflows the window's extent")))?;
    let Some(span) = padded.checked_sub(extent) else { return Ok(None) };
    let out = if ceil_mode { span.div_ceil(s) + 1 } else { span / s + 1 };
    Ok(Some(if ceil_mode && (out - 1) * s >= len + p { out - 1 } else { out }))
}

/// Validates a pooling (`kind`) with `options` over `x` and returns its geometry and the
/// image dimensions.
fn geometry(op: &'static str, kind: PoolKind, x: &[usize], options: &Pool2d) -> Result<(Geometry, Images)> {
    let im = Images::of(op, x, &[x])?;
    let [kernel, stride, padding, dilation] = options.checked(op, kind)?;
    let ceil_mode = options.ceil_mode;
    let (h, w) = (im.h, im.w);
    if h == 0 || w == 0 {
        // PyTorch too allows only the batch and channel dims to be empty.
        return Err(Error::shape(op, &[x], format!("the input image must be at least 1×1, got {h}×{w}")));
    }
    let (Some(oh), Some(ow)) = (
        out_len(op, h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)?,
        out_len(op, w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)?,
    ) else {
        return Err(Error::shape(
            op,
            &[x],
            format!("the output would be empty: the window ({kernel:?}, dilation {dilation:?}) is larger than the padded input (padding {padding:?})"),
        ));
    };
    let geo = Geometry {
        planes: im.n * im.c,
        h,
        w,
        kh: kernel[0],
        kw: kernel[1],
        sh: stride[0],
        sw: stride[1],
        ph: padding[0],
        pw: padding[1],
        dh: dilation[0],
        dw: dilation[1],
        oh,
        ow,
    };
    Ok((geo, im))
}

/// Max over each window of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`), PyTorch's
/// `F.max_pool2d`: the window, stride, padding (−∞), dilation (a dilated window skips
/// `dilation − 1` elements) and `ceil_mode` (the output size rounds up; the last window
/// must start inside the input or its left padding) are a [`Pool2d`], or just the kernel
/// size (stride = kernel). Ties keep the first maximum in window scan order and NaN wins,
/// as PyTorch's CPU kernel does. Backward: `g` scatter-added at the saved winner's index.
///
/// # Examples
///
/// ```
/// use om_ops::{max_pool2d, Pool2d, Tensor};
/// let x = Tensor::randn(&[8, 1, 8, 8])?;
/// assert_eq!(max_pool2d(&x, 2)?.shape(), &[8, 1, 4, 4]); // F.max_pool2d(x, 2)
/// assert_eq!(max_pool2d(&x, [2, 1])?.shape(), &[8, 1, 4, 8]);
/// let p = Pool2d::new(3).stride(2).padding(1).ceil_mode(true);
/// assert_eq!(max_pool2d(&x, p)?.shape(), &[8, 1, 5, 5]);
/// assert_eq!(max_pool2d(&x, Pool2d::new(2).stride(1).dilation(2))?.shape(), &[8, 1, 6, 6]);
/// assert!(max_pool2d(&x, Pool2d::new(2).padding(2)).is_err()); // padding > kernel / 2
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [idx: owned], attrs = [options: Pool2d])]
pub mod max_pool2d {
    use super::*;

    pub fn forward(x: &Tensor, options: impl Into<Pool2d>) -> Result<(Tensor, Owned)> {
        let options: Pool2d = options.into();
        x.expect_f32(NAME, "x")?;
        let (geo, im) = geometry(NAME, PoolKind::Max, x.shape(), &options)?;
        if i32::try_from(geo.h * geo.w).is_err() {
            return Err(Error::argument(NAME, format!("an image of {}×{} is too large for i32 indices", geo.h, geo.w)));
        }
        let out_shape = im.shape(im.c, [geo.oh, geo.ow]);
        let settings = Compute::settings();
        let mut y = None;
        let idx = x.try_with_f32(|xs| {
            Tensor::build_i32(&out_shape, |idx| {
                y = Some(Tensor::build_f32(&out_shape, |y| {
                    kernel::max_pool2d(settings, &geo, xs, y, idx);
                    Ok(())
                })?);
                Ok(())
            })
        })??;
        let y = y.expect("built with the indices");
        Ok((y, Owned { idx }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let (geo, _) = geometry(NAME, PoolKind::Max, shape, &r.options)?;
        let settings = Compute::settings();
        let dx = g.try_with_f32(|gs| {
            r.idx().try_with_i32(|idx| {
                Tensor::build_f32(shape, |dx| {
                    kernel::max_pool2d_backward(settings, &geo, gs, idx, dx);
                    Ok(())
                })
            })
        })???;
        d.x(dx);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("k3_s2_pad1", vec![Case::distinct_input(&[2, 2, 7, 7], 1)], |x| {
                super::max_pool2d(&x[0], Pool2d::new(3).stride(2).padding(1))
            }),
            Case::new("overlapping_k3_s1", vec![Case::distinct_input(&[1, 2, 5, 5], 2)], |x| {
                super::max_pool2d(&x[0], Pool2d::new(3).stride(1))
            }),
            Case::new("k2x3_s1x2_pad_dilation", vec![Case::distinct_input(&[1, 3, 6, 7], 3)], |x| {
                super::max_pool2d(&x[0], Pool2d::new([2, 3]).stride([1, 2]).padding(1).dilation([2, 1]))
            }),
            Case::new("nhwc_permuted_input", vec![Case::distinct_input(&[2, 6, 5, 2], 4)], |x| {
                super::max_pool2d(&crate::permute(&x[0], [0, 3, 1, 2])?, Pool2d::new(2).stride([2, 1]).padding([0, 1]))
            }),
            Case::new("ceil_k2_s2_odd_sizes", vec![Case::distinct_input(&[1, 2, 7, 9], 5)], |x| {
                super::max_pool2d(&x[0], Pool2d::new(2).ceil_mode(true))
            }),
            Case::new("ceil_k3_s2_pad1", vec![Case::distinct_input(&[2, 2, 8, 8], 6)], |x| {
                super::max_pool2d(&x[0], Pool2d::new(3).stride(2).padding(1).ceil_mode(true))
            }),
            Case::new("ceil_k2x3_s3x2_pad_dilation", vec![Case::distinct_input(&[1, 2, 8, 7], 7)], |x| {
                super::max_pool2d(&x[0], Pool2d::new([2, 3]).stride([3, 2]).padding(1).dilation([2, 1]).ceil_mode(true))
            }),
            Case::new("unbatched", vec![Case::distinct_input(&[3, 6, 5], 8)], |x| {
                super::max_pool2d(&x[0], Pool2d::new(2).stride([1, 2]).padding([1, 0]))
            }),
            // The short form: an int is the kernel size, with stride = kernel.
            Case::new("short_form_k2", vec![Case::distinct_input(&[2, 3, 6, 4], 10)], |x| super::max_pool2d(&x[0], 2)),
            Case::new("unbatched_ceil_permuted", vec![Case::distinct_input(&[5, 6, 2], 9)], |x| {
                super::max_pool2d(&crate::permute(&x[0], [2, 0, 1])?, Pool2d::new([3, 2]).stride(2).padding(1).ceil_mode(true))
            }),
        ]
    }
}

/// Average over each window of `x` `[N, C, H, W]` (or unbatched `[C, H, W]`), PyTorch's
/// `F.avg_pool2d`: the window, stride, padding (zeros), `ceil_mode`, `count_include_pad`
/// and `divisor_override` are a [`Pool2d`] (dilation must be 1), or just the kernel size
/// (stride = kernel). `ceil_mode` rounds the output size up (the last window must start
/// inside the input or its left padding); the divisor is the override if given, else the
/// window's area inside the padded input when `count_include_pad` (the kernel area, less
/// where a `ceil_mode` window reaches past the padding), else the number of in-bounds
/// elements; sums in f64 in window scan order. Backward: each output's `g/count` added to
/// every in-bounds element of its window.
///
/// # Examples
///
/// ```
/// use om_ops::{avg_pool2d, Pool2d, Tensor};
/// let x = Tensor::ones(&[8, 1, 8, 8])?;
/// assert_eq!(avg_pool2d(&x, 2)?.shape(), &[8, 1, 4, 4]); // F.avg_pool2d(x, 2)
/// // F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False): ones stay ones.
/// let p = Pool2d::new(3).stride(2).padding(1).count_include_pad(false);
/// assert!(avg_pool2d(&x, p)?.to_vec().iter().all(|&v| v == 1.0));
/// // With the padding counted, a corner window holds 4 ones in 9 places.
/// let corner = avg_pool2d(&x, Pool2d::new(3).stride(2).padding(1))?.to_vec()[0];
/// assert!((corner - 4.0 / 9.0).abs() < 1e-6);
/// // F.avg_pool2d(x, 2, divisor_override=3): four ones over 3.
/// let y = avg_pool2d(&x, Pool2d::new(2).divisor_override(3))?.to_vec();
/// assert!((y[0] - 4.0 / 3.0).abs() < 1e-6);
/// assert!(avg_pool2d(&x, Pool2d::new(2).dilation(2)).is_err()); // no dilation in PyTorch
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(attrs = [options: Pool2d])]
pub mod avg_pool2d {
    use super::*;

    pub fn forward(x: &Tensor, options: impl Into<Pool2d>) -> Result<Tensor> {
        let options: Pool2d = options.into();
        x.expect_f32(NAME, "x")?;
        let (geo, im) = geometry(NAME, PoolKind::Avg, x.shape(), &options)?;
        let out_shape = im.shape(im.c, [geo.oh, geo.ow]);
        let settings = Compute::settings();
        x.try_with_f32(|xs| {
            Tensor::build_f32(&out_shape, |y| {
                kernel::avg_pool2d(settings, &geo, options.divisor(), xs, y);
                Ok(())
            })
        })?
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let shape = &r.input_shapes[0];
        let (geo, _) = geometry(NAME, PoolKind::Avg, shape, &r.options)?;
        let settings = Compute::settings();
        let dx = g.try_with_f32(|gs| {
            Tensor::build_f32(shape, |dx| {
                kernel::avg_pool2d_backward(settings, &geo, r.options.divisor(), gs, dx);
                Ok(())
            })
        })??;
        d.x(dx);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let mut c = Vec::new();
        for (cip, tag) in [(true, "include_pad"), (false, "exclude_pad")] {
            c.push(Case::new(format!("k3_s2_pad1_{tag}"), vec![Case::input(&[2, 2, 6, 5], -1.0, 1.0, 1)], move |x| {
                super::avg_pool2d(&x[0], Pool2d::new(3).stride(2).padding(1).count_include_pad(cip))
            }));
            c.push(Case::new(format!("k2x3_s3x1_pad_{tag}"), vec![Case::input(&[1, 3, 7, 6], -1.0, 1.0, 2)], move |x| {
                super::avg_pool2d(&x[0], Pool2d::new([2, 3]).stride([3, 1]).padding(1).count_include_pad(cip))
            }));
            c.push(Case::new(format!("nhwc_permuted_input_{tag}"), vec![Case::input(&[1, 5, 6, 2], -1.0, 1.0, 3)], move |x| {
                super::avg_pool2d(
                    &crate::permute(&x[0], [0, 3, 1, 2])?,
                    Pool2d::new([3, 2]).stride([1, 2]).padding(1).count_include_pad(cip),
                )
            }));
            c.push(Case::new(format!("ceil_k3_s2_pad1_{tag}"), vec![Case::input(&[1, 2, 8, 7], -1.0, 1.0, 4)], move |x| {
                super::avg_pool2d(&x[0], Pool2d::new(3).stride(2).padding(1).ceil_mode(true).count_include_pad(cip))
            }));
            c.push(Case::new(format!("ceil_k2x3_s3x2_{tag}"), vec![Case::input(&[2, 2, 7, 8], -1.0, 1.0, 5)], move |x| {
                super::avg_pool2d(&x[0], Pool2d::new([2, 3]).stride([3, 2]).padding([0, 1]).ceil_mode(true).count_include_pad(cip))
            }));
            c.push(Case::new(format!("ceil_k2_s2_odd_sizes_{tag}"), vec![Case::input(&[1, 3, 5, 7], -1.0, 1.0, 6)], move |x| {
                super::avg_pool2d(&x[0], Pool2d::new(2).ceil_mode(true).count_include_pad(cip))
            }));
            c.push(Case::new(format!("unbatched_ceil_{tag}"), vec![Case::input(&[3, 5, 6], -1.0, 1.0, 7)], move |x| {
                super::avg_pool2d(&x[0], Pool2d::new(2).padding(1).ceil_mode(true).count_include_pad(cip))
            }));
        }
        // divisor_override, on the dedicated 2×2 shape and on a padded ceil_mode window.
        c.push(Case::new("divisor_override_k2", vec![Case::input(&[1, 2, 6, 4], -1.0, 1.0, 9)], |x| {
            super::avg_pool2d(&x[0], Pool2d::new(2).divisor_override(3))
        }));
        c.push(Case::new("divisor_override_ceil_k3_s2_pad1", vec![Case::input(&[1, 2, 7, 6], -1.0, 1.0, 10)], |x| {
            super::avg_pool2d(&x[0], Pool2d::new(3).stride(2).padding(1).ceil_mode(true).divisor_override(5))
        }));
        // The short form: an int pair is the kernel size, with stride = kernel.
        c.push(Case::new("short_form_k2x3", vec![Case::input(&[2, 2, 6, 7], -1.0, 1.0, 8)], |x| super::avg_pool2d(&x[0], [2, 3])));
        c
    }
}

/// Mean over each image plane: `[N, C, H, W]` → `[N, C, 1, 1]` (or unbatched `[C, H, W]` →
/// `[C, 1, 1]`; PyTorch's `adaptive_avg_pool2d(x, 1)`), as reshape, mean over the last axis,
/// reshape.
/// Backward: through `reshape` and `mean`.
///
/// # Examples
///
/// ```
/// use om_ops::{global_avg_pool2d, Tensor};
/// // One image, two channels of 2×2.
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0], &[1, 2, 2, 2])?;
/// let y = global_avg_pool2d(&x)?;
/// assert_eq!(y.shape(), [1, 2, 1, 1]);
/// assert_eq!(y.to_vec(), [2.5, 25.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod global_avg_pool2d {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        x.expect_f32(NAME, "x")?;
        let s = x.shape();
        let im = Images::of(NAME, s, &[s])?;
        if im.h * im.w == 0 {
            return Err(Error::shape(NAME, &[s], "the mean of an empty image plane is undefined"));
        }
        let m = crate::mean(&crate::reshape(x, [im.n as isize, im.c as isize, (im.h * im.w) as isize])?, Some(-1), false)?;
        crate::reshape(&m, im.shape(im.c, [1, 1]).iter().map(|&d| d as isize).collect::<om_core::layout::SignedDims>())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new("contiguous", vec![Case::input(&[2, 3, 4, 5], -1.0, 1.0, 1)], |x| super::global_avg_pool2d(&x[0])),
            Case::new("nhwc_permuted_input", vec![Case::input(&[2, 3, 4, 3], -1.0, 1.0, 2)], |x| {
                super::global_avg_pool2d(&crate::permute(&x[0], [0, 3, 1, 2])?)
            }),
            Case::new("unbatched", vec![Case::input(&[3, 4, 5], -1.0, 1.0, 3)], |x| super::global_avg_pool2d(&x[0])),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::tests::{assert_bit_identical, oracle, output_and_gradient_bits, scaled_error};
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::compute::{Compute, Mode};

    fn pool_params(data: &std::collections::BTreeMap<String, Tensor>, name: &str) -> Vec<usize> {
        data[&format!("{name}.params")].to_vec_i32().iter().map(|&v| v as usize).collect()
    }

    #[test]
    fn forward_matches_pytorch_in_both_modes() {
        let data = oracle();
        for mode in [Mode::Fast, Mode::Exact] {
            Compute::set_mode(mode);
            let mut checked = 0;
            for name in data.keys().filter_map(|k| k.strip_suffix(".params")) {
                let x = &data[&format!("{name}.x")];
                let want = &data[&format!("{name}.y")];
                let p = pool_params(&data, name);
                let y = if name.starts_with("maxpool") {
                    let y =
                        max_pool2d(x, Pool2d::new([p[0], p[1]]).stride([p[2], p[3]]).padding([p[4], p[5]]).dilation([p[6], p[7]])).unwrap();
                    // The saved indices equal PyTorch's `return_indices`.
                    let rec =
                        max_pool2d::forward(x, Pool2d::new([p[0], p[1]]).stride([p[2], p[3]]).padding([p[4], p[5]]).dilation([p[6], p[7]]))
                            .unwrap();
                    assert_eq!(rec.1.idx.to_vec_i32(), data[&format!("{name}.idx")].to_vec_i32(), "{name}: indices");
                    y
                } else if name.starts_with("avgpool") {
                    avg_pool2d(x, Pool2d::new([p[0], p[1]]).stride([p[2], p[3]]).padding([p[4], p[5]]).count_include_pad(p[6] != 0))
                        .unwrap()
                } else if name.starts_with("gap") {
                    global_avg_pool2d(x).unwrap()
                } else {
                    continue;
                };
                let err = scaled_error(&y, want);
                eprintln!("{name} ({mode}): scaled error {err:.3e}");
                assert!(err <= 1e-5, "{name} ({mode}): scaled error {err:e}");
                checked += 1;
            }
            assert!(checked >= 5, "the oracle file holds the pooling cases");
        }
        Compute::set_mode(Mode::Fast);
    }

    #[test]
    fn ceil_mode_and_unbatched_pooling_match_pytorch_with_gradients() {
        let o = Oracle::load_file("conv_pool", "tools/oracle_conv_pool.py");
        let names: Vec<&str> = o.names().filter_map(|k| k.strip_suffix("_params")).filter(|k| k.starts_with("pool_")).collect();
        assert!(names.len() >= 19, "the oracle file holds the ceil-mode and unbatched pooling cases");
        both_modes(|| {
            for name in &names {
                let p: Vec<usize> = o.get(&format!("{name}_params")).to_vec_i32().iter().map(|&v| v as usize).collect();
                let x = o.get(&format!("{name}_x"));
                let (kernel, stride, padding, dilation, ceil) = ([p[1], p[2]], [p[3], p[4]], [p[5], p[6]], [p[7], p[8]], p[9] != 0);
                let y = match p[0] {
                    0 => max_pool2d(&x, Pool2d::new(kernel).stride(stride).padding(padding).dilation(dilation).ceil_mode(ceil)),
                    1 => avg_pool2d(&x, Pool2d::new(kernel).stride(stride).padding(padding).ceil_mode(ceil).count_include_pad(p[10] != 0)),
                    _ => global_avg_pool2d(&x),
                }
                .unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                o.check_grads(name, &y, &[("x", &x)]);
            }
        });
    }

    /// `ceil_mode` and unbatched pooling, on the general and the dedicated 2×2 loops.
    fn ceil_and_unbatched_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[2, 3, 9, 11], 5).unwrap().requires_grad().unwrap();
        let u = Tensor::randn_with_seed(&[3, 7, 8], 6).unwrap().requires_grad().unwrap();
        let a = max_pool2d(&x, Pool2d::new(3).stride(2).padding(1).ceil_mode(true)).unwrap();
        let a = avg_pool2d(&a, Pool2d::new(2).ceil_mode(true).count_include_pad(false)).unwrap();
        let b = max_pool2d(&u, Pool2d::new(2).ceil_mode(true)).unwrap();
        let b = avg_pool2d(&b, Pool2d::new([3, 2]).stride([2, 1]).padding(1).ceil_mode(true)).unwrap();
        let y = crate::add(&global_avg_pool2d(&a).unwrap(), &global_avg_pool2d(&b).unwrap()).unwrap();
        output_and_gradient_bits(&y, &[&x, &u])
    }

    #[test]
    fn ceil_mode_and_unbatched_exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("ceil-mode/unbatched pooling", &[2, 3], ceil_and_unbatched_bits);
    }

    #[test]
    fn max_pool_ties_keep_the_first_and_nan_wins() {
        let x = Tensor::from_vec(vec![1.0, 3.0, 3.0, 0.0, 2.0, f32::NAN, 5.0, 1.0], &[1, 1, 2, 4]).unwrap();
        let (y, owned) = max_pool2d::forward(&x, Pool2d::new([1, 3]).stride(1)).unwrap();
        assert_eq!(owned.idx.to_vec_i32(), vec![1, 1, 5, 5]);
        let y = y.to_vec();
        assert_eq!(&y[..2], &[3.0, 3.0]);
        assert!(y[2].is_nan() && y[3].is_nan());
    }
}
