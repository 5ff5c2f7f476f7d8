//! Convolutions: `conv2d` (groups, stride, asymmetric padding, dilation, optional bias) and
//! its adjoint `conv_transpose2d`, both on the canonical-order GEMM through im2col/col2im
//! (`om_core::kernels::conv`; the layout and the accumulation order are in
//! `docs/ops-conv.md`). The two are adjoints with one weight, so they share their kernels and
//! gradient blocks (`kernel_output`, `gradients`): `conv_transpose2d`'s forward is
//! `conv2d`'s input gradient, and its input gradient is `conv2d`'s forward.

use crate::image::Images;
use om_core::compute::{Compute, Settings};
use om_core::kernels::conv::{
    channel_sums, conv2d_backward_input, conv2d_backward_weight, conv2d_backward_weight_bias, conv2d_forward, conv_transpose2d_forward,
    ConvGeom,
};
use om_core::layout::Dims;
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

// ===== options =====

/// A size along the two image axes (height, width), as PyTorch's `int or (int, int)`
/// arguments: `3` is `[3, 3]`, `[2, 3]` is 2 rows by 3 columns. Integer literals convert
/// (`i32` or `usize`, scalars, arrays and tuples); a negative value is an `Error::Argument`
/// when the operator reads it.
///
/// ```
/// use om_ops::Pair;
/// assert_eq!(Pair::from(3), Pair::from([3usize, 3]));
/// assert_eq!(Pair::from((2, 3)), Pair::from([2, 3]));
/// assert_eq!(Pair::from([2, 3]).get("max_pool2d", "stride")?, [2, 3]);
/// assert!(Pair::from(-1).get("max_pool2d", "stride").is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pair([i64; 2]);

impl Pair {
    /// The pair `[h, w]`.
    pub const fn new(h: usize, w: usize) -> Pair {
        const fn sat(v: usize) -> i64 {
            if v > i64::MAX as usize {
                i64::MAX
            } else {
                v as i64
            }
        }
        Pair([sat(h), sat(w)])
    }

    /// The pair as `[h, w]`; an `Error::Argument` naming `op` and `what` if a value is negative.
    pub fn get(self, op: &'static str, what: &str) -> Result<[usize; 2]> {
        match self.0 {
            [h, w] if h >= 0 && w >= 0 => Ok([h as usize, w as usize]),
            v => Err(Error::argument(op, format!("{what} must not be negative, got {v:?}"))),
        }
    }
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Zeros added around an image (top, left, bottom, right), as PyTorch's `padding` of
/// `conv2d`: `1` on every side, `[h, w]` rows on top and bottom and columns on left and
/// right, `[top, left, bottom, right]` (what `F.pad` then `conv2d` does), or
/// [`Padding2d::same`] (PyTorch's `padding='same'`). Integer literals convert (`i32` or
/// `usize`); a negative value is an `Error::Argument` when the operator reads it.
///
/// ```
/// use om_ops::{conv2d, Conv2dOptions, Padding2d, Tensor};
/// let x = Tensor::randn(&[1, 1, 6, 6])?;
/// let w = Tensor::randn(&[1, 1, 3, 4])?;
/// let pad = |p: Padding2d| conv2d(&x, &w, None, Conv2dOptions::default().padding(p)).map(|y| y.shape().to_vec());
/// assert_eq!(pad(1.into())?, [1, 1, 6, 5]);
/// assert_eq!(pad([1, 2].into())?, [1, 1, 6, 7]);
/// assert_eq!(pad([1, 0, 2, 1].into())?, [1, 1, 7, 4]);
/// assert_eq!(pad(Padding2d::same())?, [1, 1, 6, 6]); // (left 1, right 2 for the width-4 kernel)
/// assert!(pad((-1).into()).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Padding2d(Sides);

/// What a [`Padding2d`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Sides {
    /// (top, left, bottom, right), checked for negative values when read.
    Given([i64; 4]),
    /// PyTorch's `'same'`.
    Same,
}

impl Padding2d {
    /// PyTorch's `padding='same'`: the output has the input's size (stride 1 only); each
    /// axis gets `d·(k − 1)` zeros in all, half (rounded down) before and the rest after,
    /// as PyTorch splits an odd total.
    pub const fn same() -> Padding2d {
        Padding2d(Sides::Same)
    }

    /// PyTorch's `padding='valid'`: no padding (the default).
    pub const fn valid() -> Padding2d {
        Padding2d(Sides::Given([0; 4]))
    }

    /// The padding as `[top, left, bottom, right]` for a `kernel` with `dilation` and
    /// `stride`; an `Error::Argument` naming `op` for a negative value, or for `'same'`
    /// with a stride other than 1 (as PyTorch).
    fn resolve(self, op: &'static str, kernel: [usize; 2], dilation: [usize; 2], stride: [usize; 2]) -> Result<[usize; 4]> {
        match self.0 {
            Sides::Given(p) if p.iter().any(|&v| v < 0) => Err(Error::argument(op, format!("padding must not be negative, got {p:?}"))),
            Sides::Given(p) => Ok(p.map(|v| v as usize)),
            Sides::Same if stride != [1, 1] => Err(Error::argument(
                op,
                format!("padding 'same' is not supported for strided convolutions (as in PyTorch), got stride {stride:?}"),
            )),
            Sides::Same => {
                let total = [dilated_extent(op, kernel[0], dilation[0])? - 1, dilated_extent(op, kernel[1], dilation[1])? - 1];
                Ok([total[0] / 2, total[1] / 2, total[0] - total[0] / 2, total[1] - total[1] / 2])
            }
        }
    }
}

impl std::fmt::Debug for Padding2d {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Sides::Given(p) => write!(f, "{p:?}"),
            Sides::Same => write!(f, "same"),
        }
    }
}

/// An attribute value as `i64`: a `usize` above `i64::MAX` (such as `1 << 63`) saturates,
/// so it stays a huge size the geometry refuses by name rather than turning negative.
#[inline]
fn wide<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

