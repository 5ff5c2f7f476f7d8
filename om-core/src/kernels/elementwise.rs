//! Element-wise maps over broadcast, strided and transposed operands. The output is a new
//! contiguous tensor; the operands are walked one innermost row at a time
//! ([`for_each_row`]). [`unary_op`] and [`binary_op`] hand each row to the lane loops
//! (contiguous, broadcast or strided operands); [`unary`] and [`binary`] apply a scalar
//! closure, for the few maps that have no lane kernel; in exact mode they write a NaN result
//! as [`CANONICAL_NAN`] like the lane loops (so their outputs skip the NaN pass of
//! `Tensor::build_f32`, whose `canonicalise_nans` lives here). Large maps over flat operands
//! (contiguous, or one broadcast value) are cut into `PAR_CHUNK`-element chunks that the
//! thread team shares; each element is computed alone, so the bits never depend on it.

use crate::compute::{Compute, Mode};
use crate::error::Result;
use crate::kernels::lanes::{self, Binary, Src, Unary};
use crate::kernels::parallel::for_each_chunk_mut;
use crate::kernels::CANONICAL_NAN;
use crate::layout::{broadcast_shapes, broadcast_strides, contiguous_strides, for_each_row, Dims};
use crate::tensor::Tensor;

/// `out[i] = f(x[i])` as a new contiguous tensor of `x`'s shape (in exact mode a NaN
/// result is written as [`CANONICAL_NAN`]).
pub fn unary(op: &'static str, x: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
    x.expect_f32(op, "x")?;
    let exact = Compute::settings().mode == Mode::Exact;
    let shape = Dims::from_slice(x.shape());
    let os = contiguous_strides(&shape);
    x.with_storage_f32(|xs| {
        Tensor::build_f32_raw(&shape, |out| {
            for_each_row(&shape, [&os, x.strides()], [0, x.offset()], |[o, a], len, [so, sa]| {
                for i in 0..len {
                    out[o + i * so] = canonical(f(xs[a + i * sa]), exact);
                }
            });
            Ok(())
        })
    })
}

/// `out[i] = f(a[i], b[i])` after broadcasting `a` and `b`, as a new contiguous tensor (in
/// exact mode a NaN result is written as [`CANONICAL_NAN`]).
pub fn binary(op: &'static str, a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Tensor> {
    a.expect_f32(op, "a")?;
    b.expect_f32(op, "b")?;
    let exact = Compute::settings().mode == Mode::Exact;
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let os = contiguous_strides(&shape);
    let sa = broadcast_strides(a.shape(), a.strides(), &shape);
    let sb = broadcast_strides(b.shape(), b.strides(), &shape);
    a.with_storage_f32(|xa| {
        b.with_storage_f32(|xb| {
            Tensor::build_f32_raw(&shape, |out| {
                for_each_row(&shape, [&os, &sa, &sb], [0, a.offset(), b.offset()], |[o, i0, j0], len, [so, si, sj]| {
                    for t in 0..len {
                        out[o + t * so] = canonical(f(xa[i0 + t * si], xb[j0 + t * sj]), exact);
                    }
                });
                Ok(())
            })
        })
    })
}

/// Replaces every NaN in `out` by [`CANONICAL_NAN`] (exact mode's pass over the output of
/// every kernel but the lane loops, see `Tensor::build_f32`).
pub(crate) fn canonicalise_nans(out: &mut [f32]) {
    let nan = f32::from_bits(CANONICAL_NAN);
    // Most outputs hold no NaN: a read-only pass (compiled to vector compares) finds the
    // blocks that do, and only those are rewritten.
    for block in out.chunks_mut(256) {
        if block.iter().fold(false, |any, v| any | v.is_nan()) {
            for v in block {
                *v = if v.is_nan() { nan } else { *v };
            }
        }
    }
}

/// `v`, or [`CANONICAL_NAN`] if `v` is a NaN and `exact` (exact mode).
#[inline(always)]
fn canonical(v: f32, exact: bool) -> f32 {
    if exact && v.is_nan() {
        f32::from_bits(CANONICAL_NAN)
    } else {
        v
    }
}

