//! Every supported path × both modes × several thread counts against the plain canonical
//! loop, bit for bit.

use super::{gemm, gemm_bias, gemm_scratch_len, gemm_with_scratch, padded_c_len, Bias, MatMut, MatRef, DIRECT_A_STRIDE};
use crate::compute::{KernelPath, Mode, Settings};

/// The canonical loop: `acc = +0.0; acc = acc + a·b` (exact) or `a.mul_add(b, acc)` (fast).
fn reference(fast: bool, a: MatRef, b: MatRef) -> Vec<f32> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for p in 0..k {
                let (x, y) = (a.at(i, p), b.at(p, j));
                acc = if fast { x.mul_add(y, acc) } else { acc + x * y };
            }
            c[i * n + j] = acc;
        }
    }
    c
}

/// Deterministic values in [-1, 1) with varied magnitudes, so rounding differs per order.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let unit = (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            unit * [1.0, 0.01, 3.0, 1e-3][(s & 3) as usize]
        })
        .collect()
}

/// One test case: shape and leading dimensions.
#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    k: usize,
    n: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
}

impl Case {
    fn new(m: usize, k: usize, n: usize) -> Case {
        Case { m, k, n, lda: k.max(1), ldb: n.max(1), ldc: n.max(1) }
    }

    fn ld(self, lda: usize, ldb: usize, ldc: usize) -> Case {
        Case { lda, ldb, ldc, ..self }
    }

    fn a_len(self) -> usize {
        if self.m == 0 {
            0
        } else {
            (self.m - 1) * self.lda + self.k
        }
    }

    fn b_len(self) -> usize {
        if self.k == 0 {
            0
        } else {
            (self.k - 1) * self.ldb + self.n
        }
    }

    /// Runs `gemm` over a C prefilled with a sentinel; returns the m×n result (dense)
    /// after checking that nothing outside it was written.
    fn run(self, settings: Settings, a: &[f32], b: &[f32]) -> Vec<f32> {
        const SENTINEL: f32 = -7.25;
        let Case { m, k, n, lda, ldb, ldc } = self;
        let mut c = vec![SENTINEL; m * ldc + 5];
        gemm(settings, MatRef::with_stride(a, m, k, lda), MatRef::with_stride(b, k, n, ldb), MatMut::with_stride(&mut c, m, n, ldc));
        let mut out = Vec::with_capacity(m * n);
        for (idx, &v) in c.iter().enumerate() {
            let (i, j) = (idx / ldc, idx % ldc);
            if i < m && j < n {
                out.push(v);
            } else {
                assert_eq!(v.to_bits(), SENTINEL.to_bits(), "{self:?}: wrote outside C at {idx}");
            }
        }
        out
    }
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (m, k, n) in [
        (0, 5, 3),
        (3, 5, 0),
        (0, 0, 0),
        (4, 0, 6),
        (1, 1, 1),
        (1, 7, 1),
        (1, 300, 17),
        (17, 300, 1),
        (2, 3, 5),
        (7, 13, 19),
        (23, 31, 15),
        (24, 16, 16),
        (25, 17, 33),
        (49, 257, 31),
        (64, 64, 64),
        (100, 70, 50),
        (130, 300, 90),
        (97, 600, 47),
        (200, 40, 260),
        (64, 1100, 64),
        (300, 20, 600),
    ] {
        cases.push(Case::new(m, k, n));
    }
    // Leading dimensions wider than the matrices, odd and large powers of two.
    cases.push(Case::new(37, 45, 29).ld(50, 33, 41));
    cases.push(Case::new(70, 300, 53).ld(301, 1024, 1024));
    cases.push(Case::new(40, 300, 40).ld(1024, 1024, 1024));
    // C rows 2 KiB apart with enough rows to take the padded-scratch path.
    cases.push(Case::new(260, 37, 45).ld(37, 45, 512));
    cases.push(Case::new(130, 520, 70).ld(2048, 128, 77));
    cases.push(Case::new(9, 20, 48).ld(4096, 4096, 64));
    // The staged path over several k-blocks (the last stored straight to C), with edge
    // tiles of 1–16 and 17–31 columns of the 32-wide AVX-512 tile.
    cases.push(Case::new(270, 530, 81).ld(530, 81, 1024));
    cases.push(Case::new(257, 300, 40).ld(300, 40, 512));
    // B read in place for a few row panels (m up to 4 panels of the AVX-512 tile), with
    // a narrow edge tile and k over several blocks.
    cases.push(Case::new(56, 600, 100).ld(600, 1024, 100));
    cases.push(Case::new(29, 300, 47));
    // Row chunks that share one packed B per k-block on one thread, and on several
    // threads each keep all of B packed for the chunks they run (four row chunks, two
    // k-blocks, a 16-column edge panel), C rows 2 KiB apart (the staged path).
    cases.push(Case::new(528, 320, 400).ld(320, 400, 512));
    // A read in place (rows `DIRECT_A_STRIDE` apart): one or two k-blocks, short and tall,
    // several chunks, a partial last panel.
    cases.push(Case::new(48, 256, 64).ld(DIRECT_A_STRIDE, 64, 64));
    cases.push(Case::new(13, 270, 81).ld(DIRECT_A_STRIDE, 81, 81));
    cases.push(Case::new(300, 64, 600).ld(DIRECT_A_STRIDE, 600, 600));
    cases.push(Case::new(130, 200, 45).ld(DIRECT_A_STRIDE, 45, 512));
    cases
}