macro_rules! spatial_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Pair {
            fn from(v: $t) -> Pair {
                Pair([wide(v); 2])
            }
        }
        impl From<[$t; 2]> for Pair {
            fn from([h, w]: [$t; 2]) -> Pair {
                Pair([wide(h), wide(w)])
            }
        }
        impl From<($t, $t)> for Pair {
            fn from((h, w): ($t, $t)) -> Pair {
                Pair([wide(h), wide(w)])
            }
        }
        impl From<$t> for Padding2d {
            fn from(v: $t) -> Padding2d {
                Padding2d(Sides::Given([wide(v); 4]))
            }
        }
        impl From<[$t; 2]> for Padding2d {
            fn from([h, w]: [$t; 2]) -> Padding2d {
                Padding2d(Sides::Given([wide(h), wide(w), wide(h), wide(w)]))
            }
        }
        impl From<($t, $t)> for Padding2d {
            fn from((h, w): ($t, $t)) -> Padding2d {
                Padding2d(Sides::Given([wide(h), wide(w), wide(h), wide(w)]))
            }
        }
        impl From<[$t; 4]> for Padding2d {
            fn from(p: [$t; 4]) -> Padding2d {
                Padding2d(Sides::Given(p.map(|v| wide(v))))
            }
        }
    )*};
}
spatial_from_int!(i32, usize);

impl From<Pair> for Padding2d {
    fn from(Pair([h, w]): Pair) -> Padding2d {
        Padding2d(Sides::Given([h, w, h, w]))
    }
}

/// PyTorch's keyword arguments of `F.conv2d` (and of `nn.Conv2d` beyond its channel
/// counts, kernel size and `bias`), with PyTorch's defaults: stride 1, padding 0, dilation
/// 1, groups 1. Each builder takes an int or a pair ([`Pair`]); padding also four sides
/// ([`Padding2d`]).
///
/// ```
/// use om_ops::{conv2d, Conv2dOptions, Tensor};
/// let x = Tensor::randn(&[2, 4, 8, 8])?;
/// let w = Tensor::randn(&[6, 2, 3, 3])?;
/// // F.conv2d(x, w, stride=2, padding=1, groups=2)
/// let y = conv2d(&x, &w, None, Conv2dOptions::default().stride(2).padding(1).groups(2))?;
/// assert_eq!(y.shape(), &[2, 6, 4, 4]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    stride: Pair,
    padding: Padding2d,
    dilation: Pair,
    groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: Pair::new(1, 1), padding: Padding2d::valid(), dilation: Pair::new(1, 1), groups: 1 }
    }
}

impl Conv2dOptions {
    /// Step between windows: an int or (rows, columns). Default 1.
    pub fn stride(self, stride: impl Into<Pair>) -> Self {
        Conv2dOptions { stride: stride.into(), ..self }
    }

    /// Zeros around the input: an int, (rows, columns) on both sides, (top, left, bottom,
    /// right), or [`Padding2d::same`]. Default 0.
    pub fn padding(self, padding: impl Into<Padding2d>) -> Self {
        Conv2dOptions { padding: padding.into(), ..self }
    }

    /// Spacing between kernel taps: an int or (rows, columns). Default 1.
    pub fn dilation(self, dilation: impl Into<Pair>) -> Self {
        Conv2dOptions { dilation: dilation.into(), ..self }
    }

    /// Channel groups (both channel counts must divide by it). Default 1.
    pub fn groups(self, groups: usize) -> Self {
        Conv2dOptions { groups, ..self }
    }

    /// The channel groups.
    pub(crate) fn groups_count(&self) -> usize {
        self.groups
    }

    /// The options as `(stride, padding, dilation, groups)`, stride and dilation checked for
    /// negative values (the padding is resolved with the kernel size, in [`geometry`]).
    fn get(&self, op: &'static str) -> Result<([usize; 2], Padding2d, [usize; 2], usize)> {
        Ok((self.stride.get(op, "stride")?, self.padding, self.dilation.get(op, "dilation")?, self.groups))
    }
}

/// PyTorch's keyword arguments of `F.conv_transpose2d` (and of `nn.ConvTranspose2d` beyond
/// its channel counts, kernel size and `bias`), with PyTorch's defaults: stride 1, padding
/// 0 (symmetric: rows/columns cropped from each side of the full output), output padding 0
/// (rows/columns added at the bottom/right), dilation 1, groups 1. Each builder but
/// `groups` takes an int or a pair ([`Pair`]).
///
/// ```
/// use om_ops::{conv_transpose2d, ConvTranspose2dOptions, Tensor};
/// let x = Tensor::randn(&[1, 4, 5, 5])?;
/// let w = Tensor::randn(&[4, 3, 3, 3])?;
/// // F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
/// let o = ConvTranspose2dOptions::default().stride(2).padding(1).output_padding(1);
/// assert_eq!(conv_transpose2d(&x, &w, None, o)?.shape(), &[1, 3, 10, 10]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dOptions {
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    dilation: Pair,
    groups: usize,
}

impl Default for ConvTranspose2dOptions {
    fn default() -> Self {
        let (zero, one) = (Pair::new(0, 0), Pair::new(1, 1));
        ConvTranspose2dOptions { stride: one, padding: zero, output_padding: zero, dilation: one, groups: 1 }
    }
}

impl ConvTranspose2dOptions {
    /// Step of the convolution this is the adjoint of: an int or (rows, columns). Default 1.
    pub fn stride(self, stride: impl Into<Pair>) -> Self {
        ConvTranspose2dOptions { stride: stride.into(), ..self }
    }

    /// Rows/columns cropped from each side of the full output. Default 0.
    pub fn padding(self, padding: impl Into<Pair>) -> Self {
        ConvTranspose2dOptions { padding: padding.into(), ..self }
    }

    /// Rows/columns added at the bottom/right of the output (smaller than the stride or the
    /// dilation). Default 0.
    pub fn output_padding(self, output_padding: impl Into<Pair>) -> Self {
        ConvTranspose2dOptions { output_padding: output_padding.into(), ..self }
    }

