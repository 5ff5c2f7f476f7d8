//! 2-d convolution on the canonical-order GEMM (layout and order: `docs/ops-conv.md`).
//!
//! Per image and group, `cols` is the patch-major unfolding of the input: row `p` (an output
//! position, `p = oh·OW + ow`) holds the `K = (C/g)·kH·kW` input values its kernel window
//! reads (`k = (c·kH + kh)·kW + kw`, zero where the window lies in the padding).
//!
//! - forward: `y[og, P] = W_g[og, K] · colsᵀ[K, P]`; `colsᵀ` is unfolded directly in
//!   row-major `[K, P]` order (the transposed operand copied to row-major, spec section 4),
//!   and the GEMM writes straight into the output image. The bias is added after.
//! - weight gradient: per image in item order, `S = g[og, P] · cols[P, K]` into a scratch,
//!   then `dW_g += S` (element-wise, f32).
//! - input gradient: `dcols[K, P] = W_gᵀ[K, og] · g[og, P]` (`W_gᵀ` copied to row-major once),
//!   then col2im adds each tap into `dx`, `k` outer and `p` inner.
//! - bias gradient: `Σ g` over images and positions in f64, increasing element order.
//!
//! Threads: images are independent in the forward pass and the input gradient, so those
//! are chunked by image (a function of the shape only) and each image's GEMMs run on one
//! thread; with one image the GEMM itself uses the threads. The GEMM is bit-identical at
//! every thread count, so the result does not depend on that choice. The weight and bias
//! gradients run in item order on the calling thread (their GEMMs may use the threads).

use crate::compute::{for_each_chunk_mut, Settings};
use crate::kernels::gemm::gemm;
use crate::pool::{Buffer, F64Scratch};

/// The geometry of one convolution (all sizes validated by the caller: every divisor
/// non-zero, `C` and `O` divisible by `groups`, output at least 1×1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Images.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub o: usize,
    /// Channel groups.
    pub groups: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Zero rows above the input.
    pub pt: usize,
    /// Zero columns left of the input.
    pub pl: usize,
    /// Vertical dilation.
    pub dh: usize,
    /// Horizontal dilation.
    pub dw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl ConvGeom {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.groups
    }
    /// Output channels per group.
    pub fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Length of one unfolded patch, `(C/g)·kH·kW`.
    pub fn k(&self) -> usize {
        self.cg() * self.kh * self.kw
    }
    /// Output positions per image, `OH·OW`.
    pub fn p(&self) -> usize {
        self.oh * self.ow
    }

    /// The input row read by output row `oy` at kernel row `ky`, if inside the image.
    fn in_row(&self, oy: usize, ky: usize) -> Option<usize> {
        (oy * self.sh + ky * self.dh).checked_sub(self.pt).filter(|&r| r < self.h)
    }

    /// The input column read by output column `ox` at kernel column `kx`, if inside.
    fn in_col(&self, ox: usize, kx: usize) -> Option<usize> {
        (ox * self.sw + kx * self.dw).checked_sub(self.pl).filter(|&c| c < self.w)
    }

    /// Visits the taps `(k, p, input offset within the group's [Cg, H, W] block)` with
    /// `k` outer and `p` inner; `f` receives `None` for taps in the padding.
    fn for_each_tap(&self, mut f: impl FnMut(usize, usize, Option<usize>)) {
        let (h, w) = (self.h, self.w);
        for c in 0..self.cg() {
            for ky in 0..self.kh {
                for kx in 0..self.kw {
                    let k = (c * self.kh + ky) * self.kw + kx;
                    for oy in 0..self.oh {
                        let row = self.in_row(oy, ky);
                        for ox in 0..self.ow {
                            let p = oy * self.ow + ox;
                            let src = match (row, self.in_col(ox, kx)) {
                                (Some(r), Some(col)) => Some((c * h + r) * w + col),
                                _ => None,
                            };
                            f(k, p, src);
                        }
                    }
                }
            }
        }
    }
}

/// Unfolds one image's group (`xg`: `[C/g, H, W]`) into `colsᵀ` (`[K, P]`, row-major).
pub fn im2col_kp(geo: &ConvGeom, xg: &[f32], cols: &mut [f32]) {
    let p_len = geo.p();
    geo.for_each_tap(|k, p, src| cols[k * p_len + p] = src.map_or(0.0, |s| xg[s]));
}

