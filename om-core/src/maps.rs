//! Element-wise maps at the tensor level: [`unary`] and [`binary`] (a scalar closure, for
//! the few maps with no lane kernel) and [`unary_op`] and [`binary_op`] (the lane loops)
//! check their operands' dtypes, broadcast their shapes, read this thread's
//! [`Settings`](crate::compute::Settings) and allocate the contiguous output, then hand
//! slices and strides to the kernels of `kernels::elementwise`, which never see a tensor
//! or a global. [`over_gradient`] lets a backward rule write its result over its incoming
//! gradient's buffer when the engine's handle is the only one ([`binary_op_over_gradient`]:
//! ReLU's backward; the batch norm's in `om_ops`).

use crate::compute::{Compute, Mode};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::elementwise::{self as kernel, Operand};
use crate::kernels::lanes::{Binary, Src, Unary};
use crate::layout::{broadcast_shapes, broadcast_strides, Dims};
use crate::tensor::Tensor;

/// `out[i] = f(x[i])` as a new contiguous tensor of `x`'s shape (in exact mode a NaN
/// result is written as the canonical NaN `0x7FC00000`). Fails with `Error::DType` naming
/// `op` unless `x` is `f32`.
///
/// # Examples
///
/// ```
/// use om_core::{maps, Tensor};
/// let x = Tensor::from_vec(vec![1.0, 4.0], &[2])?;
/// assert_eq!(maps::unary("sqrt", &x, f32::sqrt)?.to_vec(), vec![1.0, 2.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn unary(op: &'static str, x: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
    let mode = Compute::mode();
    map1(op, x, |shape, x, out| kernel::unary_with(mode, shape, x, out, f))
}

/// `out[i] = f(a[i], b[i])` after broadcasting `a` and `b`, as a new contiguous tensor (in
/// exact mode a NaN result is written as the canonical NaN `0x7FC00000`). Fails with
/// `Error::DType` or `Error::Shape` naming `op` unless both are `f32` and broadcastable.
///
/// # Examples
///
/// ```
/// use om_core::{maps, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let b = Tensor::from_vec(vec![3.0], &[1])?;
/// assert_eq!(maps::binary("max", &a, &b, f32::max)?.to_vec(), vec![3.0, 3.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn binary(op: &'static str, a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Tensor> {
    let mode = Compute::mode();
    map2(op, a, b, |shape, a, b, out| kernel::binary_with(mode, shape, a, b, out, f))
}

/// `out[i] = op(x[i])` on the lane loops, as a new contiguous tensor of `x`'s shape. Fails
/// with `Error::DType` naming `name` unless `x` is `f32`.
///
/// # Examples
///
/// ```
/// use om_core::kernels::lanes::Unary;
/// use om_core::{maps, Tensor};
/// let x = Tensor::from_vec(vec![-1.0, 2.0], &[2])?;
/// assert_eq!(maps::unary_op("relu", &x, Unary::Relu)?.to_vec(), vec![0.0, 2.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn unary_op(name: &'static str, x: &Tensor, op: Unary) -> Result<Tensor> {
    let settings = Compute::settings();
    map1(name, x, |shape, x, out| kernel::unary_lanes(settings, shape, x, op, out))
}

/// `out[i] = op(a[i], b[i])` on the lane loops after broadcasting, as a new contiguous
/// tensor. Fails with `Error::DType` or `Error::Shape` naming `name` unless both operands
/// are `f32` and broadcastable.
///
/// # Examples
///
/// ```
/// use om_core::kernels::lanes::Binary;
/// use om_core::{maps, Tensor};
/// let a = Tensor::from_vec(vec![1.0, 2.0], &[2, 1])?;
/// let b = Tensor::from_vec(vec![10.0, 20.0], &[2])?;
/// assert_eq!(maps::binary_op("add", &a, &b, Binary::Add)?.to_vec(), vec![11.0, 21.0, 12.0, 22.0]);
/// assert!(maps::binary_op("add", &a, &Tensor::zeros(&[3, 1])?, Binary::Add).is_err());
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn binary_op(name: &'static str, a: &Tensor, b: &Tensor, op: Binary) -> Result<Tensor> {
    let settings = Compute::settings();
    map2(name, a, b, |shape, a, b, out| kernel::binary_lanes(settings, shape, a, b, op, out))
}