    /// Spacing between kernel taps: an int or (rows, columns). Default 1.
    pub fn dilation(self, dilation: impl Into<Pair>) -> Self {
        ConvTranspose2dOptions { dilation: dilation.into(), ..self }
    }

    /// Channel groups (both channel counts must divide by it). Default 1.
    pub fn groups(self, groups: usize) -> Self {
        ConvTranspose2dOptions { groups, ..self }
    }

    /// The channel groups.
    pub(crate) fn groups_count(&self) -> usize {
        self.groups
    }

    /// The options as `(stride, padding, output_padding, dilation, groups)`, checked for
    /// negative values.
    #[allow(clippy::type_complexity)]
    fn get(&self, op: &'static str) -> Result<([usize; 2], [usize; 2], [usize; 2], [usize; 2], usize)> {
        Ok((
            self.stride.get(op, "stride")?,
            self.padding.get(op, "padding")?,
            self.output_padding.get(op, "output padding")?,
            self.dilation.get(op, "dilation")?,
            self.groups,
        ))
    }
}

/// The shapes of a convolution's `x`, `w` and (if given) `bias`, kept inline.
pub(crate) type ArgShapes<'a> = om_core::inline_vec::InlineVec<&'a [usize], 3>;

/// The checks every convolution shares: `x` a batch `[N, C, H, W]` or an unbatched image
/// `[C, H, W]`, `w` of rank 4 (`w_layout` names its expected layout for the message), and
/// stride, dilation and groups at least 1. Returns the argument shapes, for later error
/// messages, and `x`'s dimensions.
pub(crate) fn check_common<'a>(
    op: &'static str,
    [x, w]: [&'a [usize]; 2],
    bias: Option<&'a [usize]>,
    w_layout: &str,
    stride: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<(ArgShapes<'a>, Images)> {
    let mut shapes = ArgShapes::from_slice(&[x, w]);
    if let Some(b) = bias {
        shapes.push(b);
    }
    let images = Images::of(op, x, &shapes)?;
    if w.len() != 4 {
        return Err(Error::shape(op, &shapes, format!("`w` must be {w_layout} (rank 4), got rank {}", w.len())));
    }
    if stride.contains(&0) {
        return Err(Error::argument(op, format!("stride must be at least 1, got {stride:?}")));
    }
    if dilation.contains(&0) {
        return Err(Error::argument(op, format!("dilation must be at least 1, got {dilation:?}")));
    }
    if groups == 0 {
        return Err(Error::argument(op, "groups must be at least 1, got 0"));
    }
    Ok((shapes, images))
}

/// The argument shapes of one convolution call: `x`, `w` and the optional `bias` (`None`
/// when absent).
#[derive(Clone, Copy)]
pub(crate) struct ConvShapes<'a> {
    pub(crate) x: &'a [usize],
    pub(crate) w: &'a [usize],
    pub(crate) bias: Option<&'a [usize]>,
}

/// Validates the shapes and attributes of a convolution and returns its geometry and `x`'s
/// dimensions.
pub(crate) fn geometry(op: &'static str, ConvShapes { x, w, bias }: ConvShapes, options: &Conv2dOptions) -> Result<(ConvGeom, Images)> {
    let (stride, padding, dilation, groups) = options.get(op)?;
    let (shapes, im) = check_common(op, [x, w], bias, "[O, C/groups, kH, kW]", stride, dilation, groups)?;
    let Images { n, c, h, w: wd, .. } = im;
    let (o, kh, kw) = (w[0], w[2], w[3]);
    if !c.is_multiple_of(groups) {
        return Err(Error::shape(op, &shapes, format!("{c} input channels are not divisible by groups = {groups}")));
    }
    if !o.is_multiple_of(groups) {
        return Err(Error::shape(op, &shapes, format!("{o} output channels are not divisible by groups = {groups}")));
    }
    if w[1] != c / groups {
        return Err(Error::shape(
            op,
            &shapes,
            format!("`w` has {} input channels per group, expected C/groups = {c}/{groups} = {}", w[1], c / groups),
        ));
    }
    if kh == 0 || kw == 0 {
        return Err(Error::shape(op, &shapes, format!("the kernel must be at least 1×1, got {kh}×{kw}")));
    }
    if let Some(b) = bias {
        if b != [o] {
            return Err(Error::shape(op, &shapes, format!("`bias` must have shape [{o}], got {b:?}")));
        }
    }
    let padding = padding.resolve(op, [kh, kw], dilation, stride)?;
    let [pt, pl, pb, pr] = padding;
    let (eh, ew) = (dilated_extent(op, kh, dilation[0])?, dilated_extent(op, kw, dilation[1])?);
    let (ph, pw) = (padded_len(op, h, pt, pb)?, padded_len(op, wd, pl, pr)?);
    if eh > ph || ew > pw {
        return Err(Error::shape(
            op,
            &shapes,
            format!(
                "the dilated kernel ({eh}×{ew}) is larger than the padded input ({ph}×{pw}; padding top, left, bottom, right = {padding:?})"
            ),
        ));
    }
    let (oh, ow) = ((ph - eh) / stride[0] + 1, (pw - ew) / stride[1] + 1);
    let geo =
        ConvGeom { n, c, h, w: wd, o, groups, kh, kw, sh: stride[0], sw: stride[1], pt, pl, dh: dilation[0], dw: dilation[1], oh, ow };
    Ok((geo, im))
}

/// Checks that the arguments of convolution `op` are `f32`.
fn expect_f32_args(op: &'static str, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<()> {
    x.expect_f32(op, "x")?;
    w.expect_f32(op, "w")?;
    if let Some(b) = bias {
        b.expect_f32(op, "bias")?;
    }
    Ok(())
}

