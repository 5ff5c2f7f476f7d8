//! Element-wise lane loops: [`unary`] and [`binary`] over contiguous, broadcast or
//! strided operands.
//!
//! Each element is computed by one generic kernel (a single IEEE operation, a
//! compare-and-select, or a function of `transcendentals`) with no fused
//! multiply-add in either mode. Full vectors of the path's width cover the front of the
//! output, and the same kernel instantiated at width 1 finishes the tail, so every path
//! produces the scalar bits at every length and position. Strided operands are gathered
//! into a stack buffer and go through the same code.
//!
//! Modes: both modes use the same kernels and polynomials (they are vectorised, so also
//! faster than calling `f32::exp` per element); exact mode additionally writes every NaN
//! result as [`super::CANONICAL_NAN`], fast mode leaves whatever NaN the hardware made.
//! Loops run on the calling thread; `settings.threads` is ignored (callers split large
//! loops into chunks, see `kernels::elementwise`).

use super::simd::Lanes;
use super::transcendentals as tr;
use super::{dispatch, finish, LaneTask};
use crate::compute::{Mode, Settings};

/// One operand of a lane loop; element `i` of a loop producing `n` values reads:
#[derive(Clone, Copy, Debug)]
pub enum Src<'a> {
    /// `data[i]` (`data.len() >= n`).
    Contig(&'a [f32]),
    /// The same value for every `i`.
    Splat(f32),
    /// `data[i * stride]` (`data.len() > (n - 1) * stride`).
    Strided(&'a [f32], usize),
}

/// Element-wise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unary {
    /// `-x` (sign flip).
    Neg,
    /// `x` if `x > 0`, `+0` if `x <= 0`, NaN stays NaN.
    Relu,
    /// `1 / (1 + e^(-x))`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `x Φ(x)`.
    GeluErf,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluTanh,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
}

/// Element-wise functions of two operands `a`, `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a = g`, `b = y` (relu output): `g` where `y > 0`, else `0` (also for NaN `y`).
    ReluBackward,
    /// `a = g`, `b = y`: `(g y)(1 - y)`.
    SigmoidBackward,
    /// `a = g`, `b = y`: `g (1 - y y)`.
    TanhBackward,
    /// `a = g`, `b = x`: `g (Φ(x) + x φ(x))`.
    GeluErfBackward,
    /// `a = g`, `b = x`: `g` times the slope of the tanh GELU.
    GeluTanhBackward,
}

/// Writes `op(x[i])` into `out[i]` for every `i < out.len()`.
///
/// Panics if an operand holds fewer than `out.len()` elements.
pub fn unary(settings: Settings, op: Unary, x: Src, out: &mut [f32]) {
    x.check(out.len());
    dispatch(settings.path, UnaryTask { op, x, out, mode: settings.mode });
}

/// Writes `op(a[i], b[i])` into `out[i]` for every `i < out.len()`.
///
/// Panics if an operand holds fewer than `out.len()` elements.
pub fn binary(settings: Settings, op: Binary, a: Src, b: Src, out: &mut [f32]) {
    a.check(out.len());
    b.check(out.len());
    dispatch(settings.path, BinaryTask { op, a, b, out, mode: settings.mode });
}

/// Widest lane count of any path (AVX-512).
const MAX_WIDTH: usize = 16;

impl Src<'_> {
    /// The operand seen from element `i` on (for a caller cutting a loop into chunks).
    pub fn skip_to(self, i: usize) -> Self {
        match self {
            Src::Contig(d) => Src::Contig(&d[i.min(d.len())..]),
            Src::Splat(v) => Src::Splat(v),
            Src::Strided(d, s) => Src::Strided(&d[(i * s).min(d.len())..], s),
        }
    }

    fn check(&self, n: usize) {
        let ok = match *self {
            Src::Contig(d) => d.len() >= n,
            Src::Splat(_) => true,
            Src::Strided(d, stride) => n == 0 || d.len() > (n - 1) * stride,
        };
        assert!(ok, "lane loop operand shorter than the output ({n} elements)");
    }

    /// The operand seen from element `i` on.
    #[inline(always)]
    fn skip(self, i: usize) -> Self {
        match self {
            Src::Contig(d) => Src::Contig(&d[i..]),
            Src::Splat(v) => Src::Splat(v),
            Src::Strided(d, stride) => Src::Strided(&d[(i * stride).min(d.len())..], stride),
        }
    }

    /// Elements `i .. i + L::WIDTH`.
    #[inline(always)]
    fn load<L: Lanes>(&self, i: usize) -> L {
        match *self {
            Src::Contig(d) => L::load(&d[i..]),
            Src::Splat(v) => L::splat(v),
            Src::Strided(d, stride) => {
                let mut buf = [0.0f32; MAX_WIDTH];
                for (j, b) in buf[..L::WIDTH].iter_mut().enumerate() {
                    *b = d[(i + j) * stride];
                }
                L::load(&buf)
            }
        }
    }
}

/// An element-wise function of one lane vector.
trait UnaryKernel {
    fn apply<L: Lanes>(x: L) -> L;
}

/// An element-wise function of two lane vectors.
trait BinaryKernel {
    fn apply<L: Lanes>(a: L, b: L) -> L;
}