/// For a backward rule: runs `f` on the values of its incoming gradient `g`, for writing
/// its result over them, and returns a handle on that result, when `g` is a contiguous
/// `f32` tensor and the sole handle on its storage (the engine's, which it drops once the
/// rule has run); `None`, without running `f`, otherwise. In exact mode every NaN `f`
/// wrote is then made canonical, as [`Tensor::build_f32`] does for a new output. Writing
/// over `g` spares a new output's first touch: a fresh buffer is fetched into the cache
/// before it is written, `g` was just read (on the convnet's 4 MiB activations, one L3
/// round trip of three). Only for a rule's `g`: any other sole handle would see its values
/// change.
///
/// # Examples
///
/// ```
/// use om_core::{maps, Tensor};
/// // The sole handle: the result is written over its buffer.
/// let g = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let doubled = maps::over_gradient("double", &g, |v| {
///     v.iter_mut().for_each(|x| *x *= 2.0);
///     Ok(())
/// });
/// let doubled = doubled.expect("a sole handle")?;
/// assert!(doubled.shares_storage(&g));
/// assert_eq!(doubled.to_vec(), vec![2.0, 4.0]);
/// // A second handle could still read the values: left alone, `f` not run.
/// let kept = g.clone();
/// assert!(maps::over_gradient("double", &g, |_| Ok(())).is_none());
/// assert_eq!(kept.to_vec(), vec![2.0, 4.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn over_gradient(name: &'static str, g: &Tensor, f: impl FnOnce(&mut [f32]) -> Result<()>) -> Option<Result<Tensor>> {
    let exact = Compute::mode() == Mode::Exact;
    over_gradient_raw(name, g, |values| {
        f(values)?;
        if exact {
            kernel::canonicalise_nans(values);
        }
        Ok(())
    })
}

/// [`over_gradient`] without the NaN pass, for the lane loops (which write canonical NaNs
/// themselves).
fn over_gradient_raw(name: &'static str, g: &Tensor, f: impl FnOnce(&mut [f32]) -> Result<()>) -> Option<Result<Tensor>> {
    if !(g.is_sole_handle() && g.numel() > 0 && g.dtype() == DType::F32 && g.is_contiguous()) {
        return None;
    }
    let mut result = Ok(());
    if let Err(e) = g.update_f32(name, |values| result = f(values)) {
        return Some(Err(e));
    }
    Some(result.map(|()| g.clone()))
}

/// [`binary_op`] in a backward rule with the rule's incoming gradient `g` as `a`: written
/// over `g`'s buffer ([`over_gradient`]) when `b` is a contiguous `f32` tensor of `g`'s
/// shape, else a new tensor. The same bits either way.
///
/// # Examples
///
/// ```
/// use om_core::kernels::lanes::Binary;
/// use om_core::{maps, Tensor};
/// let y = Tensor::from_vec(vec![1.0, 0.0, 3.0], &[3])?;
/// let g = Tensor::from_vec(vec![0.5, 0.5, 0.5], &[3])?;
/// let kept = g.clone(); // a second handle: a new tensor, `g` unchanged
/// let dx = maps::binary_op_over_gradient("relu", &g, &y, Binary::ReluBackward)?;
/// assert_eq!((dx.to_vec(), kept.to_vec()), (vec![0.5, 0.0, 0.5], vec![0.5; 3]));
/// assert!(!dx.shares_storage(&g));
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn binary_op_over_gradient(name: &'static str, g: &Tensor, b: &Tensor, op: Binary) -> Result<Tensor> {
    if g.shape() == b.shape() && b.dtype() == DType::F32 && b.is_contiguous() {
        let settings = Compute::settings();
        let over = over_gradient_raw(name, g, |out| {
            b.with_storage_f32(|bs| kernel::binary_lanes_in_place(settings, out, Src::Contig(&bs[b.offset()..b.offset() + out.len()]), op));
            Ok(())
        });
        if let Some(result) = over {
            return result;
        }
    }
    binary_op(name, g, b, op)
}

