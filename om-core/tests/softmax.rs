//! Softmax rows: identical bits on every path and thread count in exact mode, rows sum to
//! one, and the values follow an `f64` reference.

use om_core::compute::{KernelPath, Mode, Settings};
use om_core::kernels::softmax::{log_softmax_rows, softmax_rows};
use om_core::kernels::CANONICAL_NAN;

fn data(len: usize, scale: f32) -> Vec<f32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}

type RowFn = fn(Settings, &[f32], &mut [f32], usize);

fn run(f: RowFn, path: KernelPath, mode: Mode, threads: usize, x: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    f(Settings { mode, threads, path }, x, &mut out, n);
    out
}

/// `(softmax, log_softmax)` of one row in `f64`.
fn reference(row: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
    let soft = row.iter().map(|&v| (v as f64 - m).exp() / s).collect();
    let log = row.iter().map(|&v| v as f64 - m - s.ln()).collect();
    (soft, log)
}

const SHAPES: [(usize, usize); 6] = [(1, 1), (3, 7), (5, 16), (40, 33), (7, 1000), (300, 100)];

#[test]
fn exact_mode_is_identical_across_paths_and_threads() {
    for (rows, n) in SHAPES {
        let x = data(rows * n, 30.0);
        for f in [softmax_rows as RowFn, log_softmax_rows] {
            let want = run(f, KernelPath::Scalar, Mode::Exact, 1, &x, n);
            for path in KernelPath::supported() {
                for threads in [1, 2, 3, 8] {
                    let got = run(f, path, Mode::Exact, threads, &x, n);
                    let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{path} threads {threads} rows {rows} n {n}");
                }
            }
        }
    }
}

#[test]
fn rows_summed_side_by_side_have_the_bits_of_one_row_at_a_time() {
    // Groups of eight rows share their sums' loop; a row passed alone takes the one-row
    // path. Both must give the same bits, in both modes and on every path.
    for (rows, n) in [(20, 64), (40, 33), (9, 1000), (300, 100)] {
        let x = data(rows * n, 30.0);
        for mode in [Mode::Exact, Mode::Fast] {
            for path in KernelPath::supported() {
                for f in [softmax_rows as RowFn, log_softmax_rows] {
                    let all = run(f, path, mode, 1, &x, n);
                    for r in 0..rows {
                        let one = run(f, path, mode, 1, &x[r * n..(r + 1) * n], n);
                        let same = one.iter().zip(&all[r * n..]).all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{path} {mode:?} row {r} of {rows}x{n}");
                    }
                }
            }
        }
    }
}

#[test]
fn rows_sum_to_one_and_follow_f64() {
    for mode in [Mode::Exact, Mode::Fast] {
        for (rows, n) in SHAPES {
            let x = data(rows * n, 30.0);
            let soft = run(softmax_rows, KernelPath::best(), mode, 2, &x, n);
            let log = run(log_softmax_rows, KernelPath::best(), mode, 2, &x, n);
            for r in 0..rows {
                let row = r * n..(r + 1) * n;
                let sum: f64 = soft[row.clone()].iter().map(|&v| v as f64).sum();
                assert!((sum - 1.0).abs() < 1e-5, "row {r} of {rows}x{n} sums to {sum}");
                let (ws, wl) = reference(&x[row.clone()]);
                for ((&s, &l), (rs, rl)) in soft[row.clone()].iter().zip(&log[row]).zip(ws.iter().zip(&wl)) {
                    assert!((s as f64 - rs).abs() <= 3e-6 * rs + 1e-44, "softmax {s} vs {rs}");
                    assert!((l as f64 - rl).abs() <= 3e-7 * rl.abs() + 1e-6, "log_softmax {l} vs {rl}");
                }
            }
        }
    }
}

#[test]
fn non_finite_rows() {
    let inf = f32::INFINITY;
    let n = 19;
    let mut x = data(4 * n, 4.0);
    x[..n].fill(-inf); // all -inf: NaN, as in PyTorch
    x[n + 3] = f32::NAN; // a NaN: NaN row
    x[2 * n + 5] = inf; // +inf: NaN row
    x[3 * n + 7] = -inf; // one -inf: probability 0, log-probability -inf
    for path in KernelPath::supported() {
        let soft = run(softmax_rows, path, Mode::Exact, 1, &x, n);
        let log = run(log_softmax_rows, path, Mode::Exact, 1, &x, n);
        for out in [&soft, &log] {
            assert!(out[..3 * n].iter().all(|v| v.to_bits() == CANONICAL_NAN), "{path}");
        }
        assert_eq!(soft[3 * n + 7], 0.0);
        assert_eq!(log[3 * n + 7], -inf);
        assert!(soft[3 * n..].iter().all(|v| v.is_finite()));
    }
}

#[test]
fn empty_input_is_fine() {
    let s = Settings { mode: Mode::Exact, threads: 2, path: KernelPath::best() };
    softmax_rows(s, &[], &mut [], 0);
    log_softmax_rows(s, &[], &mut [], 5);
}
