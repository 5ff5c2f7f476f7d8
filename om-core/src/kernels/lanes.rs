//! Element-wise lane loops: [`unary`] and [`binary`] over contiguous, broadcast or
//! strided operands, and [`binary_in_place`] (the first operand is the output).
//!
//! Each element is computed by one generic kernel (a single IEEE operation, a
//! compare-and-select, or a function of `transcendentals`; `Pow` runs the scalar `f64`
//! `math64::powf` on each lane) with no fused
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

use super::simd::{Lanes, Scalar};
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
    dispatch(settings.path, BinaryTask { op, a: Some(a), b, out, mode: settings.mode });
}

/// Writes `op(a[i], b[i])` over `a[i]` for every `i < a.len()`: the bits [`binary`] writes
/// into a separate output (each element is read before its own result is stored).
///
/// Panics if `b` holds fewer than `a.len()` elements.
pub fn binary_in_place(settings: Settings, op: Binary, a: &mut [f32], b: Src) {
    b.check(a.len());
    dispatch(settings.path, BinaryTask { op, a: None, b, out: a, mode: settings.mode });
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
    fn load<L: Lanes>(&self, isa: L::Isa, i: usize) -> L {
        match *self {
            Src::Contig(d) => L::load(isa, &d[i..]),
            Src::Splat(v) => L::splat(isa, v),
            Src::Strided(d, stride) => {
                let mut buf = [0.0f32; MAX_WIDTH];
                for (j, b) in buf[..L::WIDTH].iter_mut().enumerate() {
                    *b = d[(i + j) * stride];
                }
                L::load(isa, &buf)
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

/// Declares a family of lane operations in one place: the public enum with one documented
/// variant per operation, and `run`, which applies the variant's body (a generic function of
/// lane vectors, instantiated at the path's width and at width 1) over an output with
/// `$map`. Adding an operation is one line here.
macro_rules! lane_ops {
    (
        $(#[$meta:meta])*
        pub enum $enum:ident: $kernel:ident via $map:ident($src:ty) {
            $( $(#[$vmeta:meta])* $variant:ident($($arg:ident),+) => $body:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $enum {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $enum {
            /// Writes the operation of every element into `out` with lane type `L`.
            #[inline(always)]
            fn run<L: Lanes>(self, isa: L::Isa, src: $src, out: &mut [f32], mode: Mode) {
                match self {
                    $( $enum::$variant => {
                        struct K;
                        impl $kernel for K {
                            #[inline(always)]
                            fn apply<L: Lanes>($($arg: L),+) -> L {
                                $body
                            }
                        }
                        $map::<L, K>(isa, src, out, mode)
                    } )*
                }
            }
        }
    };
}

lane_ops! {
    /// Element-wise functions of one operand.
    pub enum Unary: UnaryKernel via map1(Src) {
        /// `-x` (sign flip).
        Neg(x) => x.neg();
        /// `x` if `x > 0`, `+0` if `x <= 0`, NaN stays NaN.
        Relu(x) => {
            let zero = L::splat(x.isa(), 0.0);
            L::select(x.le(zero), zero, x)
        };
        /// `1 / (1 + e^(-x))`.
        Sigmoid(x) => tr::sigmoid(x);
        /// Hyperbolic tangent.
        Tanh(x) => tr::tanh(x);
        /// `x Φ(x)`.
        GeluErf(x) => tr::gelu_erf(x);
        /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
        GeluTanh(x) => tr::gelu_tanh(x);
        /// `e^x`.
        Exp(x) => tr::exp(x);
        /// Natural logarithm.
        Log(x) => tr::log(x);
        /// Sine.
        Sin(x) => tr::sin(x);
        /// Cosine.
        Cos(x) => tr::cos(x);
    }
}

lane_ops! {
    /// Element-wise functions of two operands `a`, `b`.
    pub enum Binary: BinaryKernel via map2((Option<Src>, Src)) {
        /// `a + b`.
        Add(a, b) => a.add(b);
        /// `a - b`.
        Sub(a, b) => a.sub(b);
        /// `a * b`.
        Mul(a, b) => a.mul(b);
        /// `a / b`.
        Div(a, b) => a.div(b);
        /// `a = g`, `b = y` (relu output): `g` where `y > 0`, else `0` (also for NaN `y`).
        ReluBackward(g, y) => {
            let zero = L::splat(y.isa(), 0.0);
            L::select(y.gt(zero), g, zero)
        };
        /// `a = g`, `b = y`: `(g y)(1 - y)`.
        SigmoidBackward(g, y) => g.mul(y).mul(L::splat(y.isa(), 1.0).sub(y));
        /// `a = g`, `b = y`: `g (1 - y y)`.
        TanhBackward(g, y) => g.mul(L::splat(y.isa(), 1.0).sub(y.mul(y)));
        /// `a = g`, `b = x`: `g (Φ(x) + x φ(x))`.
        GeluErfBackward(g, x) => g.mul(tr::gelu_erf_grad(x));
        /// `a = g`, `b = x`: `g` times the slope of the tanh GELU.
        GeluTanhBackward(g, x) => g.mul(tr::gelu_tanh_grad(x));
        /// `a = g`, `b = x`: `g cos(x)` (the slope of `sin`).
        SinBackward(g, x) => g.mul(tr::cos(x));
        /// `a = g`, `b = x`: `g (−sin(x))` (the slope of `cos`).
        CosBackward(g, x) => g.mul(tr::sin(x).neg());
        /// `a^b` (C99 `pow`'s special values; `math64::powf`, the same `f64` algorithm on
        /// every path).
        Pow(a, b) => tr::pow(a, b);
    }
}

/// Full `L` vectors over the front of `out`, then width 1 over the tail.
#[inline(always)]
fn map1<L: Lanes, K: UnaryKernel>(isa: L::Isa, x: Src, out: &mut [f32], mode: Mode) {
    let full = out.len() / L::WIDTH * L::WIDTH;
    let (front, tail) = out.split_at_mut(full);
    map1_full::<L, K>(isa, x, front, mode);
    map1_full::<f32, K>(Scalar, x.skip(full), tail, mode);
}

#[inline(always)]
fn map1_full<L: Lanes, K: UnaryKernel>(isa: L::Isa, x: Src, out: &mut [f32], mode: Mode) {
    for (c, o) in out.chunks_exact_mut(L::WIDTH).enumerate() {
        finish(K::apply(x.load::<L>(isa, c * L::WIDTH)), mode).store(o);
    }
}

/// Full `L` vectors over the front of `out`, then width 1 over the tail; `a` is `None`
/// when `out` itself holds the first operand (an in-place map).
#[inline(always)]
fn map2<L: Lanes, K: BinaryKernel>(isa: L::Isa, (a, b): (Option<Src>, Src), out: &mut [f32], mode: Mode) {
    let full = out.len() / L::WIDTH * L::WIDTH;
    let (front, tail) = out.split_at_mut(full);
    map2_full::<L, K>(isa, a, b, front, mode);
    map2_full::<f32, K>(Scalar, a.map(|a| a.skip(full)), b.skip(full), tail, mode);
}

#[inline(always)]
fn map2_full<L: Lanes, K: BinaryKernel>(isa: L::Isa, a: Option<Src>, b: Src, out: &mut [f32], mode: Mode) {
    match a {
        Some(a) => {
            for (c, o) in out.chunks_exact_mut(L::WIDTH).enumerate() {
                let i = c * L::WIDTH;
                finish(K::apply(a.load::<L>(isa, i), b.load::<L>(isa, i)), mode).store(o);
            }
        }
        None => {
            for (c, o) in out.chunks_exact_mut(L::WIDTH).enumerate() {
                let i = c * L::WIDTH;
                finish(K::apply(L::load(isa, o), b.load::<L>(isa, i)), mode).store(o);
            }
        }
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
    fn run<L: Lanes>(self, isa: L::Isa) {
        let UnaryTask { op, x, out, mode } = self;
        op.run::<L>(isa, x, out, mode)
    }
}

struct BinaryTask<'a, 'b, 'o> {
    op: Binary,
    /// `None`: `out` holds the first operand.
    a: Option<Src<'a>>,
    b: Src<'b>,
    out: &'o mut [f32],
    mode: Mode,
}

impl LaneTask for BinaryTask<'_, '_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let BinaryTask { op, a, b, out, mode } = self;
        op.run::<L>(isa, (a, b), out, mode)
    }
}
