//! Element-wise maps over broadcast, strided and transposed operands, on slices: each
//! operand is its storage, its strides broadcast to the output's shape and its offset
//! ([`Operand`]); the output is a contiguous slice of that shape, walked one innermost row
//! at a time ([`for_each_row`]). [`unary_lanes`] and [`binary_lanes`] hand each row to the
//! lane loops (contiguous, broadcast or strided operands); [`unary_with`] and
//! [`binary_with`] apply a scalar closure, for the few maps that have no lane kernel; in
//! exact mode they write a NaN result as [`CANONICAL_NAN`] like the lane loops (so their
//! outputs skip the NaN pass of `Tensor::build_f32`, whose `canonicalise_nans` lives
//! here). Large maps over flat operands (contiguous, or one broadcast value) are cut into
//! `PAR_CHUNK`-element chunks that the thread team shares; each element is computed alone,
//! so the bits never depend on it; [`binary_lanes_in_place`] is that flat pass with the
//! first operand as the output. The tensor-level maps (operand checks, broadcasting, the
//! output tensor, the thread's settings) are `crate::maps`.

use crate::compute::{Mode, Settings};
use crate::kernels::lanes::{self, Binary, Src, Unary};
use crate::kernels::parallel::for_each_chunk_mut;
use crate::kernels::CANONICAL_NAN;
use crate::layout::{contiguous_strides, for_each_row};

/// One operand of an element-wise map producing a contiguous output of shape `shape`:
/// element `idx` of the output reads `data[offset + Σ idx[d] · strides[d]]` (`strides`
/// has the output's rank, 0 along a broadcast dimension).
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The operand's whole storage.
    pub data: &'a [f32],
    /// Its strides, broadcast to the output's shape.
    pub strides: &'a [usize],
    /// The storage index of its first element.
    pub offset: usize,
}

impl<'a> Operand<'a> {
    /// The operand as one flat source of the whole `n`-element output of `shape`: one
    /// value broadcast to every element, or `n` contiguous values; `None` for any other
    /// layout (walked row by row).
    fn flat(self, shape: &[usize], n: usize) -> Option<Src<'a>> {
        let mut expect = 1;
        let (mut splat, mut contig) = (true, true);
        for (&d, &s) in shape.iter().zip(self.strides).rev() {
            if d != 1 {
                splat &= s == 0;
                contig &= s == expect;
            }
            expect *= d;
        }
        if splat {
            Some(Src::Splat(self.data[self.offset]))
        } else if contig {
            Some(Src::Contig(&self.data[self.offset..self.offset + n]))
        } else {
            None
        }
    }
}

/// `out[i] = f(x[i])` over a contiguous `out` of `shape` (in exact mode a NaN result is
/// written as [`CANONICAL_NAN`]).
pub fn unary_with(mode: Mode, shape: &[usize], x: Operand<'_>, out: &mut [f32], f: impl Fn(f32) -> f32) {
    let exact = mode == Mode::Exact;
    // A contiguous operand maps in one flat pass, without the row walk's index arithmetic
    // (31% of the instructions of `om bench sweep`'s chain of small operators); each
    // element is computed alone either way, so the bits are the same.
    if let (false, Some(Src::Contig(xs))) = (out.is_empty(), x.flat(shape, out.len())) {
        out.iter_mut().zip(xs).for_each(|(o, &v)| *o = canonical(f(v), exact));
        return;
    }
    let os = contiguous_strides(shape);
    for_each_row(shape, [&os, x.strides], [0, x.offset], |[o, a], len, [so, sa]| {
        for i in 0..len {
            out[o + i * so] = canonical(f(x.data[a + i * sa]), exact);
        }
    });
}

/// `out[i] = f(a[i], b[i])` over a contiguous `out` of `shape` (in exact mode a NaN result
/// is written as [`CANONICAL_NAN`]).
pub fn binary_with(mode: Mode, shape: &[usize], a: Operand<'_>, b: Operand<'_>, out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    let exact = mode == Mode::Exact;
    // Flat operands (contiguous, or one value) map in one pass, as in `unary_with`.
    if !out.is_empty() {
        match (a.flat(shape, out.len()), b.flat(shape, out.len())) {
            (Some(Src::Contig(x)), Some(Src::Contig(y))) => {
                out.iter_mut().zip(x.iter().zip(y)).for_each(|(o, (&u, &v))| *o = canonical(f(u, v), exact));
                return;
            }
            (Some(Src::Contig(x)), Some(Src::Splat(v))) => {
                out.iter_mut().zip(x).for_each(|(o, &u)| *o = canonical(f(u, v), exact));
                return;
            }
            (Some(Src::Splat(u)), Some(Src::Contig(y))) => {
                out.iter_mut().zip(y).for_each(|(o, &v)| *o = canonical(f(u, v), exact));
                return;
            }
            _ => {}
        }
    }
    let os = contiguous_strides(shape);
    for_each_row(shape, [&os, a.strides, b.strides], [0, a.offset, b.offset], |[o, i0, j0], len, [so, si, sj]| {
        for t in 0..len {
            out[o + t * so] = canonical(f(a.data[i0 + t * si], b.data[j0 + t * sj]), exact);
        }
    });
}