/// The tensor of `shape` that `kernel(settings, a, b, c, out)` writes from the values of
/// `a`, `b` and the optional `c` (each read in row-major order).
fn kernel_output(
    shape: &[usize],
    [a, b]: [&Tensor; 2],
    c: Option<&Tensor>,
    kernel: impl FnOnce(Settings, &[f32], &[f32], Option<&[f32]>, &mut [f32]) -> Result<()>,
) -> Result<Tensor> {
    let settings = Compute::settings();
    a.try_with_f32(|a| {
        b.try_with_f32(|b| Tensor::try_with_f32_opt(c, |c| Tensor::build_f32(shape, |out| kernel(settings, a, b, c, out))))
    })???
}

/// Which side of the convolution `geo` an operator is: `conv2d` maps the convolution's input
/// to its output, `conv_transpose2d` its output to its input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Conv,
    Transposed,
}

/// The gradients `[dx, dw, dbias]` of the operator on `side` of the convolution `geo`
/// with input `x`, weight `w` and output gradient `g` (`shapes`: the operator's input
/// shapes), each only where `needs` says. `dx` is the other side's map of `g` (col2im of
/// `W_gᵀ·g`, or the convolution of `g`), `dW` the convolution's weight gradient with the
/// convolution's input and output gradient (`x`, `g`, or swapped), `dbias = Σ g` per channel.
fn gradients(side: Side, geo: &ConvGeom, [x, w, g]: [&Tensor; 3], shapes: &[Dims], needs: [bool; 3]) -> Result<[Option<Tensor>; 3]> {
    let g = &g.try_to_contiguous()?;
    let dx = match needs[0] {
        false => None,
        true => Some(kernel_output(&shapes[0], [g, w], None, |st, g, w, _, dx| match side {
            Side::Conv => conv2d_backward_input(st, geo, g, w, dx),
            Side::Transposed => conv2d_forward(st, geo, g, w, None, dx),
        })?),
    };
    // A convolution's `dbias` (the sums of `g`) comes with `dW` when both are needed: the
    // weight gradient sums each image's `g` while it is in cache (the same bits).
    let with_bias = side == Side::Conv && needs[2];
    let mut db = None;
    let dw = match needs[1] {
        false => None,
        true => {
            let (input, out_grad) = if side == Side::Conv { (x, g) } else { (g, x) };
            Some(kernel_output(&shapes[1], [input, out_grad], None, |st, a, b, _, dw| match with_bias {
                false => conv2d_backward_weight(st, geo, a, b, dw),
                true => {
                    db = Some(Tensor::build_f32(&[geo.o], |db| conv2d_backward_weight_bias(st, geo, a, b, dw, db))?);
                    Ok(())
                }
            })?)
        }
    };
    let db = match needs[2] {
        false => None,
        true if db.is_some() => db,
        true => {
            let (channels, plane) = if side == Side::Conv { (geo.o, geo.p()) } else { (geo.c, geo.h * geo.w) };
            Some(g.try_with_f32(|gs| {
                Tensor::build_f32(&[channels], |db| channel_sums(Compute::settings(), geo.n, channels, plane, gs, db))
            })??)
        }
    };
    Ok([dx, dw, db])
}

/// Emits the `[dx, dw, dbias]` of [`gradients`] through an operator's `Grads`.
macro_rules! emit_gradients {
    ($d:expr, $grads:expr) => {{
        let [dx, dw, db] = $grads;
        if let Some(t) = dx {
            $d.x(t);
        }
        if let Some(t) = dw {
            $d.w(t);
        }
        if let Some(t) = db {
            $d.bias(t);
        }
    }};
}

/// The bias shape of a record's input shapes (an absent bias has an empty shape).
fn bias_shape(shapes: &[Dims]) -> Option<&[usize]> {
    if shapes[2].is_empty() {
        None
    } else {
        Some(shapes[2].as_slice())
    }
}

/// 2-d cross-correlation (PyTorch's `F.conv2d`) of `x` `[N, C, H, W]` (or an unbatched
/// `[C, H, W]`, giving `[O, OH, OW]`) with `w` `[O, C/groups, kH, kW]` plus an optional
/// `bias` `[O]`; stride, padding (zeros: an int, a pair, or top, left, bottom, right),
/// dilation and groups in [`Conv2dOptions`] (PyTorch's defaults with `Default`).
/// Backward: `dW` per image in item order, `dx` by col2im of `W_gᵀ·g`, `dbias = Σ g`.
///
/// # Examples
///
/// ```
/// use om_ops::{conv2d, Conv2dOptions, Tensor};
/// let x = Tensor::randn(&[8, 1, 8, 8])?;
/// let w = Tensor::randn(&[4, 1, 3, 3])?;
/// let b = Tensor::zeros(&[4])?;
/// assert_eq!(conv2d(&x, &w, Some(&b), Conv2dOptions::default())?.shape(), &[8, 4, 6, 6]);
/// assert_eq!(conv2d(&x, &w, None, Conv2dOptions::default().padding(1))?.shape(), &[8, 4, 8, 8]);
/// let o = Conv2dOptions::default().stride([2, 1]).padding([1, 0, 2, 1]).dilation(2);
/// assert_eq!(conv2d(&x, &w, None, o)?.shape(), &[8, 4, 4, 5]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, w], attrs = [options: Conv2dOptions])]
pub mod conv2d {
    use super::*;

