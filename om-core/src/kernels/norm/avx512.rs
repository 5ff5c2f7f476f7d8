//! AVX-512 lockstep sums for the norms: eight slices (rows or channel planes) at once, one
//! f64 lane per slice. Each step loads eight consecutive f32 of every slice, transposes
//! the 8×8 block (half-row loads and AVX shuffles) so that a vector holds one element of each slice, widens
//! it to f64 and adds it into the accumulator vector, element after element: per lane the
//! same additions in the same order as the scalar fold (no fused multiply-add), so the same
//! bits. Tails shorter than eight elements finish in scalar code per slice.
//!
//! # Safety by type
//! Every function here takes the [`Avx512`] capability token, which only run-time detection
//! makes (`simd.rs`), so AVX-512F (and the AVX it includes) is present whenever one runs;
//! the norms reach them through `Lanes::avx512`, which gives the token only on AVX-512
//! lanes, inside `kernels::dispatch`'s AVX-512 entry where they are inlined. Loads read
//! slices of at least eight elements from a checked offset.

use super::ProdRows;
use crate::kernels::simd::Avx512;
use std::arch::x86_64::*;

/// Loads `s[i..i + 4]` (panics if out of bounds).
#[inline(always)]
fn load4(_: Avx512, s: &[f32], i: usize) -> __m128 {
    let s = &s[i..i + 4];
    // SAFETY: `s` holds four f32; the token proves AVX-512F, hence SSE, on this CPU.
    unsafe { _mm_loadu_ps(s.as_ptr()) }
}

/// Loads `rows[k][i..i + 8]` for every `k` and transposes the 8×8 block: output `j` holds
/// element `i + j` of every row, row `k` in lane `k` (panics if out of bounds).
///
/// The first stage of the transpose is done by the loads: vector `k` (`k < 4`) is
/// `rows[k][i..i + 4]` beside `rows[k + 4][i..i + 4]`, vector `k + 4` the same at `i + 4`
/// (a 128-bit load and an insert from memory, no shuffle port), so each 128-bit half needs
/// only a 4×4 transpose: 16 shuffles instead of the 24 of loading whole rows
/// (`kernels::transpose::x86::regs`). Only loads and moves: the values are untouched.
#[inline(always)]
fn load_transposed(isa: Avx512, rows: [&[f32]; 8], i: usize) -> [__m256; 8] {
    // SAFETY: the token proves AVX-512F, hence AVX, on this CPU; shuffles of registers.
    unsafe {
        let mut r = [_mm256_setzero_ps(); 8];
        for k in 0..4 {
            for (h, at) in [(0, i), (4, i + 4)] {
                let low = _mm256_castps128_ps256(load4(isa, rows[k], at));
                r[k + h] = _mm256_insertf128_ps::<1>(low, load4(isa, rows[k + 4], at));
            }
        }
        let mut out = [_mm256_setzero_ps(); 8];
        for h in [0, 4] {
            // Columns h..h + 4 of rows 0..4 in the low halves, of rows 4..8 in the high ones.
            let t0 = _mm256_castps_pd(_mm256_unpacklo_ps(r[h], r[h + 1]));
            let t1 = _mm256_castps_pd(_mm256_unpackhi_ps(r[h], r[h + 1]));
            let t2 = _mm256_castps_pd(_mm256_unpacklo_ps(r[h + 2], r[h + 3]));
            let t3 = _mm256_castps_pd(_mm256_unpackhi_ps(r[h + 2], r[h + 3]));
            out[h] = _mm256_castpd_ps(_mm256_unpacklo_pd(t0, t2));
            out[h + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(t0, t2));
            out[h + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(t1, t3));
            out[h + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(t1, t3));
        }
        out
    }
}

/// The `vpermt2ps` indices of [`load_pairs`]: lane `l` of an output takes lane `l mod 16`
/// of the first source when `l < 16`, of the second when `16 ≤ l < 32`.
struct PairIndex {
    /// First stage, columns 0..4 of the pair: `(r_k, r_k+1, r_k+4, r_k+5)` at each column.
    cols_low: __m512i,
    /// First stage, columns 4..8.
    cols_high: __m512i,
    /// Second stage: columns `(0, 1)` of the first stage's four, rows in order.
    first: __m512i,
    /// Second stage: columns `(2, 3)`.
    second: __m512i,
}