/// Unfolds one image's group (`xg`: `[C/g, H, W]`) into `cols` (`[P, K]`, row-major).
pub fn im2col_pk(geo: &ConvGeom, xg: &[f32], cols: &mut [f32]) {
    let k_len = geo.k();
    geo.for_each_tap(|k, p, src| cols[p * k_len + k] = src.map_or(0.0, |s| xg[s]));
}

/// Adds every tap of `dcols` (`[K, P]`) into `dxg` (`[C/g, H, W]`), `k` outer, `p` inner.
pub fn col2im_kp_add(geo: &ConvGeom, dcols: &[f32], dxg: &mut [f32]) {
    let p_len = geo.p();
    geo.for_each_tap(|k, p, dst| {
        if let Some(d) = dst {
            dxg[d] += dcols[k * p_len + p];
        }
    });
}

/// Settings for the GEMMs inside one chunk of a chunked loop over `chunks` images: one
/// thread when the images themselves are spread over threads.
fn inner_settings(settings: Settings, chunks: usize) -> Settings {
    if chunks > 1 && settings.threads > 1 {
        Settings { threads: 1, ..settings }
    } else {
        settings
    }
}

/// Forward: `y` (`[N, O, OH, OW]`) from `x` (`[N, C, H, W]`), `w` (`[O, C/g, kH, kW]`) and
/// an optional `bias` (`[O]`). All contiguous.
pub fn conv2d_forward(settings: Settings, geo: &ConvGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
    let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
    let image_in = geo.c * geo.h * geo.w;
    let image_out = geo.o * p;
    let inner = inner_settings(settings, geo.n);
    for_each_chunk_mut(settings.threads, y, image_out, |n, yn| {
        let mut scratch = Buffer::new(k * p * 4);
        let cols = &mut scratch.f32_mut()[..k * p];
        for gi in 0..geo.groups {
            let xg = &x[n * image_in + gi * cg * geo.h * geo.w..][..cg * geo.h * geo.w];
            im2col_kp(geo, xg, cols);
            gemm(inner, og, k, p, &w[gi * og * k..], k, cols, p, &mut yn[gi * og * p..], p);
        }
        if let Some(b) = bias {
            for (row, &bv) in yn.chunks_mut(p).zip(b) {
                row.iter_mut().for_each(|v| *v += bv);
            }
        }
    });
}

/// Input gradient: `dx` (`[N, C, H, W]`, overwritten) from `g` (`[N, O, OH, OW]`) and `w`.
pub fn conv2d_backward_input(settings: Settings, geo: &ConvGeom, g: &[f32], w: &[f32], dx: &mut [f32]) {
    let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
    let image_in = geo.c * geo.h * geo.w;
    let image_out = geo.o * p;
    // W_gᵀ for every group, row-major [K, og].
    let mut wt_buf = Buffer::new(geo.o * k * 4);
    let wt = &mut wt_buf.f32_mut()[..geo.o * k];
    for gi in 0..geo.groups {
        for o in 0..og {
            for kk in 0..k {
                wt[gi * og * k + kk * og + o] = w[(gi * og + o) * k + kk];
            }
        }
    }
    let wt = &*wt;
    let inner = inner_settings(settings, geo.n);
    for_each_chunk_mut(settings.threads, dx, image_in, |n, dxn| {
        dxn.fill(0.0);
        let mut scratch = Buffer::new(k * p * 4);
        let dcols = &mut scratch.f32_mut()[..k * p];
        for gi in 0..geo.groups {
            let gg = &g[n * image_out + gi * og * p..];
            gemm(inner, k, og, p, &wt[gi * og * k..], og, gg, p, dcols, p);
            col2im_kp_add(geo, dcols, &mut dxn[gi * cg * geo.h * geo.w..][..cg * geo.h * geo.w]);
        }
    });
}