    pub fn forward(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, options: Conv2dOptions) -> Result<Tensor> {
        expect_f32_args(NAME, x, w, bias)?;
        let (geo, im) = geometry(NAME, ConvShapes { x: x.shape(), w: w.shape(), bias: bias.map(|b| b.shape()) }, &options)?;
        kernel_output(&im.shape(geo.o, [geo.oh, geo.ow]), [x, w], bias, |st, x, w, b, y| conv2d_forward(st, &geo, x, w, b, y))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = &r.input_shapes;
        let (geo, _) = geometry(NAME, ConvShapes { x: &s[0], w: &s[1], bias: bias_shape(s) }, &r.options)?;
        let needs = [d.needs_x(), d.needs_w(), d.needs_bias()];
        emit_gradients!(d, super::gradients(Side::Conv, &geo, [r.x(), r.w(), g], s, needs)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new(
                "bias_pad1",
                vec![Case::input(&[2, 3, 5, 5], -1.0, 1.0, 1), Case::input(&[4, 3, 3, 3], -1.0, 1.0, 2), Case::input(&[4], -1.0, 1.0, 3)],
                |x| super::conv2d(&x[0], &x[1], Some(&x[2]), Conv2dOptions::default().padding(1)),
            ),
            Case::new("groups_dilation", vec![Case::input(&[1, 4, 6, 6], -1.0, 1.0, 4), Case::input(&[4, 2, 2, 2], -1.0, 1.0, 5)], |x| {
                super::conv2d(&x[0], &x[1], None, Conv2dOptions::default().dilation([2, 1]).groups(2))
            }),
            Case::new(
                "stride2_asymmetric_padding",
                vec![Case::input(&[2, 2, 5, 6], -1.0, 1.0, 6), Case::input(&[3, 2, 3, 2], -1.0, 1.0, 7), Case::input(&[3], -1.0, 1.0, 8)],
                |x| super::conv2d(&x[0], &x[1], Some(&x[2]), Conv2dOptions::default().stride(2).padding([1, 0, 2, 1])),
            ),
            Case::new(
                "depthwise_multiplier2",
                vec![Case::input(&[1, 3, 5, 5], -1.0, 1.0, 9), Case::input(&[6, 1, 3, 3], -1.0, 1.0, 10), Case::input(&[6], -1.0, 1.0, 11)],
                |x| super::conv2d(&x[0], &x[1], Some(&x[2]), Conv2dOptions::default().padding(1).groups(3)),
            ),
            Case::new(
                "nhwc_permuted_input",
                vec![
                    Case::input(&[2, 4, 5, 3], -1.0, 1.0, 12),
                    Case::input(&[2, 3, 2, 2], -1.0, 1.0, 13),
                    Case::input(&[2], -1.0, 1.0, 14),
                ],
                |x| {
                    super::conv2d(
                        &crate::permute(&x[0], [0, 3, 1, 2])?,
                        &x[1],
                        Some(&x[2]),
                        Conv2dOptions::default().stride([1, 2]).padding([0, 1, 1, 0]),
                    )
                },
            ),
            Case::new(
                "transposed_weight",
                vec![Case::input(&[1, 2, 4, 4], -1.0, 1.0, 15), Case::input(&[2, 2, 3, 3], -1.0, 1.0, 16)],
                |x| super::conv2d(&x[0], &crate::transpose(&x[1], 0, 1)?, None, Conv2dOptions::default().padding([0, 1])),
            ),
            Case::new(
                "unbatched_groups_stride",
                vec![Case::input(&[4, 5, 6], -1.0, 1.0, 17), Case::input(&[6, 2, 3, 2], -1.0, 1.0, 18), Case::input(&[6], -1.0, 1.0, 19)],
                |x| {
                    super::conv2d(
                        &x[0],
                        &x[1],
                        Some(&x[2]),
                        Conv2dOptions::default().stride([2, 1]).padding([1, 0, 1, 1]).dilation([1, 2]).groups(2),
                    )
                },
            ),
            // PyTorch's padding='same' with an even kernel width: 1 column left, 2 right.
            Case::new(
                "same_padding_even_kernel",
                vec![Case::input(&[1, 2, 5, 6], -1.0, 1.0, 22), Case::input(&[3, 2, 3, 4], -1.0, 1.0, 23)],
                |x| super::conv2d(&x[0], &x[1], None, Conv2dOptions::default().padding(Padding2d::same()).dilation([2, 1])),
            ),
            Case::new(
                "unbatched_permuted_input",
                vec![Case::input(&[5, 4, 3], -1.0, 1.0, 20), Case::input(&[2, 3, 2, 2], -1.0, 1.0, 21)],
                |x| super::conv2d(&crate::permute(&x[0], [2, 0, 1])?, &x[1], None, Conv2dOptions::default().padding([1, 1, 0, 0])),
            ),
        ]
    }
}

/// The extent `d·(k − 1) + 1` of a kernel of `k` taps with dilation `d`, or an
/// `Error::Argument` naming `op` and the dilation when it overflows an index.
fn dilated_extent(op: &'static str, k: usize, d: usize) -> Result<usize> {
    (k - 1)
        .checked_mul(d)
        .and_then(|v| v.checked_add(1))
        .filter(|&v| v <= isize::MAX as usize)
        .ok_or_else(|| Error::argument(op, format!("dilation {d} with a kernel of {k} taps overflows the window's extent")))
}

/// `len + lo + hi` (an input length with its padding), or an `Error::Argument` naming `op`
/// and the padding when it overflows an index.
fn padded_len(op: &'static str, len: usize, lo: usize, hi: usize) -> Result<usize> {
    len.checked_add(lo)
        .and_then(|v| v.checked_add(hi))
        .filter(|&v| v <= isize::MAX as usize)
        .ok_or_else(|| Error::argument(op, format!("padding ({lo}, {hi}) overflows the padded input length ({len} + {lo} + {hi})")))
}