fn settings(path: KernelPath, mode: Mode, threads: usize) -> Settings {
    Settings { mode, threads, path }
}

#[test]
fn every_path_and_thread_count_matches_the_canonical_loop_bit_for_bit() {
    for (ci, case) in cases().into_iter().enumerate() {
        let a = values(case.a_len(), 2 * ci as u64 + 1);
        let b = values(case.b_len(), 2 * ci as u64 + 2);
        let (m, k, n) = (case.m, case.k, case.n);
        let exact = reference(false, MatRef::with_stride(&a, m, k, case.lda), MatRef::with_stride(&b, k, n, case.ldb));
        let fused = reference(true, MatRef::with_stride(&a, m, k, case.lda), MatRef::with_stride(&b, k, n, case.ldb));
        for path in KernelPath::supported() {
            for threads in [1, 2, 3, 8] {
                let got = case.run(settings(path, Mode::Exact, threads), &a, &b);
                assert_bits_eq(&got, &exact, || format!("exact {path} t={threads} {case:?}"));
                // Fast mode is fused on every path but SSE (no FMA in baseline SSE).
                let want = if path == KernelPath::Sse { &exact } else { &fused };
                let got = case.run(settings(path, Mode::Fast, threads), &a, &b);
                assert_bits_eq(&got, want, || format!("fast {path} t={threads} {case:?}"));
            }
        }
    }
}

#[test]
fn fast_mode_is_close_to_the_exact_product() {
    let case = Case::new(33, 500, 29);
    let (a, b) = (values(case.a_len(), 7), values(case.b_len(), 8));
    let exact = reference(false, MatRef::with_stride(&a, 33, 500, 500), MatRef::with_stride(&b, 500, 29, 29));
    for path in KernelPath::supported() {
        let got = case.run(settings(path, Mode::Fast, 2), &a, &b);
        for (i, (&x, &y)) in got.iter().zip(&exact).enumerate() {
            let (r, j) = (i / 29, i % 29);
            let scale: f32 = (0..500).map(|p| (a[r * 500 + p] * b[p * 29 + j]).abs()).sum();
            assert!((x - y).abs() <= 1e-5 * scale + 1e-30, "{path} at {i}: {x} vs {y}");
        }
    }
}

#[test]
fn empty_inner_dimension_gives_positive_zero() {
    for path in KernelPath::supported() {
        for mode in [Mode::Fast, Mode::Exact] {
            let mut c = vec![f32::NAN, -0.0, 5.0, -0.0, f32::INFINITY, 1.0];
            gemm(
                settings(path, mode, 2),
                MatRef::with_stride(&[], 2, 0, 0),
                MatRef::with_stride(&[], 0, 2, 2),
                MatMut::with_stride(&mut c, 2, 2, 3),
            );
            let bits: Vec<u32> = c.iter().map(|v| v.to_bits()).collect();
            let want = [0.0f32, 0.0, 5.0, 0.0, 0.0, 1.0].map(f32::to_bits);
            assert_eq!(bits, want, "{path} {mode}");
        }
    }
}

#[test]
fn empty_output_is_a_no_op() {
    let mut c = vec![3.0f32; 4];
    let s = settings(KernelPath::best(), Mode::Exact, 1);
    gemm(s, MatRef::with_stride(&[], 0, 3, 3), MatRef::row_major(&[0.0; 6], 3, 2), MatMut::with_stride(&mut c, 0, 2, 2));
    gemm(s, MatRef::row_major(&[0.0; 6], 2, 3), MatRef::with_stride(&[], 3, 0, 0), MatMut::with_stride(&mut c, 2, 0, 0));
    assert_eq!(c, [3.0; 4]);
}