/// A new contiguous tensor of `x`'s shape that `fill(shape, x, out)` writes, after checking
/// that `x` is `f32` (an `Error::DType` naming `op`).
fn map1(op: &'static str, x: &Tensor, fill: impl FnOnce(&[usize], Operand, &mut [f32])) -> Result<Tensor> {
    x.expect_f32(op, "x")?;
    let shape = Dims::from_slice(x.shape());
    x.with_storage_f32(|xs| {
        Tensor::build_f32_raw(&shape, |out| {
            fill(&shape, Operand { data: xs, strides: x.strides(), offset: x.offset() }, out);
            Ok(())
        })
    })
}

/// A new contiguous tensor of the broadcast shape of `a` and `b` that `fill(shape, a, b,
/// out)` writes (the operands' strides broadcast to it), after checking that both are
/// `f32` and broadcastable (an `Error::DType` or `Error::Shape` naming `op`).
fn map2(op: &'static str, a: &Tensor, b: &Tensor, fill: impl FnOnce(&[usize], Operand, Operand, &mut [f32])) -> Result<Tensor> {
    a.expect_f32(op, "a")?;
    b.expect_f32(op, "b")?;
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let sa = broadcast_strides(a.shape(), a.strides(), &shape);
    let sb = broadcast_strides(b.shape(), b.strides(), &shape);
    a.with_storage_f32(|xa| {
        b.with_storage_f32(|xb| {
            Tensor::build_f32_raw(&shape, |out| {
                let (oa, ob) =
                    (Operand { data: xa, strides: &sa, offset: a.offset() }, Operand { data: xb, strides: &sb, offset: b.offset() });
                fill(&shape, oa, ob, out);
                Ok(())
            })
        })
    })
}

/// [`gelu_with_slope`](crate::kernels::fused::gelu_with_slope) of a tensor: `[gelu(x), gelu'(x)]` as two new contiguous tensors
/// of `x`'s shape (a strided `x` is read through a contiguous copy, which changes no
/// value), with the current [`Compute`] settings. Fails if `x` is not `f32` (naming `op`)
/// or a buffer is refused.
///
/// # Examples
///
/// ```
/// use om_core::kernels::fused::GeluFormula;
/// use om_core::maps::gelu_with_slope_tensors;
/// use om_core::Tensor;
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let [y, slope] = gelu_with_slope_tensors("gelu", &x, GeluFormula::Erf)?;
/// assert_eq!(y.to_vec()[0], 0.0);
/// assert_eq!(slope.to_vec()[0], 0.5);
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn gelu_with_slope_tensors(op: &'static str, x: &Tensor, formula: crate::kernels::fused::GeluFormula) -> Result<[Tensor; 2]> {
    x.expect_f32(op, "x")?;
    let settings = Compute::settings();
    let x = if x.is_contiguous() { x.clone() } else { x.try_to_contiguous()? };
    let n = x.numel();
    x.with_storage_f32(|xs| {
        let xs = &xs[x.offset()..x.offset() + n];
        let mut slope_t = None;
        let y = Tensor::build_f32_raw(x.shape(), |y| {
            // Raw: `y` is written by the lane code (canonical NaNs in exact mode) and the
            // slope must keep its NaNs as computed (see `kernels::fused::gelu_with_slope`).
            slope_t = Some(Tensor::build_f32_raw(x.shape(), |slope| {
                crate::kernels::fused::gelu_with_slope(settings, formula, xs, y, slope);
                Ok(())
            })?);
            Ok(())
        })?;
        Ok([y, slope_t.expect("the slope is built with y")])
    })
}

#[cfg(test)]
mod tests {
    use super::{binary, binary_op_over_gradient, gelu_with_slope_tensors, over_gradient, unary};
    use crate::compute::{Compute, KernelPath, Mode, Settings};
    use crate::kernels::lanes::Binary;
    use crate::kernels::CANONICAL_NAN;
    use crate::tensor::Tensor;