/// Validates a transposed convolution and returns the geometry of the convolution it is
/// the adjoint of: that convolution's input is the transposed convolution's output
/// (`c = Cout`, `h × w = OH × OW`) and its output is the transposed convolution's input
/// (`o = Cin`, `oh × ow = H × W`); both share the weight `[Cin, Cout/groups, kH, kW]`.
pub(crate) fn transpose_geometry(
    op: &'static str,
    ConvShapes { x, w, bias }: ConvShapes,
    options: &ConvTranspose2dOptions,
) -> Result<(ConvGeom, Images)> {
    let (stride, padding, output_padding, dilation, groups) = options.get(op)?;
    let (shapes, im) = check_common(op, [x, w], bias, "[Cin, Cout/groups, kH, kW]", stride, dilation, groups)?;
    for i in 0..2 {
        if output_padding[i] >= stride[i].max(dilation[i]) {
            return Err(Error::argument(
                op,
                format!(
                    "output padding must be smaller than either stride or dilation (as in PyTorch), got output padding {output_padding:?}, stride {stride:?}, dilation {dilation:?}"
                ),
            ));
        }
    }
    let Images { n, c: cin, h, w: wd, .. } = im;
    let (kh, kw) = (w[2], w[3]);
    if !cin.is_multiple_of(groups) {
        return Err(Error::shape(op, &shapes, format!("{cin} input channels are not divisible by groups = {groups}")));
    }
    if w[0] != cin {
        return Err(Error::shape(op, &shapes, format!("`w` has {} input channels (dimension 0), but `x` has {cin}", w[0])));
    }
    if kh == 0 || kw == 0 {
        return Err(Error::shape(op, &shapes, format!("the kernel must be at least 1×1, got {kh}×{kw}")));
    }
    let cout = w[1] * groups;
    if let Some(b) = bias {
        if b != [cout] {
            return Err(Error::shape(op, &shapes, format!("`bias` must have shape [Cout] = [{cout}], got {b:?}")));
        }
    }
    if h == 0 || wd == 0 {
        return Err(Error::shape(op, &shapes, format!("the input image must be at least 1×1, got {h}×{wd}")));
    }
    // (H − 1)·s − 2p + d·(k − 1) + output_padding + 1, in signed arithmetic (every term
    // of usize values, so no i128 product or sum overflows).
    let out = |len: usize, s: usize, p: usize, k: usize, d: usize, op: usize| {
        (len as i128 - 1) * s as i128 - 2 * p as i128 + d as i128 * (k as i128 - 1) + op as i128 + 1
    };
    let oh = out(h, stride[0], padding[0], kh, dilation[0], output_padding[0]);
    let ow = out(wd, stride[1], padding[1], kw, dilation[1], output_padding[1]);
    if oh < 1 || ow < 1 {
        return Err(Error::shape(
            op,
            &shapes,
            format!("the output would be {oh}×{ow}: padding {padding:?} crops more than the transposed convolution produces"),
        ));
    }
    // The convolution this is the transpose of reads the output padded by `padding` on
    // each side with the dilated kernel: every such size must be an index.
    let fits = |v: i128, p: usize| v.checked_add(2 * p as i128).is_some_and(|t| t <= isize::MAX as i128);
    if !fits(oh, padding[0]) || !fits(ow, padding[1]) {
        return Err(Error::argument(
            op,
            format!(
                "the output size ({oh}×{ow}, padding {padding:?}) overflows: stride {stride:?}, dilation {dilation:?} or the kernel ({kh}×{kw}) are too large"
            ),
        ));
    }
    dilated_extent(op, kh, dilation[0])?;
    dilated_extent(op, kw, dilation[1])?;
    let (oh, ow) = (oh as usize, ow as usize);
    let geo = ConvGeom {
        n,
        c: cout,
        h: oh,
        w: ow,
        o: cin,
        groups,
        kh,
        kw,
        sh: stride[0],
        sw: stride[1],
        pt: padding[0],
        pl: padding[1],
        dh: dilation[0],
        dw: dilation[1],
        oh: h,
        ow: wd,
    };
    Ok((geo, im))
}

/// 2-d transposed convolution (PyTorch's `F.conv_transpose2d`) of `x` `[N, Cin, H, W]` (or
/// an unbatched `[Cin, H, W]`, giving an unbatched result) with `w`
/// `[Cin, Cout/groups, kH, kW]` plus an optional `bias` `[Cout]`; in
/// [`ConvTranspose2dOptions`], `padding` is PyTorch's (symmetric: it crops `padding`
/// rows/columns from each side of the full output) and `output_padding` adds rows/columns
/// at the bottom/right. Output `[N, Cout, (H−1)·s − 2p + d·(k−1) + output_padding + 1, ..]`.
/// Forward: GEMM + col2im. Backward: `dx = conv2d(g, W)`, `dW` per image in item order
/// with the roles of `x` and `g` swapped, `dbias = Σ g`.
///
/// # Examples
///
/// ```
/// use om_ops::{conv_transpose2d, ConvTranspose2dOptions, Tensor};
/// let x = Tensor::randn(&[2, 4, 3, 3])?;
/// let w = Tensor::randn(&[4, 6, 2, 2])?;
/// assert_eq!(conv_transpose2d(&x, &w, None, ConvTranspose2dOptions::default())?.shape(), &[2, 6, 4, 4]);
/// let up = ConvTranspose2dOptions::default().stride(2);
/// assert_eq!(conv_transpose2d(&x, &w, None, up)?.shape(), &[2, 6, 6, 6]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, w], attrs = [options: ConvTranspose2dOptions])]
pub mod conv_transpose2d {
    use super::*;