/// The first stage's lanes: column `c0 + x` of the pair `(A, B)` = rows `(k, k+4)` and
/// `(k+1, k+5)` as `[r_k, r_k+1, r_k+4, r_k+5]` for `x` in `0..4`.
const COLS_LOW: [i32; 16] = [0, 16, 8, 24, 1, 17, 9, 25, 2, 18, 10, 26, 3, 19, 11, 27];
/// [`COLS_LOW`] for columns 4..8.
const COLS_HIGH: [i32; 16] = [4, 20, 12, 28, 5, 21, 13, 29, 6, 22, 14, 30, 7, 23, 15, 31];
/// The second stage: from `(B0, B2)` (rows `0, 1, 4, 5` and `2, 3, 6, 7` at four columns)
/// the first two columns, each as rows 0..8.
const FIRST: [i32; 16] = [0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23];
/// [`FIRST`] for the last two columns.
const SECOND: [i32; 16] = [8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31];

impl PairIndex {
    /// The four index vectors.
    #[inline(always)]
    fn new(_: Avx512) -> PairIndex {
        // SAFETY: the token proves AVX-512F on this CPU; each array holds sixteen i32.
        unsafe {
            PairIndex {
                cols_low: _mm512_loadu_si512(COLS_LOW.as_ptr().cast()),
                cols_high: _mm512_loadu_si512(COLS_HIGH.as_ptr().cast()),
                first: _mm512_loadu_si512(FIRST.as_ptr().cast()),
                second: _mm512_loadu_si512(SECOND.as_ptr().cast()),
            }
        }
    }
}

/// `v` in both halves of a 512-bit vector.
#[inline(always)]
fn twice(_: Avx512, v: __m256) -> __m512 {
    // SAFETY: the token proves AVX-512F on this CPU; register moves only.
    unsafe { _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v))) }
}

/// Loads `rows[k][i..i + 8]` for every `k` and transposes the 8×8 block into four 512-bit
/// vectors: vector `p` holds element `i + 2p` of every row in its low half and element
/// `i + 2p + 1` in its high half, row `k` in lane `k` of each half (panics if out of
/// bounds). Two rows per 512-bit load (`k` and `k + 4`), then two stages of four
/// two-source permutes: 8 shuffles for the block (the half-row loads of
/// [`load_transposed`] need 16). Only loads and moves: the values are untouched.
#[inline(always)]
fn load_pairs(isa: Avx512, rows: [&[f32]; 8], i: usize, ix: &PairIndex) -> [__m512; 4] {
    // SAFETY: the token proves AVX-512F on this CPU; `load8` checks the bounds.
    unsafe {
        let mut a = [_mm512_setzero_ps(); 4];
        for (k, a) in a.iter_mut().enumerate() {
            let low = _mm512_castps_pd(_mm512_castps256_ps512(load8(isa, rows[k], i)));
            *a = _mm512_castpd_ps(_mm512_insertf64x4::<1>(low, _mm256_castps_pd(load8(isa, rows[k + 4], i))));
        }
        let b0 = _mm512_permutex2var_ps(a[0], ix.cols_low, a[1]);
        let b1 = _mm512_permutex2var_ps(a[0], ix.cols_high, a[1]);
        let b2 = _mm512_permutex2var_ps(a[2], ix.cols_low, a[3]);
        let b3 = _mm512_permutex2var_ps(a[2], ix.cols_high, a[3]);
        [
            _mm512_permutex2var_ps(b0, ix.first, b2),
            _mm512_permutex2var_ps(b0, ix.second, b2),
            _mm512_permutex2var_ps(b1, ix.first, b3),
            _mm512_permutex2var_ps(b1, ix.second, b3),
        ]
    }
}

/// Loads `s[i..i + 8]` (panics if out of bounds).
#[inline(always)]
fn load8(_: Avx512, s: &[f32], i: usize) -> __m256 {
    let s = &s[i..i + 8];
    // SAFETY: `s` holds eight f32; the token proves AVX-512F, hence AVX, on this CPU.
    unsafe { _mm256_loadu_ps(s.as_ptr()) }
}

/// The low and the high half of `v`.
#[inline(always)]
fn halves(_: Avx512, v: __m512) -> (__m256, __m256) {
    // SAFETY: the token proves AVX-512F on this CPU; register moves only.
    unsafe { (_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)))) }
}

/// How far ahead (in elements) the channel sums of a batch norm prefetch each plane they
/// stream: near a plane's end, the start of the same channel's plane in the next image (a
/// 4 KiB plane is one page, where the hardware prefetcher stops).
const AHEAD: usize = 128;

