//! Fused element-wise kernels: one pass over an operand writing two results that share
//! their expensive terms, with the bits of the separate lane loops of `kernels::lanes`.
//!
//! [`gelu_with_slope`] writes GELU's value and its slope together (the slope is what the
//! backward multiplies the incoming gradient by): the erf form evaluates its Gaussian terms
//! (three exponentials, a division and two polynomials) once instead of once in the forward
//! and again in the backward. Each value is computed by the same generic code as
//! `Unary::GeluErf` / `Binary::GeluErfBackward` (full vectors of the path's width, then the
//! same code at width 1 for the tail), so every path, length and thread count gives the
//! scalar bits. The erf form does so in two passes per block (the small-argument form on
//! every vector, then the remaining lanes gathered into full vectors of the full formula;
//! see `erf_block`), with the same operations per lane (`gelu_tests.rs` checks all 2^32
//! inputs against the one-pass loop).

use crate::compute::{Mode, Settings};
use crate::kernels::chunks::for_each_row_chunk;
use crate::kernels::elementwise::PAR_CHUNK;
use crate::kernels::simd::{Lanes, Scalar};
use crate::kernels::transcendentals as tr;
use crate::kernels::{dispatch, finish, LaneTask};
use std::marker::PhantomData;

/// Which GELU formula [`gelu_with_slope`] evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluFormula {
    /// `x·Φ(x)`, slope `Φ(x) + x·φ(x)` (the lane loops' `GeluErf`, `GeluErfBackward`).
    Erf,
    /// The tanh approximation and its slope (`GeluTanh`, `GeluTanhBackward`).
    Tanh,
}

/// `y[i] = gelu(x[i])` and `slope[i] = gelu'(x[i])` for every `i < y.len()`, in chunks
/// shared by the thread team (each element alone, so the bits never depend on it).
///
/// `y` has the bits of the lane loop `Unary::GeluErf` (`GeluTanh`), NaNs included (written
/// as the canonical NaN in exact mode). `slope` is left as computed (no NaN rewriting), so
/// that `g·slope` on the lane loop `Binary::Mul` has the bits of `Binary::GeluErfBackward`
/// (`GeluTanhBackward`) of `(g, x)` in both modes.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::fused::{gelu_with_slope, GeluFormula};
/// let x = [-1.0f32, 0.0, 2.0];
/// let (mut y, mut slope) = ([0.0f32; 3], [0.0f32; 3]);
/// gelu_with_slope(Compute::settings(), GeluFormula::Erf, &x, &mut y, &mut slope);
/// assert_eq!(y[1], 0.0);
/// assert_eq!(slope[1], 0.5); // Φ(0)
/// assert!((y[2] - 1.9545).abs() < 1e-4);
/// ```
///
/// # Panics
/// If `x` or `slope` is shorter than `y`.
pub fn gelu_with_slope(settings: Settings, formula: GeluFormula, x: &[f32], y: &mut [f32], slope: &mut [f32]) {
    let n = y.len();
    assert!(x.len() >= n && slope.len() >= n, "gelu_with_slope: x has {}, slope {} values, y {n}", x.len(), slope.len());
    let slope = &mut slope[..n];
    for_each_row_chunk(settings.threads, [y, slope], [1, 1], n, PAR_CHUNK, |_, rows, [y, s]| {
        let x = &x[rows];
        match formula {
            GeluFormula::Erf => dispatch(settings.path, PairTask::<Erf> { x, y, s, mode: settings.mode, kernel: PhantomData }),
            GeluFormula::Tanh => dispatch(settings.path, PairTask::<Tanh> { x, y, s, mode: settings.mode, kernel: PhantomData }),
        }
    });
}

/// A function of one lane vector giving two (value, slope).
trait PairKernel: Sized {
    fn apply<L: Lanes>(x: L) -> (L, L);

    /// Full `L` vectors: `y` finished as the lane loops do (canonical NaN in exact mode),
    /// the slope as computed ([`pair_full`] unless a kernel has a cheaper way to the same
    /// bits).
    #[inline(always)]
    fn full<L: Lanes>(isa: L::Isa, x: &[f32], y: &mut [f32], s: &mut [f32], mode: Mode) {
        pair_full::<L, Self>(isa, x, y, s, mode);
    }
}

/// The erf GELU and its slope.
struct Erf;

