//! Reductions. Every sum accumulates in f64 in increasing element order and rounds once to
//! f32, so it is exact by construction and independent of the ISA path and thread count.

/// Sum of all values.
pub fn sum_all(x: &[f32]) -> f32 {
    x.iter().fold(0.0f64, |acc, &v| acc + v as f64) as f32
}

/// For `x` viewed as `[outer, len, inner]` (contiguous), sums over the middle axis into
/// `out` (`[outer, inner]`), scaling each sum by `scale` in f64 before rounding.
pub fn sum_axis(x: &[f32], outer: usize, len: usize, inner: usize, scale: f64, out: &mut [f32]) {
    let mut acc = crate::pool::F64Scratch::zeroed(inner);
    for o in 0..outer {
        let a = acc.values();
        a.fill(0.0);
        let base = o * len * inner;
        for l in 0..len {
            let row = &x[base + l * inner..base + (l + 1) * inner];
            for (s, &v) in a.iter_mut().zip(row) {
                *s += v as f64;
            }
        }
        for (dst, &s) in out[o * inner..(o + 1) * inner].iter_mut().zip(a.iter()) {
            *dst = (s * scale) as f32;
        }
    }
}
