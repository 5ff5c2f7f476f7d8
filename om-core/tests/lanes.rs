//! Every path and mode must reproduce the scalar path bit for bit, for every op, length
//! 1..=150 and operand form; exact mode writes every NaN as the canonical quiet NaN.

use om_core::compute::{KernelPath, Mode, Settings};
use om_core::kernels::lanes::{binary, unary, Binary, Src, Unary};
use om_core::kernels::CANONICAL_NAN;

const UNARY: [Unary; 10] =
    [Unary::Neg, Unary::Relu, Unary::Sigmoid, Unary::Tanh, Unary::GeluErf, Unary::GeluTanh, Unary::Exp, Unary::Log, Unary::Sin, Unary::Cos];

const BINARY: [Binary; 11] = [
    Binary::Add,
    Binary::Sub,
    Binary::Mul,
    Binary::Div,
    Binary::ReluBackward,
    Binary::SigmoidBackward,
    Binary::TanhBackward,
    Binary::GeluErfBackward,
    Binary::GeluTanhBackward,
    Binary::SinBackward,
    Binary::CosBackward,
];

const MAX_LEN: usize = 150;

/// Special values mixed into the pseudo-random inputs.
const SPECIAL: [f32; 26] = [
    f32::NAN,
    -f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    1e-45,
    -1e-45,
    1e-40,
    -3e-39,
    f32::MIN_POSITIVE,
    f32::MAX,
    f32::MIN,
    1e30,
    -1e30,
    1e-30,
    88.72,
    -103.9,
    0.625,
    -0.875,
    20.5,
    -20.5,
    1.0,
    -1.0,
    4096.0,
    -1e5,
];

/// Deterministic inputs: specials, NaNs with payloads, and values spread over many
/// magnitudes.
fn inputs(seed: u64, len: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = (state >> 32) as u32;
            match r % 8 {
                0 => SPECIAL[(r >> 8) as usize % SPECIAL.len()],
                1 => f32::from_bits(r | 0x7f80_0001), // NaN with payload (either sign)
                2 => f32::from_bits(r),               // any bit pattern
                _ => (r as f32 / u32::MAX as f32 - 0.5) * 24.0,
            }
        })
        .collect()
}

fn settings(path: KernelPath, mode: Mode) -> Settings {
    Settings { mode, threads: 1, path }
}

/// Operand forms over `data` for a loop of `n` elements.
fn forms(data: &[f32], n: usize) -> Vec<(String, Src<'_>)> {
    vec![
        ("contig".into(), Src::Contig(&data[..n])),
        ("splat".into(), Src::Splat(data[n % data.len()])),
        ("stride2".into(), Src::Strided(&data[..2 * n - 1], 2)),
        ("stride3".into(), Src::Strided(&data[..3 * n - 2], 3)),
    ]
}

fn assert_same(path: KernelPath, mode: Mode, what: &str, got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = match mode {
            Mode::Exact => g.to_bits() == w.to_bits(),
            Mode::Fast => g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
        };
        assert!(same, "{path} {mode} {what} len {} at {i}: {g:e} vs scalar {w:e}", got.len());
        if mode == Mode::Exact && g.is_nan() {
            assert_eq!(g.to_bits(), CANONICAL_NAN, "{path} {what}: NaN not canonical");
        }
    }
}

#[test]
fn unary_matches_scalar_on_every_path() {
    let data = inputs(1, 3 * MAX_LEN);
    for mode in [Mode::Exact, Mode::Fast] {
        for n in 1..=MAX_LEN {
            for (form, x) in forms(&data, n) {
                for op in UNARY {
                    let mut want = vec![0.0; n];
                    unary(settings(KernelPath::Scalar, mode), op, x, &mut want);
                    for path in KernelPath::supported() {
                        let mut got = vec![0.0; n];
                        unary(settings(path, mode), op, x, &mut got);
                        assert_same(path, mode, &format!("{op:?} {form}"), &got, &want);
                    }
                }
            }
        }
    }
}

#[test]
fn binary_matches_scalar_on_every_path() {
    let da = inputs(2, 3 * MAX_LEN);
    let db = inputs(3, 3 * MAX_LEN);
    for mode in [Mode::Exact, Mode::Fast] {
        for n in 1..=MAX_LEN {
            for (fa, a) in forms(&da, n) {
                for (fb, b) in forms(&db, n) {
                    for op in BINARY {
                        let mut want = vec![0.0; n];
                        binary(settings(KernelPath::Scalar, mode), op, a, b, &mut want);
                        for path in KernelPath::supported() {
                            let mut got = vec![0.0; n];
                            binary(settings(path, mode), op, a, b, &mut got);
                            let what = format!("{op:?} {fa}/{fb}");
                            assert_same(path, mode, &what, &got, &want);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn simple_values() {
    let s = settings(KernelPath::best(), Mode::Exact);
    let x = [-2.0f32, -0.0, 0.0, 3.0, f32::NAN];
    let mut out = [0.0f32; 5];
    unary(s, Unary::Relu, Src::Contig(&x), &mut out);
    assert_eq!(out[..4], [0.0, 0.0, 0.0, 3.0]);
    assert_eq!(out[2].to_bits(), 0);
    assert_eq!(out[4].to_bits(), CANONICAL_NAN);
    unary(s, Unary::Neg, Src::Contig(&x), &mut out);
    assert_eq!(out[..4], [2.0, 0.0, -0.0, -3.0]);
    binary(s, Binary::Sub, Src::Contig(&x), Src::Splat(1.0), &mut out);
    assert_eq!(out[..4], [-3.0, -1.0, -1.0, 2.0]);
    let g = [1.0f32; 5];
    binary(s, Binary::ReluBackward, Src::Contig(&g), Src::Contig(&x), &mut out);
    assert_eq!(out, [0.0, 0.0, 0.0, 1.0, 0.0]);
    binary(s, Binary::Div, Src::Splat(0.0), Src::Splat(0.0), &mut out);
    assert!(out.iter().all(|v| v.to_bits() == CANONICAL_NAN));
}

#[test]
#[should_panic(expected = "shorter than the output")]
fn short_operand_panics() {
    let mut out = [0.0f32; 4];
    unary(settings(KernelPath::Scalar, Mode::Exact), Unary::Exp, Src::Strided(&[1.0; 6], 2), &mut out);
}