/// The operand of one row: contiguous, broadcast (step 0) or strided.
fn src(data: &[f32], start: usize, len: usize, step: usize) -> Src<'_> {
    match step {
        0 => Src::Splat(data[start]),
        1 => Src::Contig(&data[start..start + len]),
        s => Src::Strided(&data[start..start + (len - 1) * s + 1], s),
    }
}

/// `out[i] = op(x[i])` on the lane loops, as a new contiguous tensor of `x`'s shape.
pub fn unary_op(name: &'static str, x: &Tensor, op: Unary) -> Result<Tensor> {
    x.expect_f32(name, "x")?;
    let settings = Compute::settings();
    let shape = Dims::from_slice(x.shape());
    let os = contiguous_strides(&shape);
    x.with_storage_f32(|xs| {
        Tensor::build_f32_raw(&shape, |out| {
            if let Some(xf) = flat(xs, x, out.len()) {
                for_each_chunk_mut(settings.threads, out, PAR_CHUNK, |i, o| lanes::unary(settings, op, xf.skip_to(i * PAR_CHUNK), o));
                return Ok(());
            }
            for_each_row(&shape, [&os, x.strides()], [0, x.offset()], |[o, a], len, [so, sa]| {
                debug_assert_eq!(so, 1, "a contiguous output walks rows with step 1");
                lanes::unary(settings, op, src(xs, a, len, sa), &mut out[o..o + len]);
            });
            Ok(())
        })
    })
}

/// `out[i] = op(a[i], b[i])` on the lane loops after broadcasting, as a new contiguous tensor.
pub fn binary_op(name: &'static str, a: &Tensor, b: &Tensor, op: Binary) -> Result<Tensor> {
    a.expect_f32(name, "a")?;
    b.expect_f32(name, "b")?;
    let settings = Compute::settings();
    let shape = broadcast_shapes(name, a.shape(), b.shape())?;
    let os = contiguous_strides(&shape);
    let sa = broadcast_strides(a.shape(), a.strides(), &shape);
    let sb = broadcast_strides(b.shape(), b.strides(), &shape);
    a.with_storage_f32(|xa| {
        b.with_storage_f32(|xb| {
            Tensor::build_f32_raw(&shape, |out| {
                if let (Some(af), Some(bf)) = (flat(xa, a, out.len()), flat(xb, b, out.len())) {
                    for_each_chunk_mut(settings.threads, out, PAR_CHUNK, |i, o| {
                        lanes::binary(settings, op, af.skip_to(i * PAR_CHUNK), bf.skip_to(i * PAR_CHUNK), o)
                    });
                    return Ok(());
                }
                for_each_row(&shape, [&os, &sa, &sb], [0, a.offset(), b.offset()], |[o, i0, j0], len, [_, si, sj]| {
                    lanes::binary(settings, op, src(xa, i0, len, si), src(xb, j0, len, sj), &mut out[o..o + len]);
                });
                Ok(())
            })
        })
    })
}

/// Elements per parallel chunk of a flat map (128 KiB of output): large enough that a
/// chunk costs far more than handing it to a thread, small enough that 2 threads share a
/// 1M-element map evenly.
const PAR_CHUNK: usize = 1 << 15;

/// `t`'s elements as one flat operand of an `n`-element map: contiguous with `n` elements,
/// or a single value broadcast to all of them; `None` for any other layout.
fn flat<'a>(data: &'a [f32], t: &Tensor, n: usize) -> Option<Src<'a>> {
    match t.numel() {
        // An empty view's offset may lie past its storage (a slice of an empty tensor).
        0 => Some(Src::Contig(&[])),
        1 => Some(Src::Splat(data[t.offset()])),
        len if len == n && t.is_contiguous() => Some(Src::Contig(&data[t.offset()..t.offset() + n])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{binary, unary, CANONICAL_NAN};
    use crate::compute::{Compute, KernelPath, Mode, Settings};
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
}