    pub fn forward(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, options: ConvTranspose2dOptions) -> Result<Tensor> {
        expect_f32_args(NAME, x, w, bias)?;
        let (geo, im) = transpose_geometry(NAME, ConvShapes { x: x.shape(), w: w.shape(), bias: bias.map(|b| b.shape()) }, &options)?;
        kernel_output(&im.shape(geo.c, [geo.h, geo.w]), [x, w], bias, |st, x, w, b, y| conv_transpose2d_forward(st, &geo, x, w, b, y))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = &r.input_shapes;
        let (geo, _) = transpose_geometry(NAME, ConvShapes { x: &s[0], w: &s[1], bias: bias_shape(s) }, &r.options)?;
        let needs = [d.needs_x(), d.needs_w(), d.needs_bias()];
        emit_gradients!(d, super::gradients(Side::Transposed, &geo, [r.x(), r.w(), g], s, needs)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![
            Case::new(
                "bias_pad1",
                vec![Case::input(&[2, 3, 3, 3], -1.0, 1.0, 1), Case::input(&[3, 2, 3, 3], -1.0, 1.0, 2), Case::input(&[2], -1.0, 1.0, 3)],
                |x| super::conv_transpose2d(&x[0], &x[1], Some(&x[2]), ConvTranspose2dOptions::default().padding(1)),
            ),
            Case::new(
                "stride2_output_padding",
                vec![Case::input(&[1, 2, 3, 4], -1.0, 1.0, 4), Case::input(&[2, 3, 3, 3], -1.0, 1.0, 5), Case::input(&[3], -1.0, 1.0, 6)],
                |x| {
                    super::conv_transpose2d(
                        &x[0],
                        &x[1],
                        Some(&x[2]),
                        ConvTranspose2dOptions::default().stride(2).padding(1).output_padding(1),
                    )
                },
            ),
            Case::new(
                "groups_dilation_no_bias",
                vec![Case::input(&[1, 4, 3, 3], -1.0, 1.0, 7), Case::input(&[4, 2, 2, 3], -1.0, 1.0, 8)],
                |x| {
                    super::conv_transpose2d(
                        &x[0],
                        &x[1],
                        None,
                        ConvTranspose2dOptions::default().stride([2, 1]).padding([1, 0]).output_padding(1).dilation(2).groups(2),
                    )
                },
            ),
            Case::new(
                "depthwise_stride2_asymmetric",
                vec![Case::input(&[2, 3, 3, 2], -1.0, 1.0, 9), Case::input(&[3, 1, 2, 3], -1.0, 1.0, 10), Case::input(&[3], -1.0, 1.0, 11)],
                |x| {
                    super::conv_transpose2d(
                        &x[0],
                        &x[1],
                        Some(&x[2]),
                        ConvTranspose2dOptions::default().stride([2, 3]).padding([0, 1]).output_padding([1, 2]).groups(3),
                    )
                },
            ),
            Case::new(
                "nhwc_permuted_strided_input",
                vec![
                    Case::input(&[1, 3, 6, 2], -1.0, 1.0, 12),
                    Case::input(&[2, 2, 2, 2], -1.0, 1.0, 13),
                    Case::input(&[2], -1.0, 1.0, 14),
                ],
                |x| {
                    let xv = crate::slice(&crate::permute(&x[0], [0, 3, 1, 2])?, 3, 0, 6, 2)?;
                    super::conv_transpose2d(&xv, &x[1], Some(&x[2]), ConvTranspose2dOptions::default().stride(2).output_padding([0, 1]))
                },
            ),
            Case::new(
                "transposed_weight",
                vec![Case::input(&[1, 2, 3, 3], -1.0, 1.0, 15), Case::input(&[3, 2, 2, 2], -1.0, 1.0, 16)],
                |x| {
                    super::conv_transpose2d(
                        &x[0],
                        &crate::transpose(&x[1], 0, 1)?,
                        None,
                        ConvTranspose2dOptions::default().stride([1, 2]).padding([0, 1]).output_padding([0, 1]),
                    )
                },
            ),
            Case::new(
                "unbatched_groups_stride2",
                vec![Case::input(&[4, 3, 2], -1.0, 1.0, 17), Case::input(&[4, 1, 3, 2], -1.0, 1.0, 18), Case::input(&[2], -1.0, 1.0, 19)],
                |x| {
                    super::conv_transpose2d(
                        &x[0],
                        &x[1],
                        Some(&x[2]),
                        ConvTranspose2dOptions::default().stride(2).padding([1, 0]).output_padding(1).groups(2),
                    )
                },
            ),
        ]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::compute::{KernelPath, Mode, Settings};
    use std::collections::BTreeMap;

    pub(crate) fn oracle() -> BTreeMap<String, Tensor> {
        om_core::io::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ops/conv_pool.safetensors"))
            .expect("testdata/ops/conv_pool.safetensors")
    }

    /// `max|ours − torch| / max|torch|`.
    pub(crate) fn scaled_error(ours: &Tensor, want: &Tensor) -> f64 {
        assert_eq!(ours.shape(), want.shape());
        let (a, b) = (ours.to_vec(), want.to_vec());
        let scale = b.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs()));
        let worst = a.iter().zip(&b).fold(0.0f64, |m, (&p, &q)| m.max((p as f64 - q as f64).abs()));
        worst / scale.max(f64::MIN_POSITIVE)
    }