#[test]
fn signed_zero_nan_and_infinity_propagate_like_the_canonical_loop() {
    let (m, k, n) = (30, 9, 20);
    let mut a = values(m * k, 11);
    let mut b = values(k * n, 12);
    a[0] = f32::NAN; // row 0 becomes NaN
    a[k + 3] = f32::INFINITY; // row 1: ±inf, or NaN where B is 0
    b[3 * n + 5] = 0.0;
    a[2 * k..3 * k].fill(-0.0); // row 2: -0 products sum to +0
    b[4 * n + 7] = f32::NEG_INFINITY; // column 7: -inf·x
    a[5 * k + 4] = 0.0; // row 5, column 7: 0·(-inf) = NaN
    for path in KernelPath::supported() {
        for (mode, fast) in [(Mode::Exact, false), (Mode::Fast, true)] {
            let fused = fast && path != KernelPath::Sse;
            let want = reference(fused, MatRef::with_stride(&a, m, k, k), MatRef::with_stride(&b, k, n, n));
            let got = Case::new(m, k, n).run(settings(path, mode, 3), &a, &b);
            for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                let same = (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
                assert!(same, "{path} {mode} at {i}: {x} vs {y}");
            }
            assert!(got[..n].iter().all(|v| v.is_nan()));
            assert!(got[2 * n..3 * n].iter().filter(|v| **v != 0.0 || v.is_sign_negative()).all(|v| v.is_nan()));
            assert!(got[n + 5].is_nan() && got[5 * n + 7].is_nan());
        }
    }
}

#[test]
fn an_unsupported_path_falls_back_to_scalar() {
    let unsupported = KernelPath::ALL.into_iter().find(|p| !p.is_supported());
    let Some(path) = unsupported else { return };
    let case = Case::new(13, 40, 11);
    let (a, b) = (values(case.a_len(), 3), values(case.b_len(), 4));
    let got = case.run(settings(path, Mode::Fast, 1), &a, &b);
    let want = case.run(settings(KernelPath::Scalar, Mode::Fast, 1), &a, &b);
    assert_bits_eq(&got, &want, || format!("fallback from {path}"));
}

fn assert_bits_eq(got: &[f32], want: &[f32], what: impl Fn() -> String) {
    assert_eq!(got.len(), want.len(), "{}", what());
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!("{}: first difference at {i}: {} vs {}", what(), got[i], want[i]);
    }
}

/// A dense row-major copy of a view.
fn dense(v: &MatRef) -> Vec<f32> {
    (0..v.rows()).flat_map(|i| (0..v.cols()).map(move |j| v.at(i, j))).collect()
}

/// The four layouts of an `rows × cols` operand over fresh values: row-major with a wide
/// stride, column-major (a transposed matrix read in place), both strides > 1, and a
/// broadcast row (row stride 0).
fn layouts(rows: usize, cols: usize, seed: u64) -> Vec<(&'static str, Vec<f32>, [usize; 2])> {
    let wide = cols + 3;
    vec![
        ("row_major", values(rows * wide, seed), [wide, 1]),
        ("col_major", values(cols * (rows + 1), seed + 1), [1, rows + 1]),
        ("strided", values(rows * cols * 6 + 8, seed + 2), [3 * cols, 2]),
        ("broadcast_row", values(cols, seed + 3), [0, 1]),
    ]
}

#[test]
fn strided_and_transposed_operands_match_the_dense_product_bit_for_bit() {
    for (ci, &(m, k, n)) in
        [(1, 1, 1), (5, 7, 3), (8, 128, 40), (16, 300, 1000), (30, 300, 37), (70, 20, 33), (49, 257, 18), (230, 19, 21)].iter().enumerate()
    {
        let seed = 100 * ci as u64;
        for (an, adata, [ars, acs]) in layouts(m, k, seed) {
            for (bn, bdata, [brs, bcs]) in layouts(k, n, seed + 10) {
                let a = MatRef::new(&adata, m, k, ars, acs).unwrap();
                let b = MatRef::new(&bdata, k, n, brs, bcs).unwrap();
                let (ad, bd) = (dense(&a), dense(&b));
                let exact = reference(false, MatRef::with_stride(&ad, m, k, k), MatRef::with_stride(&bd, k, n, n));
                let fused = reference(true, MatRef::with_stride(&ad, m, k, k), MatRef::with_stride(&bd, k, n, n));
                let bias_c = values(n, seed + 20);
                let bias_r = values(m, seed + 21);
                for path in KernelPath::supported() {
                    for (mode, threads) in [(Mode::Exact, 1), (Mode::Exact, 3), (Mode::Fast, 2)] {
                        let want = if mode == Mode::Fast && path != KernelPath::Sse { &fused } else { &exact };
                        let what = || format!("{an}·{bn} {m}×{k}×{n} {path} {mode} t={threads}");
                        let mut c = vec![f32::NAN; m * n];
                        gemm(settings(path, mode, threads), a, b, MatMut::row_major(&mut c, m, n));
                        assert_bits_eq(&c, want, what);
                        // The fused bias equals a separate add after the product.
                        gemm_bias(settings(path, mode, threads), a, b, MatMut::row_major(&mut c, m, n), Bias::PerCol(&bias_c));
                        let added: Vec<f32> = want.iter().enumerate().map(|(i, &y)| y + bias_c[i % n]).collect();
                        assert_bits_eq(&c, &added, || format!("{} per-column bias", what()));
                        gemm_bias(settings(path, mode, threads), a, b, MatMut::row_major(&mut c, m, n), Bias::PerRow(&bias_r));
                        let added: Vec<f32> = want.iter().enumerate().map(|(i, &y)| y + bias_r[i / n]).collect();
                        assert_bits_eq(&c, &added, || format!("{} per-row bias", what()));
                    }
                }
            }
        }
    }
}