impl PairKernel for Erf {
    #[inline(always)]
    fn apply<L: Lanes>(x: L) -> (L, L) {
        tr::gelu_erf_with_grad(x)
    }

    #[inline(always)]
    fn full<L: Lanes>(isa: L::Isa, x: &[f32], y: &mut [f32], s: &mut [f32], mode: Mode) {
        for ((x, y), s) in x[..y.len()].chunks(ERF_BLOCK).zip(y.chunks_mut(ERF_BLOCK)).zip(s.chunks_mut(ERF_BLOCK)) {
            erf_block::<L>(isa, x, y, s, mode);
        }
    }
}

/// Elements per block of [`erf_block`] (a multiple of every lane width; the block's `x`,
/// `y` and slope stay in L1 between its two passes).
const ERF_BLOCK: usize = 1024;

/// The erf GELU of one block of full vectors in two passes, each lane through the same
/// operations as [`tr::gelu_erf_with_grad`], so with its bits. The first pass runs the
/// small-argument form [`tr::gelu_erf_with_grad_small`] on every vector and notes the
/// vectors with lanes it does not cover (`|x|/√2 >= 0.875`, ±inf, NaN) and which lanes; the
/// second gathers those lanes' inputs into full vectors, runs the full formula on them and
/// scatters the results back. The large-argument head (a division, an exponential and a
/// degree-9 polynomial) thus runs once per `L::WIDTH` such lanes instead of for every
/// vector that holds one.
#[inline(always)]
fn erf_block<L: Lanes>(isa: L::Isa, x: &[f32], y: &mut [f32], s: &mut [f32], mode: Mode) {
    let w = L::WIDTH;
    if w == 1 {
        // One lane: the small form on every element (a loop the compiler can vectorise),
        // noting which elements it covers, then the full formula on the others.
        let mut covered = [false; ERF_BLOCK];
        for (((&x, yo), so), c) in x.iter().zip(y.iter_mut()).zip(s.iter_mut()).zip(covered.iter_mut()) {
            let (v, d, small) = tr::gelu_erf_with_grad_small(L::splat(isa, x));
            finish(v, mode).store(std::slice::from_mut(yo));
            d.store(std::slice::from_mut(so));
            *c = L::all(small);
        }
        for (((&x, yo), so), &c) in x.iter().zip(y.iter_mut()).zip(s.iter_mut()).zip(&covered) {
            if !c {
                let (v, d) = tr::gelu_erf_with_grad(L::splat(isa, x));
                finish(v, mode).store(std::slice::from_mut(yo));
                d.store(std::slice::from_mut(so));
            }
        }
        return;
    }
    // w <= 16 lanes.
    let every = (1u32 << w) - 1;
    // Per vector with uncovered lanes: its index in the low 16 bits, the lanes above.
    let mut marked = [0u32; ERF_BLOCK];
    let mut n_marked = 0;
    for (c, (yo, so)) in y.chunks_exact_mut(w).zip(s.chunks_exact_mut(w)).enumerate() {
        let (v, d, small) = tr::gelu_erf_with_grad_small(L::load(isa, &x[c * w..]));
        finish(v, mode).store(yo);
        d.store(so);
        let rest = !L::bitmask(isa, small) & every;
        marked[n_marked] = c as u32 | rest << 16;
        n_marked += usize::from(rest != 0);
    }
    if n_marked == 0 {
        return;
    }
    let mut lanes = [0u16; ERF_BLOCK];
    let mut n_lanes = 0;
    for &m in &marked[..n_marked] {
        let base = (m & 0xffff) as usize * w;
        let mut rest = m >> 16;
        while rest != 0 {
            lanes[n_lanes] = (base + rest.trailing_zeros() as usize) as u16;
            n_lanes += 1;
            rest &= rest - 1;
        }
    }
    for group in lanes[..n_lanes].chunks(w) {
        let mut xs = [x[usize::from(group[0])]; 16];
        for (xi, &i) in xs.iter_mut().zip(group) {
            *xi = x[usize::from(i)];
        }
        let (v, d) = tr::gelu_erf_with_grad(L::load(isa, &xs));
        let (mut vs, mut ds) = ([0.0f32; 16], [0.0f32; 16]);
        finish(v, mode).store(&mut vs);
        d.store(&mut ds);
        for (j, &i) in group.iter().enumerate() {
            y[usize::from(i)] = vs[j];
            s[usize::from(i)] = ds[j];
        }
    }
}