    fn run_all(data: &BTreeMap<String, Tensor>) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for name in data.keys().filter_map(|k| k.strip_suffix(".params")).filter(|k| k.starts_with("conv")) {
            let p: Vec<usize> = data[&format!("{name}.params")].to_vec_i32().iter().map(|&v| v as usize).collect();
            let bias = data.get(&format!("{name}.bias"));
            let y = conv2d(
                &data[&format!("{name}.x")],
                &data[&format!("{name}.w")],
                bias,
                Conv2dOptions::default().stride([p[0], p[1]]).padding([p[2], p[3], p[4], p[5]]).dilation([p[6], p[7]]).groups(p[8]),
            )
            .unwrap();
            out.push((name.to_string(), y));
        }
        out
    }

    #[test]
    fn forward_matches_pytorch_in_both_modes() {
        let data = oracle();
        for mode in [Mode::Fast, Mode::Exact] {
            Compute::set_mode(mode);
            let results = run_all(&data);
            assert!(results.len() >= 4, "the oracle file holds the conv cases");
            for (name, y) in results {
                let err = scaled_error(&y, &data[&format!("{name}.y")]);
                eprintln!("conv2d {name} ({mode}): scaled error {err:.3e}");
                assert!(err <= 1e-5, "{name} ({mode}): scaled error {err:e}");
            }
        }
        Compute::set_mode(Mode::Fast);
    }

    /// The oracle of `conv_transpose2d` and `resize2d` (`tools/oracle_spatial.py`).
    pub(crate) fn spatial_oracle() -> Oracle {
        Oracle::load_file("spatial", "tools/oracle_spatial.py")
    }

    /// The `usize` attributes of oracle case `name`.
    pub(crate) fn params(o: &Oracle, name: &str) -> Vec<usize> {
        o.get(&format!("{name}_params")).to_vec_i32().iter().map(|&v| v as usize).collect()
    }

    /// The oracle cases whose names start with `prefix`.
    pub(crate) fn case_names(o: &Oracle, prefix: &str) -> Vec<String> {
        o.names().filter_map(|k| k.strip_suffix("_params")).filter(|k| k.starts_with(prefix)).map(str::to_string).collect()
    }

    #[test]
    fn conv_transpose2d_matches_pytorch() {
        let o = spatial_oracle();
        let names = case_names(&o, "ct_");
        assert!(names.len() >= 6, "the oracle file holds the transposed-conv cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let (x, w) = (o.get(&format!("{name}_x")), o.get(&format!("{name}_w")));
                let bias = o.names().any(|k| k == format!("{name}_bias")).then(|| o.get(&format!("{name}_bias")));
                let y = conv_transpose2d(
                    &x,
                    &w,
                    bias.as_ref(),
                    ConvTranspose2dOptions::default()
                        .stride([p[0], p[1]])
                        .padding([p[2], p[3]])
                        .output_padding([p[4], p[5]])
                        .dilation([p[6], p[7]])
                        .groups(p[8]),
                )
                .unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                let mut inputs = vec![("x", &x), ("w", &w)];
                if let Some(b) = &bias {
                    inputs.push(("bias", b));
                }
                o.check_grads(name, &y, &inputs);
            }
        });
    }

    #[test]
    fn unbatched_conv2d_matches_pytorch_with_gradients() {
        let o = Oracle::load_file("conv_pool", "tools/oracle_conv_pool.py");
        let names = case_names(&o, "uconv_");
        assert!(names.len() >= 2, "the oracle file holds the unbatched conv cases");
        both_modes(|| {
            for name in &names {
                let p = params(&o, name);
                let (x, w) = (o.get(&format!("{name}_x")), o.get(&format!("{name}_w")));
                let bias = o.has(&format!("{name}_bias")).then(|| o.get(&format!("{name}_bias")));
                let y = conv2d(
                    &x,
                    &w,
                    bias.as_ref(),
                    Conv2dOptions::default().stride([p[0], p[1]]).padding([p[2], p[3], p[4], p[5]]).dilation([p[6], p[7]]).groups(p[8]),
                )
                .unwrap();
                assert_close(&format!("{name}_y"), &y, &o.get(&format!("{name}_y")));
                let mut inputs = vec![("x", &x), ("w", &w)];
                if let Some(b) = &bias {
                    inputs.push(("bias", b));
                }
                o.check_grads(name, &y, &inputs);
            }
        });
    }

    fn forward_backward_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[3, 4, 9, 8], 1).unwrap().requires_grad().unwrap();
        let w = Tensor::randn_with_seed(&[6, 2, 3, 3], 2).unwrap().requires_grad().unwrap();
        let b = Tensor::randn_with_seed(&[6], 3).unwrap().requires_grad().unwrap();
        let y = conv2d(&x, &w, Some(&b), Conv2dOptions::default().stride([2, 1]).padding([1, 2, 0, 1]).dilation([1, 2]).groups(2)).unwrap();
        output_and_gradient_bits(&y, &[&x, &w, &b])
    }

    /// Asserts that `bits` (the bits of a forward and backward run) are the same in exact
    /// mode on every kernel path and at 1 thread and each of `threads`, and in fast mode at
    /// every thread count (`what` names the operators for the message).
    pub(crate) fn assert_bit_identical(what: &str, threads: &[usize], bits: fn() -> Vec<u32>) {
        let reference = Compute::with(Settings { mode: Mode::Exact, threads: 1, path: KernelPath::Scalar }, bits);
        for path in KernelPath::supported() {
            for &t in [1].iter().chain(threads) {
                let got = Compute::with(Settings { mode: Mode::Exact, threads: t, path }, bits);
                assert!(got == reference, "exact {what} differs on {path} with {t} threads");
            }
        }
        let fast = Compute::with(Settings { mode: Mode::Fast, threads: 1, path: KernelPath::best() }, bits);
        for &t in threads {
            let got = Compute::with(Settings { mode: Mode::Fast, threads: t, path: KernelPath::best() }, bits);
            assert!(got == fast, "fast {what} differs with {t} threads");
        }
    }

    /// The bits of `y` and of the gradients of `inputs` after backpropagating a seeded `g`.
    pub(crate) fn output_and_gradient_bits(y: &Tensor, inputs: &[&Tensor]) -> Vec<u32> {
        let gy = Tensor::randn_with_seed(y.shape(), 4).unwrap();
        y.backward_with(Some(&gy), false).unwrap();
        let mut bits: Vec<u32> = y.to_vec().iter().map(|v| v.to_bits()).collect();
        for t in inputs {
            bits.extend(t.grad().unwrap().to_vec().iter().map(|v| v.to_bits()));
        }
        bits
    }

    #[test]
    fn exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("conv2d", &[2, 3], forward_backward_bits);
    }

    /// Unbatched images through both convolutions.
    fn unbatched_bits() -> Vec<u32> {
        let x = Tensor::randn_with_seed(&[4, 9, 8], 5).unwrap().requires_grad().unwrap();
        let w = Tensor::randn_with_seed(&[6, 2, 3, 3], 6).unwrap().requires_grad().unwrap();
        let wt = Tensor::randn_with_seed(&[6, 2, 2, 3], 7).unwrap().requires_grad().unwrap();
        let y = conv2d(&x, &w, None, Conv2dOptions::default().stride([2, 1]).padding([1, 2, 0, 1]).dilation([1, 2]).groups(2)).unwrap();
        let y = conv_transpose2d(
            &y,
            &wt,
            None,
            ConvTranspose2dOptions::default().stride([2, 1]).padding([1, 0]).output_padding([1, 0]).groups(2),
        )
        .unwrap();
        output_and_gradient_bits(&y, &[&x, &w, &wt])
    }

    #[test]
    fn unbatched_exact_mode_is_identical_on_every_path_and_thread_count() {
        assert_bit_identical("unbatched conv2d/conv_transpose2d", &[2, 3], unbatched_bits);
    }
}