#[test]
fn transposed_view_swaps_shape_and_strides() {
    let data = values(12, 1);
    let a = MatRef::row_major(&data, 3, 4);
    let t = a.t();
    assert_eq!((t.rows(), t.cols(), t.row_stride(), t.col_stride()), (4, 3, 1, 4));
    assert_eq!(t.at(2, 1).to_bits(), a.at(1, 2).to_bits());
}

#[test]
fn views_outside_their_slice_are_refused() {
    let data = [0.0f32; 12];
    assert!(MatRef::new(&data, 3, 4, 4, 1).is_some());
    assert!(MatRef::new(&data, 3, 4, 5, 1).is_none());
    assert!(MatRef::new(&data, 4, 3, 1, 4).is_some());
    assert!(MatRef::new(&data, 4, 3, 1, 5).is_none());
    assert!(MatRef::new(&data, 0, 9, 9, 9).is_some());
    assert!(MatRef::new(&data, 2, 2, usize::MAX, 1).is_none());
    let mut out = [0.0f32; 12];
    assert!(MatMut::new(&mut out, 3, 4, 4).is_some());
    assert!(MatMut::new(&mut out, 3, 4, 3).is_none(), "overlapping rows");
    assert!(MatMut::new(&mut out, 2, 7, 7).is_none());
}

#[test]
fn bias_with_an_empty_inner_dimension_is_the_bias() {
    let mut c = vec![f32::NAN; 6];
    let bias = [1.0, -0.0, 2.5];
    gemm_bias(
        settings(KernelPath::best(), Mode::Exact, 1),
        MatRef::row_major(&[], 2, 0),
        MatRef::row_major(&[], 0, 3),
        MatMut::row_major(&mut c, 2, 3),
        Bias::PerCol(&bias),
    );
    let want = [1.0f32, 0.0, 2.5, 1.0, 0.0, 2.5];
    assert_bits_eq(&c, &want, || "k = 0 with bias".into());
}

#[test]
fn bias_and_transposed_operands_take_the_padded_scratch_path_unchanged() {
    // C rows 2 KiB apart and ≥ 256 rows: computed into the padded scratch, then copied.
    let (m, k, n, ldc) = (260, 37, 45, 512);
    let a_t = values(k * m, 1); // A stored transposed: k × m row-major
    let b = values(k * n, 2);
    let bias = values(n, 3);
    let a = MatRef::row_major(&a_t, k, m).t();
    let ad = dense(&a);
    for path in KernelPath::supported() {
        for (mode, fused) in [(Mode::Exact, false), (Mode::Fast, path != KernelPath::Sse)] {
            let want: Vec<f32> = reference(fused, MatRef::with_stride(&ad, m, k, k), MatRef::with_stride(&b, k, n, n))
                .iter()
                .enumerate()
                .map(|(i, &y)| y + bias[i % n])
                .collect();
            let mut c = vec![f32::NAN; m * ldc];
            let out = MatMut::with_stride(&mut c, m, n, ldc);
            gemm_bias(settings(path, mode, 2), a, MatRef::row_major(&b, k, n), out, Bias::PerCol(&bias));
            let got: Vec<f32> = c.chunks(ldc).flat_map(|row| row[..n].to_vec()).collect();
            assert_bits_eq(&got, &want, || format!("{path} {mode}"));
            assert!(c.chunks(ldc).all(|row| row[n..].iter().all(|v| v.is_nan())), "{path} {mode}: wrote past a row");
        }
    }
}