    /// The closures' invalid operations (`sqrt(−1)`, `∞ − ∞`, `0·∞`; x86 makes the negative
    /// NaN `0xffc00000`) and a NaN input with another payload come out as the canonical NaN
    /// in exact mode.
    #[test]
    fn closures_write_the_canonical_nan_in_exact_mode() {
        let inf = f32::INFINITY;
        let odd_nan = f32::from_bits(0xffc0_0001);
        let x = Tensor::from_vec(vec![-1.0, 4.0, odd_nan, -inf], &[4]).unwrap();
        let b = Tensor::from_vec(vec![inf, 2.0, 1.0, 0.0], &[4]).unwrap();
        let exact = Settings { mode: Mode::Exact, threads: 1, path: KernelPath::Scalar };
        let (u, d, p) = Compute::with(exact, || {
            // A result written over a sole gradient handle gets the same NaN pass.
            let g = Tensor::from_vec(vec![0.0; 4], &[4]).unwrap();
            let over = over_gradient("test_over", &g, |v| {
                v.copy_from_slice(&[odd_nan, 1.0, f32::from_bits(0x7fc0_0123), 0.0]);
                Ok(())
            });
            let n = CANONICAL_NAN;
            assert_eq!(over.unwrap().unwrap().to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(), [n, 1f32.to_bits(), n, 0]);
            let u = unary("test_sqrt", &x, f32::sqrt).unwrap().to_vec();
            let d = binary("test_sub", &x, &b, |a, b| if a == -inf { a * b } else { b - b + a }).unwrap().to_vec();
            let p = binary("test_pow", &x, &b, crate::kernels::math::pow).unwrap().to_vec();
            (u, d, p)
        });
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let n = CANONICAL_NAN;
        assert_eq!(bits(&u), [n, 2f32.to_bits(), n, n]);
        assert_eq!(bits(&d), [n, 4f32.to_bits(), n, n]);
        // (−1)^∞ = 1 (C99).
        assert_eq!(bits(&p), [1f32.to_bits(), 16f32.to_bits(), n, 1f32.to_bits()]);
    }

    #[test]
    fn tensors_of_a_strided_input_and_a_wrong_dtype() {
        let x = Tensor::from_vec((0..12).map(|i| i as f32 * 0.5 - 3.0).collect(), &[3, 4]).unwrap();
        let xt = x.as_strided([4, 3], [1, 4], 0).unwrap();
        let [y, s] = gelu_with_slope_tensors("gelu", &xt, crate::kernels::fused::GeluFormula::Erf).unwrap();
        assert_eq!(y.shape(), &[4, 3]);
        let c = xt.try_to_contiguous().unwrap();
        let [y2, s2] = gelu_with_slope_tensors("gelu", &c, crate::kernels::fused::GeluFormula::Erf).unwrap();
        assert_eq!((y.to_vec(), s.to_vec()), (y2.to_vec(), s2.to_vec()));
        let ids = Tensor::from_vec_i32(vec![1, 2], &[2]).unwrap();
        let e = gelu_with_slope_tensors("gelu", &ids, crate::kernels::fused::GeluFormula::Erf).unwrap_err();
        assert!(e.to_string().contains("gelu"), "{e}");
    }

    /// A gradient is written over only while its handle is the only one on its storage: a
    /// second handle or a view keeps it unchanged (a new output), and the sole handle gets
    /// the same values in its own buffer.
    #[test]
    fn over_gradient_writes_only_a_sole_handle() {
        let g = Tensor::from_vec(vec![1.0, -2.0, 3.0], &[3]).unwrap();
        let y = Tensor::from_vec(vec![1.0, 0.5, -1.0], &[3]).unwrap();
        for other in [g.clone(), g.as_strided([2], [1], 1).unwrap()] {
            let out = binary_op_over_gradient("t", &g, &y, Binary::ReluBackward).unwrap();
            assert!(!out.shares_storage(&g) && !out.shares_storage(&other));
            assert_eq!((g.to_vec(), out.to_vec()), (vec![1.0, -2.0, 3.0], vec![1.0, -2.0, 0.0]));
        }
        let out = binary_op_over_gradient("t", &g, &y, Binary::ReluBackward).unwrap();
        assert!(out.shares_storage(&g));
        assert_eq!(out.to_vec(), vec![1.0, -2.0, 0.0]);
    }
}