macro_rules! kernels {
    ($trait:ident: $($name:ident($($arg:ident),+) => $body:expr;)*) => {$(
        struct $name;
        impl $trait for $name {
            #[inline(always)]
            fn apply<L: Lanes>($($arg: L),+) -> L {
                $body
            }
        }
    )*};
}

kernels! { UnaryKernel:
    NegK(x) => x.neg();
    ReluK(x) => L::select(x.le(L::splat(0.0)), L::splat(0.0), x);
    SigmoidK(x) => tr::sigmoid(x);
    TanhK(x) => tr::tanh(x);
    GeluErfK(x) => tr::gelu_erf(x);
    GeluTanhK(x) => tr::gelu_tanh(x);
    ExpK(x) => tr::exp(x);
    LogK(x) => tr::log(x);
}

kernels! { BinaryKernel:
    AddK(a, b) => a.add(b);
    SubK(a, b) => a.sub(b);
    MulK(a, b) => a.mul(b);
    DivK(a, b) => a.div(b);
    ReluBackK(g, y) => L::select(y.gt(L::splat(0.0)), g, L::splat(0.0));
    SigmoidBackK(g, y) => g.mul(y).mul(L::splat(1.0).sub(y));
    TanhBackK(g, y) => g.mul(L::splat(1.0).sub(y.mul(y)));
    GeluErfBackK(g, x) => g.mul(tr::gelu_erf_grad(x));
    GeluTanhBackK(g, x) => g.mul(tr::gelu_tanh_grad(x));
}

/// Full `L` vectors over the front of `out`, then width 1 over the tail.
#[inline(always)]
fn map1<L: Lanes, K: UnaryKernel>(x: Src, out: &mut [f32], mode: Mode) {
    let full = out.len() / L::WIDTH * L::WIDTH;
    let (front, tail) = out.split_at_mut(full);
    map1_full::<L, K>(x, front, mode);
    map1_full::<f32, K>(x.skip(full), tail, mode);
}

#[inline(always)]
fn map1_full<L: Lanes, K: UnaryKernel>(x: Src, out: &mut [f32], mode: Mode) {
    for (c, o) in out.chunks_exact_mut(L::WIDTH).enumerate() {
        finish(K::apply(x.load::<L>(c * L::WIDTH)), mode).store(o);
    }
}

/// Full `L` vectors over the front of `out`, then width 1 over the tail.
#[inline(always)]
fn map2<L: Lanes, K: BinaryKernel>(a: Src, b: Src, out: &mut [f32], mode: Mode) {
    let full = out.len() / L::WIDTH * L::WIDTH;
    let (front, tail) = out.split_at_mut(full);
    map2_full::<L, K>(a, b, front, mode);
    map2_full::<f32, K>(a.skip(full), b.skip(full), tail, mode);
}

#[inline(always)]
fn map2_full<L: Lanes, K: BinaryKernel>(a: Src, b: Src, out: &mut [f32], mode: Mode) {
    for (c, o) in out.chunks_exact_mut(L::WIDTH).enumerate() {
        let i = c * L::WIDTH;
        finish(K::apply(a.load::<L>(i), b.load::<L>(i)), mode).store(o);
    }
}

struct UnaryTask<'a, 'o> {
    op: Unary,
    x: Src<'a>,
    out: &'o mut [f32],
    mode: Mode,
}

impl LaneTask for UnaryTask<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self) {
        let UnaryTask { op, x, out, mode } = self;
        match op {
            Unary::Neg => map1::<L, NegK>(x, out, mode),
            Unary::Relu => map1::<L, ReluK>(x, out, mode),
            Unary::Sigmoid => map1::<L, SigmoidK>(x, out, mode),
            Unary::Tanh => map1::<L, TanhK>(x, out, mode),
            Unary::GeluErf => map1::<L, GeluErfK>(x, out, mode),
            Unary::GeluTanh => map1::<L, GeluTanhK>(x, out, mode),
            Unary::Exp => map1::<L, ExpK>(x, out, mode),
            Unary::Log => map1::<L, LogK>(x, out, mode),
        }
    }
}

struct BinaryTask<'a, 'b, 'o> {
    op: Binary,
    a: Src<'a>,
    b: Src<'b>,
    out: &'o mut [f32],
    mode: Mode,
}

impl LaneTask for BinaryTask<'_, '_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self) {
        let BinaryTask { op, a, b, out, mode } = self;
        match op {
            Binary::Add => map2::<L, AddK>(a, b, out, mode),
            Binary::Sub => map2::<L, SubK>(a, b, out, mode),
            Binary::Mul => map2::<L, MulK>(a, b, out, mode),
            Binary::Div => map2::<L, DivK>(a, b, out, mode),
            Binary::ReluBackward => map2::<L, ReluBackK>(a, b, out, mode),
            Binary::SigmoidBackward => map2::<L, SigmoidBackK>(a, b, out, mode),
            Binary::TanhBackward => map2::<L, TanhBackK>(a, b, out, mode),
            Binary::GeluErfBackward => map2::<L, GeluErfBackK>(a, b, out, mode),
            Binary::GeluTanhBackward => map2::<L, GeluTanhBackK>(a, b, out, mode),
        }
    }
}