/// Weight gradient: `dw` (`[O, C/g, kH, kW]`, overwritten) from `x` and `g`; each image's
/// contribution is computed by the GEMM into a scratch and added in item order.
pub fn conv2d_backward_weight(settings: Settings, geo: &ConvGeom, x: &[f32], g: &[f32], dw: &mut [f32]) {
    let (k, p, og, cg) = (geo.k(), geo.p(), geo.og(), geo.cg());
    let image_in = geo.c * geo.h * geo.w;
    let image_out = geo.o * p;
    dw.fill(0.0);
    let mut cols_buf = Buffer::new(k * p * 4);
    let cols = &mut cols_buf.f32_mut()[..k * p];
    let mut part_buf = Buffer::new(og * k * 4);
    let part = &mut part_buf.f32_mut()[..og * k];
    for n in 0..geo.n {
        for gi in 0..geo.groups {
            let xg = &x[n * image_in + gi * cg * geo.h * geo.w..][..cg * geo.h * geo.w];
            im2col_pk(geo, xg, cols);
            gemm(settings, og, p, k, &g[n * image_out + gi * og * p..], p, cols, k, part, k);
            for (d, &s) in dw[gi * og * k..(gi + 1) * og * k].iter_mut().zip(part.iter()) {
                *d += s;
            }
        }
    }
}

/// Bias gradient: `db[o] = Σ g[n, o, :]` in f64, `n` outer and positions inner.
pub fn conv2d_backward_bias(geo: &ConvGeom, g: &[f32], db: &mut [f32]) {
    channel_sums(geo.n, geo.o, geo.p(), g, db);
}

/// `out[c] = Σ g[n, c, :]` over `g` (`[N, C, P]`, contiguous), accumulated in f64 with `n`
/// outer and positions inner (increasing element order per channel), rounded once.
pub fn channel_sums(n: usize, c: usize, p: usize, g: &[f32], out: &mut [f32]) {
    let mut acc = F64Scratch::zeroed(c);
    let a = acc.values();
    for img in 0..n {
        for (ch, s) in a.iter_mut().enumerate() {
            let start = (img * c + ch) * p;
            *s = g[start..start + p].iter().fold(*s, |t, &v| t + v as f64);
        }
    }
    for (d, &s) in out.iter_mut().zip(a.iter()) {
        *d = s as f32;
    }
}

/// Transposed convolution (PyTorch's `conv_transpose2d`), the adjoint of the convolution
/// `geo` with the same weight: `x` is that convolution's output shape
/// (`[N, O, OH, OW]`), `w` its weight (`[O, C/g, kH, kW]`, which is PyTorch's transposed
/// layout `[Cin, Cout/g, kH, kW]`), and `y` (`[N, C, H, W]`, overwritten) its input shape.
/// Per image and group `dcols = W_gᵀ·x` on the GEMM, then col2im (exactly the
/// convolution's input gradient), then `+ bias[c]` (one f32 addition per element).
pub fn conv_transpose2d_forward(settings: Settings, geo: &ConvGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
    conv2d_backward_input(settings, geo, x, w, y);
    if let Some(b) = bias {
        let plane = geo.h * geo.w;
        if plane > 0 {
            for (i, row) in y.chunks_mut(plane).enumerate() {
                let bv = b[i % geo.c];
                row.iter_mut().for_each(|v| *v += bv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> ConvGeom {
        ConvGeom { n: 1, c: 1, h: 3, w: 3, o: 1, groups: 1, kh: 2, kw: 2, sh: 1, sw: 1, pt: 1, pl: 0, dh: 1, dw: 1, oh: 3, ow: 2 }
    }

    #[test]
    fn unfoldings_are_transposes_and_padding_is_zero() {
        let g = geo();
        let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let (k, p) = (g.k(), g.p());
        let mut kp = vec![f32::NAN; k * p];
        let mut pk = vec![f32::NAN; k * p];
        im2col_kp(&g, &x, &mut kp);
        im2col_pk(&g, &x, &mut pk);
        for kk in 0..k {
            for pp in 0..p {
                assert_eq!(kp[kk * p + pp], pk[pp * k + kk]);
            }
        }
        // Output (0, 0) reads rows -1..=0, columns 0..=1: [pad, pad, 1, 2].
        assert_eq!(&pk[..4], &[0.0, 0.0, 1.0, 2.0]);
    }

    #[test]
    fn col2im_adds_every_in_bounds_tap() {
        let g = geo();
        let dcols = vec![1.0; g.k() * g.p()];
        let mut dx = vec![0.0; 9];
        col2im_kp_add(&g, &dcols, &mut dx);
        // How many windows read each pixel.
        assert_eq!(dx, vec![2.0, 4.0, 2.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
    }
}