/// Prefetches the cache line `AHEAD` elements past `i` in every row, continuing at `next`
/// elements from each row's start once past its end (the same channel's plane in the
/// next image). Only a hint: no value is read into the program.
#[inline(always)]
fn prefetch_ahead(_: Avx512, rows: [&[f32]; 8], i: usize, next: usize) {
    let (len, at) = (rows[0].len(), i + AHEAD);
    let offset = if at < len { at } else { next + (at - len) };
    for r in rows {
        let p = r.as_ptr().wrapping_add(offset).cast::<i8>();
        // SAFETY: a prefetch never faults, whatever the address, and reads nothing into
        // the program; the token proves AVX-512F, hence SSE, on this CPU.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
    }
}

/// The common length of the slices (panics if they differ).
fn common_len<const N: usize>(rows: [&[f32]; N]) -> usize {
    let len = rows[0].len();
    assert!(rows.iter().all(|r| r.len() == len), "lockstep slices differ in length");
    len
}

/// `acc[k] + Σ rows[k][i] as f64`, in increasing `i`; with `next`, prefetching ahead and
/// then into the rows `next` elements on (see [`prefetch_ahead`]).
#[inline(always)]
pub(super) fn sum(isa: Avx512, rows: [&[f32]; 8], acc: [f64; 8], next: Option<usize>) -> [f64; 8] {
    let len = common_len(rows);
    let full = len / 8 * 8;
    let mut out = [0.0f64; 8];
    // SAFETY: the token proves AVX-512F on this CPU; `acc` and `out` hold eight f64.
    unsafe {
        let mut s = _mm512_loadu_pd(acc.as_ptr());
        for i in (0..full).step_by(8) {
            if let (Some(next), 0) = (next, i % 16) {
                prefetch_ahead(isa, rows, i, next);
            }
            for t in load_transposed(isa, rows, i) {
                s = _mm512_add_pd(s, _mm512_cvtps_pd(t));
            }
        }
        _mm512_storeu_pd(out.as_mut_ptr(), s);
    }
    for (o, r) in out.iter_mut().zip(rows) {
        *o = r[full..].iter().fold(*o, |s, &v| s + v as f64);
    }
    out
}

/// `acc[k] + Σ (rows[k][i] as f64 − mu[k])²`, in increasing `i`.
#[inline(always)]
pub(super) fn sum_sq(isa: Avx512, rows: [&[f32]; 8], mu: [f64; 8], acc: [f64; 8]) -> [f64; 8] {
    let len = common_len(rows);
    let full = len / 8 * 8;
    let mut out = [0.0f64; 8];
    // SAFETY: the token proves AVX-512F on this CPU; the arrays hold eight f64.
    unsafe {
        let (mut s, m) = (_mm512_loadu_pd(acc.as_ptr()), _mm512_loadu_pd(mu.as_ptr()));
        for i in (0..full).step_by(8) {
            for t in load_transposed(isa, rows, i) {
                let dv = _mm512_sub_pd(_mm512_cvtps_pd(t), m);
                s = _mm512_add_pd(s, _mm512_mul_pd(dv, dv));
            }
        }
        _mm512_storeu_pd(out.as_mut_ptr(), s);
    }
    for ((o, r), mu) in out.iter_mut().zip(rows).zip(mu) {
        *o = r[full..].iter().fold(*o, |s, &v| s + (v as f64 - mu) * (v as f64 - mu));
    }
    out
}

