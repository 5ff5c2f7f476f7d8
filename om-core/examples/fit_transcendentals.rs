//! Fits the polynomial coefficients used by `src/kernels/transcendentals.rs`.
//!
//! Run with `cargo run --release -p om-core --example fit_transcendentals`. For every approximation it prints the
//! coefficients (rounded to `f32`, with their bit patterns) and the weighted error of the
//! `f64` fit. Method: weighted least squares on 4000 Chebyshev-distributed points, solved
//! by Householder QR, refined by Lawson's iteration (reweighting each point by its error)
//! towards the weighted minimax polynomial. The target functions are evaluated in `f64`:
//! `libm::erf`/`libm::erfc`, `f64::exp`/`f64::tanh`, and short Taylor series where the
//! closed form would cancel.

/// One approximation problem: find `p` of degree `degree` in `v` minimising
/// `max |weight(v) * (p(v) - target(v))|` over `[lo, hi]`.
struct Problem {
    name: &'static str,
    lo: f64,
    hi: f64,
    degree: usize,
    target: fn(f64) -> f64,
    weight: fn(f64) -> f64,
}

fn chebyshev_points(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let c = (std::f64::consts::PI * (i as f64 + 0.5) / n as f64).cos();
            0.5 * (lo + hi) + 0.5 * (hi - lo) * c
        })
        .collect()
}

/// Least squares `min |A c - b|` by Householder QR (A is m x n, row-major).
#[allow(clippy::needless_range_loop)] // index form follows the textbook algorithm
fn least_squares(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let (m, n) = (a.len(), a[0].len());
    for k in 0..n {
        let norm = (k..m).map(|i| a[i][k] * a[i][k]).sum::<f64>().sqrt();
        let alpha = if a[k][k] > 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = (k..m).map(|i| a[i][k]).collect();
        v[0] -= alpha;
        let vnorm2: f64 = v.iter().map(|x| x * x).sum();
        if vnorm2 == 0.0 {
            continue;
        }
        for j in k..n {
            let dot: f64 = (k..m).map(|i| v[i - k] * a[i][j]).sum();
            let f = 2.0 * dot / vnorm2;
            (k..m).for_each(|i| a[i][j] -= f * v[i - k]);
        }
        let dot: f64 = (k..m).map(|i| v[i - k] * b[i]).sum();
        let f = 2.0 * dot / vnorm2;
        (k..m).for_each(|i| b[i] -= f * v[i - k]);
    }
    let mut c = vec![0.0; n];
    for k in (0..n).rev() {
        let s: f64 = (k + 1..n).map(|j| a[k][j] * c[j]).sum();
        c[k] = (b[k] - s) / a[k][k];
    }
    c
}

fn eval(c: &[f64], v: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &ci| acc * v + ci)
}

/// Lawson's iteration; the variable is scaled to `v / scale` (scale = max |v|) for conditioning.
fn fit(p: &Problem) -> (Vec<f64>, f64) {
    let xs = chebyshev_points(p.lo, p.hi, 4000);
    let scale = p.lo.abs().max(p.hi.abs());
    let mut lambda = vec![1.0 / xs.len() as f64; xs.len()];
    let mut best = (Vec::new(), f64::INFINITY);
    for _ in 0..400 {
        let rows: Vec<Vec<f64>> = xs
            .iter()
            .zip(&lambda)
            .map(|(&x, &l)| {
                let w = (p.weight)(x) * l.sqrt();
                (0..=p.degree).map(|j| w * (x / scale).powi(j as i32)).collect()
            })
            .collect();
        let rhs = xs.iter().zip(&lambda).map(|(&x, &l)| (p.weight)(x) * l.sqrt() * (p.target)(x)).collect();
        let cs = least_squares(rows, rhs);
        let c: Vec<f64> = cs.iter().enumerate().map(|(j, &cj)| cj / scale.powi(j as i32)).collect();
        let errs: Vec<f64> = xs.iter().map(|&x| ((p.weight)(x) * (eval(&c, x) - (p.target)(x))).abs()).collect();
        let max = errs.iter().cloned().fold(0.0, f64::max);
        if max < best.1 {
            best = (c, max);
        }
        let total: f64 = lambda.iter().zip(&errs).map(|(l, e)| l * e).sum();
        lambda.iter_mut().zip(&errs).for_each(|(l, e)| *l = *l * e / total);
    }
    best
}

