//! The few whole-tensor kernels the engine itself needs: a private contiguous copy, the
//! sum of two equal-shape gradients, in-place accumulation, and sum-to (undoing a
//! broadcast, accumulated in f64 in increasing element order and rounded once).

use crate::error::{Error, Result};
use crate::layout::{broadcast_strides, contiguous_strides, for_each_row};
use crate::pool::F64Scratch;
use crate::tensor::Tensor;

/// A fresh contiguous `f32` copy with its own buffer (never aliasing `t`); an
/// [`Error::OutOfMemory`] if the copy cannot be allocated (a huge expanded view).
pub fn copy_contiguous(t: &Tensor) -> Result<Tensor> {
    t.try_with_f32(|s| {
        Tensor::build_f32(t.shape(), |out| {
            out.copy_from_slice(s);
            Ok(())
        })
    })?
}

/// Elements per chunk of [`add_same_shape`] shared by the thread team (128 KiB of
/// output; a constant, and each element is one add, so the bits never depend on it).
const ADD_CHUNK: usize = 1 << 15;

/// `a + b` for two tensors of one shape, as a new contiguous tensor; large sums (the
/// engine adding the gradients a tensor receives from several uses) in chunks shared by
/// the thread team.
pub fn add_same_shape(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    debug_assert_eq!(a.shape(), b.shape());
    let threads = crate::compute::Compute::settings().threads;
    a.try_with_f32(|x| {
        b.try_with_f32(|y| {
            Tensor::build_f32(a.shape(), |out| {
                crate::kernels::parallel::for_each_chunk_mut(threads, out, ADD_CHUNK, |i, o| {
                    let start = i * ADD_CHUNK;
                    for ((o, &p), &q) in o.iter_mut().zip(&x[start..]).zip(&y[start..]) {
                        *o = p + q;
                    }
                });
                Ok(())
            })
        })?
    })?
}

/// `dst += src` in place (equal shapes; `dst` contiguous).
pub fn add_assign(dst: &Tensor, src: &Tensor) -> Result<()> {
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
    src.try_with_f32(|s| {
        dst.update_f32("add_assign", |d| {
            for (o, &v) in d.iter_mut().zip(s) {
                *o += v;
            }
        })
    })?
}

/// Sums `g` over the dimensions a broadcast from `shape` added or expanded, giving a
/// contiguous tensor of `shape`. Each output is accumulated in f64 over the elements of
/// `g` in increasing row-major order and rounded once.
pub fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let n = crate::layout::numel(shape);
    let mut acc = F64Scratch::try_zeroed(n)?;
    let acc_s = acc.values();
    let target = broadcast_strides(shape, &contiguous_strides(shape), g.shape());
    let g = g.try_to_contiguous()?;
    g.try_with_f32(|src| {
        let gs = contiguous_strides(g.shape());
        // `g` is contiguous, so every row has step 1 in it; the common target steps get
        // loops the compiler vectorises (each output still adds its elements in order).
        for_each_row(g.shape(), [&gs, &target], [0, 0], |[gs0, ts0], len, [_, tstep]| {
            let row = &src[gs0..gs0 + len];
            match tstep {
                0 => acc_s[ts0] = row.iter().fold(acc_s[ts0], |a, &v| a + v as f64),
                1 => acc_s[ts0..ts0 + len].iter_mut().zip(row).for_each(|(a, &v)| *a += v as f64),
                _ => row.iter().enumerate().for_each(|(i, &v)| acc_s[ts0 + i * tstep] += v as f64),
            }
        });
    })?;
    Tensor::build_f32(shape, |out| {
        for (o, &v) in out.iter_mut().zip(acc_s.iter()) {
            *o = v as f32;
        }
        Ok(())
    })
}