/// With `a = g·scale[i]` (or `g`) and `b = (x − m[k])·s[k]` in f32: `acc.0[k] + Σ a` and
/// `acc.1[k] + Σ a·b` in f64, in increasing `i`.
#[inline(always)]
pub(super) fn sum_prod(isa: Avx512, rows: ProdRows<8>, acc: ([f64; 8], [f64; 8])) -> ([f64; 8], [f64; 8]) {
    let ProdRows { xs, gs, scale, m, s: st, .. } = rows;
    let len = common_len(xs);
    assert_eq!(common_len(gs), len, "lockstep slices differ in length");
    let full = len / 8 * 8;
    let (mut o1, mut o2) = ([0.0f64; 8], [0.0f64; 8]);
    // SAFETY: the token proves AVX-512F on this CPU; the arrays hold eight values.
    unsafe {
        let (mut s1, mut s2) = (_mm512_loadu_pd(acc.0.as_ptr()), _mm512_loadu_pd(acc.1.as_ptr()));
        // Lane k of `mv`, `sv` is row k's mean and scale: `b` is formed after the transpose.
        let (mv, sv) = (_mm256_loadu_ps(m.as_ptr()), _mm256_loadu_ps(st.as_ptr()));
        // Without a scale (batch norm): the cheaper pair transposes, `b` formed on both
        // halves at once (each half's lane k is row k); the columns still go in order.
        let ix = PairIndex::new(isa);
        let (mm, ss) = (twice(isa, mv), twice(isa, sv));
        let pairs = if scale.is_none() { full } else { 0 };
        for i in (0..pairs).step_by(8) {
            if let (Some(next), 0) = (rows.next, i % 16) {
                prefetch_ahead(isa, gs, i, next);
                prefetch_ahead(isa, xs, i, next);
            }
            let (a, xt) = (load_pairs(isa, gs, i, &ix), load_pairs(isa, xs, i, &ix));
            for p in 0..4 {
                let ((a0, a1), (b0, b1)) = (halves(isa, a[p]), halves(isa, _mm512_mul_ps(_mm512_sub_ps(xt[p], mm), ss)));
                for (a, b) in [(a0, b0), (a1, b1)] {
                    let av = _mm512_cvtps_pd(a);
                    s1 = _mm512_add_pd(s1, av);
                    s2 = _mm512_add_pd(s2, _mm512_mul_pd(av, _mm512_cvtps_pd(b)));
                }
            }
        }
        for i in (pairs..full).step_by(8) {
            let mut a = load_transposed(isa, gs, i);
            if let Some(sc) = scale {
                // Vector `j` holds element `i + j` of every row: times `scale[i + j]`.
                let sc = &sc[i..i + 8];
                for (a, &f) in a.iter_mut().zip(sc) {
                    *a = _mm256_mul_ps(*a, _mm256_set1_ps(f));
                }
            }
            let xt = load_transposed(isa, xs, i);
            for j in 0..8 {
                let av = _mm512_cvtps_pd(a[j]);
                let bv = _mm256_mul_ps(_mm256_sub_ps(xt[j], mv), sv);
                s1 = _mm512_add_pd(s1, av);
                s2 = _mm512_add_pd(s2, _mm512_mul_pd(av, _mm512_cvtps_pd(bv)));
            }
        }
        _mm512_storeu_pd(o1.as_mut_ptr(), s1);
        _mm512_storeu_pd(o2.as_mut_ptr(), s2);
    }
    for k in 0..8 {
        for i in full..len {
            let a = match scale {
                Some(sc) => gs[k][i] * sc[i],
                None => gs[k][i],
            } as f64;
            o1[k] += a;
            o2[k] += a * ((xs[k][i] - m[k]) * st[k]) as f64;
        }
    }
    (o1, o2)
}

#[cfg(test)]
mod tests {
    //! The transposing loads against their definition (the sums' bits are checked against
    //! the scalar definitions in `norm::tests`).

    use super::*;

    /// The lanes of `v`.
    fn lanes256(_: Avx512, v: __m256) -> [f32; 8] {
        let mut out = [0.0f32; 8];
        // SAFETY: the token proves AVX-512F, hence AVX; `out` holds eight f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
        out
    }

    #[test]
    fn transposing_loads_give_column_j_of_every_row_in_lane_k() {
        let Some(isa) = Avx512::detect() else { return };
        // Eight rows of 19 distinct values (including −0 and NaN), read at 0 and at 8.
        let data: Vec<Vec<f32>> = (0..8).map(|k| (0..19).map(|j| (100 * k + j) as f32 + 0.25).collect()).collect();
        let mut data = data;
        data[3][9] = -0.0;
        data[5][2] = f32::NAN;
        let rows: [&[f32]; 8] = std::array::from_fn(|k| &data[k][..]);
        let ix = PairIndex::new(isa);
        for i in [0, 8, 11] {
            let half = load_transposed(isa, rows, i);
            let pairs = load_pairs(isa, rows, i, &ix);
            for j in 0..8 {
                let want: [u32; 8] = std::array::from_fn(|k| rows[k][i + j].to_bits());
                assert_eq!(lanes256(isa, half[j]).map(f32::to_bits), want, "half rows, i {i}, column {j}");
                let (low, high) = halves(isa, pairs[j / 2]);
                let got = if j % 2 == 0 { low } else { high };
                assert_eq!(lanes256(isa, got).map(f32::to_bits), want, "pairs, i {i}, column {j}");
            }
        }
        // Prefetching (within the rows, then `next` on) changes no sum.
        let plain = sum(isa, rows, [0.5; 8], None);
        assert_eq!(sum(isa, rows, [0.5; 8], Some(19)).map(f64::to_bits), plain.map(f64::to_bits));
    }
}