#[test]
fn the_padded_copy_from_the_callers_scratch_or_none_inside_a_chunk_gives_the_same_bits() {
    // C rows 2 KiB apart and ≥ 256 rows: the padded copy applies (it holds the
    // accumulators between k-blocks, so k spans two of them).
    let (m, k, n, ldc) = (260, 300, 45, 512);
    let (a, b) = (values(m * k, 4), values(k * n, 5));
    let want = reference(false, MatRef::with_stride(&a, m, k, k), MatRef::with_stride(&b, k, n, n));
    let need = padded_c_len(m, n, ldc);
    for path in KernelPath::supported() {
        let s = settings(path, Mode::Exact, 1);
        let run = |scratch: Option<&mut [f32]>| {
            let mut c = vec![f32::NAN; m * ldc];
            let out = MatMut::with_stride(&mut c, m, n, ldc);
            let (am, bm) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
            match scratch {
                Some(t) => gemm_with_scratch(s, am, bm, out, t),
                None => gemm(s, am, bm, out),
            }
            assert!(c.chunks(ldc).all(|row| row[n..].iter().all(|v| v.is_nan())), "{path}: wrote past a row");
            c.chunks(ldc).flat_map(|row| row[..n].to_vec()).collect::<Vec<f32>>()
        };
        let mut room = vec![0.0f32; need];
        assert_bits_eq(&run(Some(&mut room)), &want, || format!("{path}: the caller's scratch"));
        assert!(need == 0 || room.iter().any(|&v| v != 0.0), "{path}: the caller's scratch was used");
        assert_bits_eq(&run(Some(&mut [])), &want, || format!("{path}: a short scratch"));
        // Inside a chunk of a parallel section: in place, with no pool request (debug
        // builds assert that in `Buffer::try_new`).
        crate::kernels::parallel::for_each_chunk(2, 2, |chunk| {
            if chunk == 0 {
                assert_bits_eq(&run(None), &want, || format!("{path}: inside a chunk"));
            }
        });
    }
    assert!(need == 0 || need >= m * n, "{need}");
    assert_eq!(padded_c_len(m, n, n + 1), 0, "an odd stride needs no copy");
}

#[test]
fn gemm_scratch_len_covers_the_packing_of_every_plan_inside_a_chunk() {
    // Small and large, narrow and wide, long and short k, B row-major and transposed, one
    // and two threads: with `gemm_scratch_len` floats of the caller's, a GEMM inside a
    // chunk packs into them (no pool request: debug builds assert that in
    // `Buffer::try_new`; no heap fallback: the scratch is written) with the same bits.
    let shapes = [(1, 1, 1), (5, 300, 7), (33, 17, 100), (70, 600, 40), (128, 64, 600), (300, 40, 33), (200, 520, 200)];
    for (m, k, n) in shapes {
        let (a, b) = (values(m * k, 6), values(k * n, 7));
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let want = reference(false, MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
        for path in KernelPath::supported() {
            for threads in [1, 2] {
                let s = settings(path, Mode::Exact, threads);
                let len = gemm_scratch_len(s, m, k, n, n);
                assert_eq!(padded_c_len(m, n, n), 0, "{m}×{n}: a dense C needs no padded copy");
                for (layout, bm) in [("row-major", MatRef::row_major(&b, k, n)), ("transposed", MatRef::row_major(&bt, n, k).t())] {
                    let what = || format!("{path}, {threads} thread(s), {m}×{k}×{n}, B {layout}");
                    crate::kernels::parallel::for_each_chunk(2, 2, |chunk| {
                        if chunk == 0 {
                            let mut room = vec![f32::NAN; len];
                            let mut c = vec![f32::NAN; m * n];
                            gemm_with_scratch(s, MatRef::row_major(&a, m, k), bm, MatMut::row_major(&mut c, m, n), &mut room);
                            assert_bits_eq(&c, &want, what);
                            assert!(room.iter().any(|v| !v.is_nan()), "{}: the packing was not in the caller's scratch", what());
                        }
                    });
                }
            }
        }
    }
}

/// A B row stride that is a multiple of the L1 sets' span maps every row of a micro-panel
/// to one set: never read in place (unless a micro-panel's rows fit that set's ways); a
/// stride one line longer reaches every set.
#[test]
fn direct_b_is_refused_for_a_stride_that_reaches_one_set() {
    let l1 = super::cache::caches().l1;
    let span = l1.sets() * l1.line / 4;
    let k = l1.ways;
    assert!(!super::direct_b_pays(k, 32, span), "stride {span} floats, {k} rows");
    assert!(!super::direct_b_pays(k, 32, 2 * span));
    assert!(super::direct_b_pays(k, 32, span + l1.line / 4));
}