/// The tanh GELU and its slope.
struct Tanh;

impl PairKernel for Tanh {
    #[inline(always)]
    fn apply<L: Lanes>(x: L) -> (L, L) {
        (tr::gelu_tanh(x), tr::gelu_tanh_grad(x))
    }
}

struct PairTask<'a, 'o, K> {
    x: &'a [f32],
    y: &'o mut [f32],
    s: &'o mut [f32],
    mode: Mode,
    kernel: PhantomData<K>,
}

impl<K: PairKernel> LaneTask for PairTask<'_, '_, K> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let PairTask { x, y, s, mode, kernel: _ } = self;
        let full = y.len() / L::WIDTH * L::WIDTH;
        let (yf, yt) = y.split_at_mut(full);
        let (sf, st) = s.split_at_mut(full);
        K::full::<L>(isa, x, yf, sf, mode);
        pair_full::<f32, K>(Scalar, &x[full..], yt, st, mode);
    }
}

/// Full `L` vectors: `y` finished as the lane loops do (canonical NaN in exact mode), the
/// slope as computed.
#[inline(always)]
fn pair_full<L: Lanes, K: PairKernel>(isa: L::Isa, x: &[f32], y: &mut [f32], s: &mut [f32], mode: Mode) {
    for (c, (yo, so)) in y.chunks_exact_mut(L::WIDTH).zip(s.chunks_exact_mut(L::WIDTH)).enumerate() {
        let (v, d) = K::apply(L::load(isa, &x[c * L::WIDTH..]));
        finish(v, mode).store(yo);
        d.store(so);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::KernelPath;
    use crate::kernels::lanes::{self, Binary, Src, Unary};

    /// Values over GELU's regimes: both sides of the erf split, the clamp, signed zeros,
    /// infinities, NaN and subnormals.
    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (0..600).map(|i| (i as f32 - 300.0) * 0.0731).collect();
        v.extend([0.0, -0.0, 0.874, 0.876, -1.2374, 1.2375, 19.99, 20.01, -20.01, -19.99, 1e-40, -1e-40]);
        v.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::from_bits(0xffc0_0001), -5.0e-39]);
        v
    }

    #[test]
    fn value_and_slope_have_the_bits_of_the_separate_lane_loops() {
        let x = inputs();
        let g: Vec<f32> = (0..x.len()).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
        for path in KernelPath::supported() {
            for mode in [Mode::Fast, Mode::Exact] {
                // Fast mode's NaNs are whatever the code makes (spec section 7: a NaN's sign
                // and payload may differ between two compilations of the same expression), so
                // there only NaN-ness is compared; exact mode's are canonical and compared as bits.
                let bits =
                    |v: &[f32]| v.iter().map(|v| if mode == Mode::Fast && v.is_nan() { u32::MAX } else { v.to_bits() }).collect::<Vec<_>>();
                for threads in [1, 2] {
                    let settings = Settings { mode, threads, path };
                    for (formula, fwd, bwd) in [
                        (GeluFormula::Erf, Unary::GeluErf, Binary::GeluErfBackward),
                        (GeluFormula::Tanh, Unary::GeluTanh, Binary::GeluTanhBackward),
                    ] {
                        // Every length up to a few vectors, so tails of each width are covered.
                        for n in [0, 1, 5, 15, 16, 17, 33, 100, x.len()] {
                            let (mut y, mut s) = (vec![0.0; n], vec![0.0; n]);
                            gelu_with_slope(settings, formula, &x[..n], &mut y, &mut s);
                            let mut want_y = vec![0.0; n];
                            lanes::unary(settings, fwd, Src::Contig(&x[..n]), &mut want_y);
                            let (mut want_d, mut got_d) = (vec![0.0; n], vec![0.0; n]);
                            lanes::binary(settings, bwd, Src::Contig(&g[..n]), Src::Contig(&x[..n]), &mut want_d);
                            lanes::binary(settings, Binary::Mul, Src::Contig(&g[..n]), Src::Contig(&s), &mut got_d);
                            let what = format!("{path} {mode:?} {threads} threads {formula:?} n {n}");
                            assert_eq!(bits(&y), bits(&want_y), "value, {what}");
                            assert_eq!(bits(&got_d), bits(&want_d), "g·slope, {what}");
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "gelu_tests.rs"]
mod gelu_tests;
