//! NaN, ±∞, ±0 and subnormals through every registered operator in exact mode.
//!
//! For each gradient-check case of each registered operator (read from the registry, so a
//! new `#[op]` is covered with no list to keep), special values are written into the
//! case's `f32` inputs at spread positions ([`VARIANTS`]; index inputs are left alone).
//! The case then runs forward and backward (seeded with ones) in exact mode on the scalar
//! path with 1 thread (the reference) and on every supported path with 1 and 2 threads.
//! Every run must give the same outcome: the same bits of the output and of every input's
//! gradient, or the same error. A NaN anywhere in the reference output or gradients must
//! be the canonical `0x7FC00000`, and nothing may panic (bad input gets an `Error`).
//!
//! The NaN fed in is the canonical one, so a non-canonical NaN in a result was made by the
//! operator (an invalid operation such as `∞ − ∞` gives `0xFFC00000` on x86 and
//! `0x7FC00000` on ARM), which is exactly what exact mode promises to hide.

use om_core::compute::{Compute, KernelPath, Mode, Settings};
use om_core::kernels::CANONICAL_NAN;
use om_core::registry::Case;
use om_core::{DType, Result, Tensor};
use om_tests::panic_message;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The special values written into the inputs.
const SPECIALS: [f32; 10] = [
    f32::NAN, // std's NAN is the canonical 0x7FC00000 (asserted below)
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    1e-40,  // subnormal
    -3e-39, // subnormal
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    1e30,
];

/// The finite special values (so that gradients stay meaningful): signed zeros, subnormals,
/// the smallest normal and a large value.
const FINITE_SPECIALS: [f32; 7] = [0.0, -0.0, 1e-40, -3e-39, f32::MIN_POSITIVE, -1e-45, 1e30];

/// `(name, values, period, phase)`: element `k` of each `f32` input is replaced by
/// `values[(k / period + phase) % len]` when `k % period == phase % period`.
const VARIANTS: [(&str, &[f32], usize, usize); 4] = [
    ("every 3rd element special", &SPECIALS, 3, 0),
    ("every 4th element special (shifted)", &SPECIALS, 4, 3),
    ("every element special", &SPECIALS, 1, 0),
    ("every 2nd element a finite special", &FINITE_SPECIALS, 2, 1),
];

/// The outcome of one run: the bits of the output and of each input's gradient (empty when
/// the input gets none), an error message, or a panic message.
#[derive(Debug, PartialEq)]
enum Outcome {
    Ok(Vec<Vec<u32>>),
    Err(String),
    Panic(String),
}

/// The case's inputs with special values written in (fresh leaves, requiring gradients
/// where the case's inputs do).
fn with_specials(case: &Case, values: &[f32], period: usize, phase: usize) -> Result<Vec<Tensor>> {
    case.inputs
        .iter()
        .map(|t| {
            if t.dtype() != DType::F32 {
                return Ok(t.detach());
            }
            let mut v = t.to_vec();
            for (k, x) in v.iter_mut().enumerate() {
                if k % period == phase % period {
                    *x = values[(k / period + phase) % values.len()];
                }
            }
            let fresh = Tensor::from_vec(v, t.shape())?;
            if t.needs_grad() {
                fresh.requires_grad()
            } else {
                Ok(fresh)
            }
        })
        .collect()
}

fn bits_of(t: &Tensor) -> Vec<u32> {
    match t.dtype() {
        DType::F32 => t.to_vec().iter().map(|v| v.to_bits()).collect(),
        _ => t.to_vec_i32().iter().map(|&v| v as u32).collect(),
    }
}

/// Runs `case` forward and backward on special-valued inputs under `settings`.
fn run(case: &Case, variant: usize, settings: Settings) -> Outcome {
    let (_, values, period, phase) = VARIANTS[variant];
    let attempt = || -> Result<Vec<Vec<u32>>> {
        Compute::with(settings, || {
            let inputs = with_specials(case, values, period, phase)?;
            let out = (case.f)(&inputs)?;
            let mut bits = vec![bits_of(&out)];
            if out.needs_grad() {
                out.backward_with(Some(&Tensor::ones(out.shape())?), false)?;
                bits.extend(inputs.iter().map(|x| x.grad().map(|g| bits_of(&g)).unwrap_or_default()));
            }
            Ok(bits)
        })
    };
    match catch_unwind(AssertUnwindSafe(attempt)) {
        Ok(Ok(b)) => Outcome::Ok(b),
        Ok(Err(e)) => Outcome::Err(e.to_string()),
        Err(p) => Outcome::Panic(panic_message(&*p)),
    }
}

/// The first non-canonical NaN in `bits` (output first, then gradients), as
/// `(tensor index, element, bits)`.
fn non_canonical_nan(bits: &[Vec<u32>]) -> Option<(usize, usize, u32)> {
    bits.iter()
        .enumerate()
        .find_map(|(t, v)| v.iter().enumerate().find(|(_, &b)| f32::from_bits(b).is_nan() && b != CANONICAL_NAN).map(|(i, &b)| (t, i, b)))
}

#[test]
fn special_values_give_the_same_bits_everywhere_and_canonical_nans() {
    assert_eq!(f32::NAN.to_bits(), CANONICAL_NAN, "the NaN fed in is the canonical one");
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    let reference = Settings { mode: Mode::Exact, threads: 1, path: KernelPath::Scalar };
    let mut others = Vec::new();
    for path in KernelPath::supported() {
        for threads in [1, 2] {
            if (path, threads) != (KernelPath::Scalar, 1) {
                others.push(Settings { mode: Mode::Exact, threads, path });
            }
        }
    }
    let (mut runs, mut ok, mut errors, mut with_nan) = (0usize, 0usize, 0usize, 0usize);
    let mut failures: Vec<String> = Vec::new();
    for entry in &entries {
        for case in (entry.cases)() {
            for (variant, (what, ..)) in VARIANTS.iter().enumerate() {
                let label = format!("{}::{} ({what})", entry.name, case.name);
                let want = run(&case, variant, reference);
                runs += 1;
                match &want {
                    Outcome::Ok(bits) => {
                        ok += 1;
                        with_nan += bits.iter().flatten().any(|&b| f32::from_bits(b).is_nan()) as usize;
                        if let Some((t, i, b)) = non_canonical_nan(bits) {
                            let which = if t == 0 { "output".to_string() } else { format!("gradient of input {}", t - 1) };
                            failures.push(format!("{label}: {which}[{i}] is the NaN {b:#010x}, not {CANONICAL_NAN:#010x}"));
                        }
                    }
                    Outcome::Err(_) => errors += 1,
                    Outcome::Panic(m) => failures.push(format!("{label}: PANIC: {m}")),
                }
                for &s in &others {
                    let got = run(&case, variant, s);
                    if got != want {
                        let show = |o: &Outcome| match o {
                            Outcome::Ok(_) => "bits".to_string(),
                            Outcome::Err(e) => format!("error `{e}`"),
                            Outcome::Panic(m) => format!("panic `{m}`"),
                        };
                        failures.push(format!(
                            "{label}: {} with {} threads gives other {} than scalar with 1 thread ({})",
                            s.path,
                            s.threads,
                            show(&got),
                            show(&want)
                        ));
                    }
                }
            }
        }
    }
    println!(
        "{} operators, {runs} special-valued runs ({ok} ok, {with_nan} of them with NaN results, {errors} refused) × {} settings",
        entries.len(),
        others.len() + 1
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