/// Replaces every NaN in `out` by [`CANONICAL_NAN`] (exact mode's pass over the output of
/// every kernel but the lane loops, see `Tensor::build_f32`).
pub(crate) fn canonicalise_nans(out: &mut [f32]) {
    // Most outputs hold no NaN: a read-only pass (compiled to vector compares) finds the
    // blocks that do, and only those are rewritten.
    for block in out.chunks_mut(256) {
        if block.iter().fold(false, |any, v| any | v.is_nan()) {
            for v in block {
                *v = canonical(*v, true);
            }
        }
    }
}

/// `v`, or [`CANONICAL_NAN`] if `v` is a NaN and `exact` (exact mode). Decided on the
/// bits: Rust leaves a NaN's payload unspecified, so a float-level `is_nan ? NaN : v` may be
/// folded to `v` by the optimiser (it was, once the flat loops were vectorised).
#[inline(always)]
fn canonical(v: f32, exact: bool) -> f32 {
    let bits = v.to_bits();
    if exact && bits & 0x7fff_ffff > 0x7f80_0000 {
        f32::from_bits(CANONICAL_NAN)
    } else {
        f32::from_bits(bits)
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

/// `out[i] = op(x[i])` on the lane loops over a contiguous `out` of `shape`.
pub fn unary_lanes(settings: Settings, shape: &[usize], x: Operand<'_>, op: Unary, out: &mut [f32]) {
    if out.is_empty() {
        // An empty view's offset may lie past its storage: read nothing.
        return;
    }
    if let Some(xf) = x.flat(shape, out.len()) {
        for_each_chunk_mut(settings.threads, out, PAR_CHUNK, |i, o| lanes::unary(settings, op, xf.skip_to(i * PAR_CHUNK), o));
        return;
    }
    let os = contiguous_strides(shape);
    for_each_row(shape, [&os, x.strides], [0, x.offset], |[o, a], len, [so, sa]| {
        debug_assert_eq!(so, 1, "a contiguous output walks rows with step 1");
        lanes::unary(settings, op, src(x.data, a, len, sa), &mut out[o..o + len]);
    });
}

/// `out[i] = op(a[i], b[i])` on the lane loops over a contiguous `out` of `shape`.
pub fn binary_lanes(settings: Settings, shape: &[usize], a: Operand<'_>, b: Operand<'_>, op: Binary, out: &mut [f32]) {
    if out.is_empty() {
        // An empty view's offset may lie past its storage: read nothing.
        return;
    }
    if let (Some(af), Some(bf)) = (a.flat(shape, out.len()), b.flat(shape, out.len())) {
        for_each_chunk_mut(settings.threads, out, PAR_CHUNK, |i, o| {
            lanes::binary(settings, op, af.skip_to(i * PAR_CHUNK), bf.skip_to(i * PAR_CHUNK), o)
        });
        return;
    }
    let os = contiguous_strides(shape);
    for_each_row(shape, [&os, a.strides, b.strides], [0, a.offset, b.offset], |[o, i0, j0], len, [_, si, sj]| {
        lanes::binary(settings, op, src(a.data, i0, len, si), src(b.data, j0, len, sj), &mut out[o..o + len]);
    });
}

/// `a[i] = op(a[i], b[i])` over a contiguous `a` and a flat `b` (`a.len()` contiguous
/// values, or one value), in the chunks of [`binary_lanes`]' flat pass and with its bits.
pub fn binary_lanes_in_place(settings: Settings, a: &mut [f32], b: Src<'_>, op: Binary) {
    for_each_chunk_mut(settings.threads, a, PAR_CHUNK, |i, o| lanes::binary_in_place(settings, op, o, b.skip_to(i * PAR_CHUNK)));
}

/// Elements per parallel chunk of a flat map (128 KiB of output): large enough that a
/// chunk costs far more than handing it to a thread, small enough that 2 threads share a
/// 1M-element map evenly. The one chunk length of every flat per-element pass: these maps,
/// the fused GELU (`kernels::fused`) and the optimizers' updates (`om_ops::optim`).
pub const PAR_CHUNK: usize = 1 << 15;

#[cfg(test)]
mod tests {
    use super::{binary_lanes, binary_lanes_in_place, binary_with, unary_lanes, unary_with, Operand, PAR_CHUNK};
    use crate::compute::{Compute, KernelPath, Mode, Settings};
    use crate::kernels::lanes::{Binary, Src, Unary};
    use crate::kernels::norm::tests::{bits, every_setting};
    use crate::kernels::CANONICAL_NAN;

    const FAST: Settings = Settings { mode: Mode::Fast, threads: 1, path: KernelPath::Scalar };
    const EXACT: Settings = Settings { mode: Mode::Exact, threads: 1, path: KernelPath::Scalar };

    fn contiguous<'a>(data: &'a [f32], strides: &'a [usize]) -> Operand<'a> {
        Operand { data, strides, offset: 0 }
    }

    /// The kernels follow the settings they are given, not the thread's: exact settings
    /// on a thread in fast mode write the canonical NaN, fast ones on a thread in exact
    /// mode pass the payload on.
    #[test]
    fn maps_follow_the_given_settings_not_the_threads() {
        let odd_nan = f32::from_bits(0x7fc0_0001);
        let x = [odd_nan, 2.0];
        let run = |kernel: Settings, thread: Settings| {
            let mut outs = [[0.0f32; 2]; 4];
            Compute::with(thread, || {
                let [a, b, c, d] = &mut outs;
                unary_lanes(kernel, &[2], contiguous(&x, &[1]), Unary::Neg, a);
                binary_lanes(kernel, &[2], contiguous(&x, &[1]), contiguous(&x, &[1]), Binary::Add, b);
                unary_with(kernel.mode, &[2], contiguous(&x, &[1]), c, |v| -v);
                binary_with(kernel.mode, &[2], contiguous(&x, &[1]), contiguous(&x, &[1]), d, |p, q| p + q);
            });
            outs.map(|o| o[0].to_bits())
        };
        assert_eq!(run(EXACT, FAST), [CANONICAL_NAN; 4]);
        assert!(run(FAST, EXACT).iter().all(|&b| b != CANONICAL_NAN && f32::from_bits(b).is_nan()));
    }

    /// One set of values read as contiguous, strided, transposed and broadcast (stride 0)
    /// operands gives `v · 0.5` exactly (a single IEEE operation), on the flat chunked path
    /// (2 threads, more than two chunks) and on the row walk.
    #[test]
    fn every_layout_gives_the_same_bits() {
        let (rows, cols) = (3, PAR_CHUNK);
        let n = rows * cols;
        let vals: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.37 - 150.0).collect();
        let want: Vec<u32> = vals.iter().map(|&v| (v * 0.5).to_bits()).collect();
        let two = Settings { threads: 2, ..FAST };
        let half = [0.5f32];
        let splat = Operand { data: &half, strides: &[0, 0], offset: 0 };
        let strided: Vec<f32> = vals.iter().flat_map(|&v| [f32::NAN, v]).collect();
        let transposed: Vec<f32> = (0..n).map(|j| vals[(j % rows) * cols + j / rows]).collect();
        let layouts = [
            Operand { data: &vals, strides: &[cols, 1], offset: 0 },
            Operand { data: &strided, strides: &[2 * cols, 2], offset: 1 },
            Operand { data: &transposed, strides: &[1, rows], offset: 0 },
        ];
        for x in layouts {
            let mut out = vec![0.0f32; n];
            binary_lanes(two, &[rows, cols], x, splat, Binary::Mul, &mut out);
            assert!(out.iter().map(|v| v.to_bits()).eq(want.iter().copied()), "{:?}", x.strides);
            binary_with(Mode::Fast, &[rows, cols], splat, x, &mut out, |h, v| h * v);
            assert!(out.iter().map(|v| v.to_bits()).eq(want.iter().copied()), "{:?}", x.strides);
        }
        let mut out = vec![0.0f32; n];
        unary_lanes(two, &[rows, cols], Operand { data: &vals[7..8], strides: &[0, 0], offset: 0 }, Unary::Neg, &mut out);
        assert!(out.iter().all(|v| v.to_bits() == (-vals[7]).to_bits()));
    }

    /// Written over `a`, binary lane maps give the bits of a separate output, on every
    /// path at 1 and 2 threads (several chunks and a tail), in both modes.
    #[test]
    fn in_place_maps_give_the_bits_of_separate_outputs() {
        let n = 2 * PAR_CHUNK + 13;
        let a: Vec<f32> = (0..n).map(|i| if i % 101 == 0 { f32::NAN } else { (i % 977) as f32 * 0.013 - 6.0 }).collect();
        let b: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.011 - 5.0).collect();
        for st in every_setting().into_iter().flat_map(|s| [s, Settings { mode: Mode::Exact, ..s }]) {
            for op in [Binary::ReluBackward, Binary::Sub, Binary::Div, Binary::TanhBackward] {
                let mut want = vec![0.0f32; n];
                binary_lanes(st, &[n], contiguous(&a, &[1]), contiguous(&b, &[1]), op, &mut want);
                let mut over = a.clone();
                binary_lanes_in_place(st, &mut over, Src::Contig(&b), op);
                assert_eq!(bits(&over), bits(&want), "{op:?} {st:?}");
            }
        }
    }
}
