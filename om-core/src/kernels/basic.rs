//! The few slice kernels behind the engine's whole-tensor arithmetic (`crate::accumulate`):
//! the sum of two equal-length gradients, in-place accumulation, and sum-to (undoing a
//! broadcast, accumulated in f64 in increasing element order, then rounded once).

/// `out[i] = x[i] + y[i]` (equal lengths), large sums (the engine adding the gradients a
/// tensor receives from several uses) in chunks shared by `threads` threads of the team.
pub(crate) fn add(threads: usize, x: &[f32], y: &[f32], out: &mut [f32]) {
    crate::kernels::parallel::for_each_chunk_mut(threads, out, ADD_CHUNK, |i, o| {
        let start = i * ADD_CHUNK;
        for ((o, &p), &q) in o.iter_mut().zip(&x[start..]).zip(&y[start..]) {
            *o = p + q;
        }
    });
}

/// Elements per chunk of [`add`] shared by the thread team (128 KiB of output; a
/// constant, and each element is one add, so the bits never depend on it).
const ADD_CHUNK: usize = 1 << 15;

/// `dst[i] += src[i]` (equal lengths).
pub(crate) fn add_assign(dst: &mut [f32], src: &[f32]) {
    for (o, &v) in dst.iter_mut().zip(src) {
        *o += v;
    }
}

/// Adds each element of `src` (contiguous, of `shape`) to `acc[Σ idx[d] · target[d]]`
/// in f64, in increasing row-major order of `src` (`target` has `shape`'s rank, 0 along
/// each dimension the sum runs over).
pub(crate) fn sum_to_f64(src: &[f32], shape: &[usize], target: &[usize], acc: &mut [f64]) {
    let gs = crate::layout::contiguous_strides(shape);
    // `src` is contiguous, so every row has step 1 in it; the common target steps get
    // loops the compiler vectorises (each output still adds its elements in order).
    crate::layout::for_each_row(shape, [&gs, target], [0, 0], |[gs0, ts0], len, [_, tstep]| {
        let row = &src[gs0..gs0 + len];
        match tstep {
            0 => acc[ts0] = row.iter().fold(acc[ts0], |a, &v| a + v as f64),
            1 => acc[ts0..ts0 + len].iter_mut().zip(row).for_each(|(a, &v)| *a += v as f64),
            _ => row.iter().enumerate().for_each(|(i, &v)| acc[ts0 + i * tstep] += v as f64),
        }
    });
}

/// `out[i] = acc[i]` rounded to `f32` once.
pub(crate) fn round_to_f32(acc: &[f64], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(acc) {
        *o = v as f32;
    }
}