/// `(e^r - 1 - r) / r^2`.
fn exp_target(r: f64) -> f64 {
    if r.abs() < 1e-3 {
        (0..12).map(|k| r.powi(k) / (2..k + 3).map(|i| i as f64).product::<f64>()).sum()
    } else {
        (r.exp_m1() - r) / (r * r)
    }
}

/// `(2 atanh(s)/s - 2) / s^2` as a function of `z = s^2`: `sum 2 z^k / (2k+3)`.
fn log_target(z: f64) -> f64 {
    (0..40).map(|k| 2.0 * z.powi(k) / (2 * k + 3) as f64).sum()
}

/// `(tanh(x) - x) / x^3` as a function of `z = x^2`.
fn tanh_target(z: f64) -> f64 {
    let x = z.sqrt();
    if x < 0.02 {
        -1.0 / 3.0 + 2.0 * z / 15.0 - 17.0 * z * z / 315.0 + 62.0 * z * z * z / 2835.0
    } else {
        (x.tanh() - x) / (x * z)
    }
}

/// `erf(a)/a - 1` as a function of `z = a^2`.
fn erf_target(z: f64) -> f64 {
    let a = z.sqrt();
    if a == 0.0 {
        std::f64::consts::FRAC_2_SQRT_PI - 1.0
    } else {
        libm::erf(a) / a - 1.0
    }
}

/// `ln(erfc(a) e^(a^2) / t)` as a function of `t = 1/(1 + a/2)`.
fn erfc_target(t: f64) -> f64 {
    let a = 2.0 / t - 2.0;
    libm::erfc(a).ln() + a * a - t.ln()
}

fn main() {
    let problems = [
        Problem {
            name: "exp: P(r), e^r = 1 + (r + r^2 P(r)), |r| <= 0.347",
            lo: -0.347,
            hi: 0.347,
            degree: 4,
            target: exp_target,
            weight: |r| r * r / r.exp(),
        },
        Problem {
            name: "log: Q(z), log(1+f) = 2s + s z Q(z), z = s^2 <= 0.0295",
            lo: 0.0,
            hi: 0.0295,
            degree: 3,
            target: log_target,
            weight: |z| z,
        },
        Problem {
            name: "tanh: P(z), tanh(x) = x + x z P(z), z = x^2, |x| <= 0.625",
            lo: 0.0,
            hi: 0.625 * 0.625,
            degree: 5,
            target: tanh_target,
            weight: |z| z * z.sqrt() / z.sqrt().tanh(),
        },
        Problem {
            name: "erf: P(z), erf(a) = a + a P(z), z = a^2, a < 0.875",
            lo: 0.0,
            hi: 0.875 * 0.875,
            degree: 6,
            target: erf_target,
            weight: |z| 1.0 / (1.0 + erf_target(z)),
        },
        Problem {
            name: "erfc: G(t), erfc(a) = t exp(G(t) - a^2), t = 1/(1+a/2), 0.875 <= a <= 10.1",
            lo: 1.0 / (1.0 + 10.1 / 2.0),
            hi: 1.0 / (1.0 + 0.875 / 2.0),
            degree: 9,
            target: erfc_target,
            weight: |_| 1.0,
        },
    ];
    for p in &problems {
        let (c, err) = fit(p);
        println!("{}\n  weighted max error {:.3e} (2^{:.1})", p.name, err, err.log2());
        for (j, cj) in c.iter().enumerate() {
            let f = *cj as f32;
            println!("  c{j} = {f:e} (0x{:08x})", f.to_bits());
        }
    }
}
