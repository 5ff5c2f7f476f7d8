//! The whole-tensor arithmetic the autograd engine (and `gradcheck`) needs: a private
//! contiguous copy, the sum of two equal-shape gradients, in-place accumulation, and
//! sum-to (undoing a broadcast). Each checks and allocates at the tensor level and runs
//! the slice kernels of `kernels::basic`.

use crate::error::{Error, Result};
use crate::kernels::basic;
use crate::layout::{broadcast_strides, contiguous_strides};
use crate::pool::F64Scratch;
use crate::tensor::Tensor;

/// A fresh contiguous `f32` copy with its own buffer (never aliasing `t`); an
/// [`Error::OutOfMemory`] if the copy cannot be allocated (a huge expanded view).
pub(crate) fn copy_contiguous(t: &Tensor) -> Result<Tensor> {
    t.try_with_f32(|s| {
        Tensor::build_f32(t.shape(), |out| {
            out.copy_from_slice(s);
            Ok(())
        })
    })?
}

/// `a + b` for two tensors of one shape, as a new contiguous tensor.
pub(crate) fn add_same_shape(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    debug_assert_eq!(a.shape(), b.shape());
    a.try_with_f32(|x| {
        b.try_with_f32(|y| {
            Tensor::build_f32(a.shape(), |out| {
                basic::add(crate::compute::Compute::settings().threads, x, y, out);
                Ok(())
            })
        })?
    })?
}

/// `dst += src` in place (equal shapes; `dst` contiguous).
pub(crate) fn add_assign(dst: &Tensor, src: &Tensor) -> Result<()> {
    if dst.shape() != src.shape() {
        return Err(Error::shape("add_assign", &[dst.shape(), src.shape()], "in-place add needs equal shapes"));
    }
    if dst.numel() == 0 {
        // Nothing to add (and `update_f32` refuses some fresh zero-size tensors as not contiguous).
        return Ok(());
    }
    if dst.shares_storage(src) {
        let c = copy_contiguous(src)?;
        return add_assign(dst, &c);
    }
    src.try_with_f32(|s| dst.update_f32("add_assign", |d| basic::add_assign(d, s)))?
}

/// Sums `g` over the dimensions a broadcast from `shape` added or expanded, giving a
/// contiguous tensor of `shape`. Each output is accumulated in f64 over the elements of
/// `g` in increasing row-major order and rounded once.
pub(crate) fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let n = crate::layout::numel(shape);
    let mut acc = F64Scratch::try_zeroed(n)?;
    let acc_s = acc.values();
    let target = broadcast_strides(shape, &contiguous_strides(shape), g.shape());
    let g = g.try_to_contiguous()?;
    g.try_with_f32(|src| basic::sum_to_f64(src, g.shape(), &target, acc_s))?;
    Tensor::build_f32(shape, |out| {
        basic::round_to_f32(acc_s, out);
        Ok(())
    })
}
