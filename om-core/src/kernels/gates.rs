//! LSTM and GRU cell arithmetic of one time step over the whole `[B, gH]` gate block, as
//! lane loops: the gate pre-activations, `σ`/`tanh` (the fixed polynomials of
//! `transcendentals`, the same functions `math::sigmoid`/`math::tanh` instantiate at
//! width 1), the cell and hidden updates, and their backward.
//!
//! Every output element is computed by the same sequence of single IEEE operations as the
//! scalar reference in `docs/ops-recurrent.md` (no fused multiply-add, no reordering):
//! full vectors of the path's width cover the front of each row's `H` units and the same
//! code at width 1 the tail, so every path and width gives the scalar bits, in both modes
//! (NaN payloads are left as the arithmetic makes them, as the scalar cell did).
//!
//! Rows (batch entries) are independent; they are split into chunks of whole rows whose
//! size depends only on `gH` (`CHUNK_ELEMS`), so the thread count never changes a bit.
//! The GEMMs of a step stay with the caller (`om-ops/src/recurrent/lstm.rs`, `gru.rs`).

use super::chunks::for_each_row_chunk;
use super::simd::{Lanes, Scalar};
use super::transcendentals as tr;
use super::{dispatch, LaneTask};
use crate::compute::Settings;
use std::ops::Range;

/// Gate values per parallel chunk (whole rows, at least one). The cell math of a row costs
/// about as much as a softmax row of the same length, so this is softmax's chunk size; at
/// the crnn_ctc shape (B = 8, 4H = 512, 4,096 values, ~4 µs per step on an AMD EPYC) a step
/// is one chunk and never wakes the team, which would cost more than the work.
const CHUNK_ELEMS: usize = 16 * 1024;

fn rows_per_chunk(gh: usize) -> usize {
    (CHUNK_ELEMS / gh.max(1)).max(1)
}

/// The inputs of one forward step, all row-major over the batch rows `B`.
#[derive(Clone, Copy, Debug)]
pub struct CellInputs<'a> {
    /// `x·W_ihᵀ` of this step, `[B, gH]` (no bias).
    pub xp: &'a [f32],
    /// `h·W_hhᵀ` of this step, `[B, gH]` (no bias).
    pub hp: &'a [f32],
    /// Input-side bias `[gH]`.
    pub b_ih: Option<&'a [f32]>,
    /// Hidden-side bias `[gH]`.
    pub b_hh: Option<&'a [f32]>,
    /// `[B, H]`: the previous cell state (LSTM) or hidden state (GRU); `None` is zeros.
    pub prev: Option<&'a [f32]>,
}

impl<'a> CellInputs<'a> {
    /// Rows `r` of the per-row operands (`gh` and `h` values per row).
    fn rows(self, r: &Range<usize>, gh: usize, h: usize) -> CellInputs<'a> {
        CellInputs { xp: rows_of(self.xp, r, gh), hp: rows_of(self.hp, r, gh), prev: self.prev.map(|p| rows_of(p, r, h)), ..self }
    }

    /// Row `i` (of a chunk).
    fn row(self, i: usize, gh: usize, h: usize) -> CellInputs<'a> {
        self.rows(&(i..i + 1), gh, h)
    }
}

/// Rows `r` of a row-major matrix with `w` values per row.
fn rows_of<'a>(s: &'a [f32], r: &Range<usize>, w: usize) -> &'a [f32] {
    &s[r.start * w..r.end * w]
}

/// `v[k..k+W]`, or zeros when the operand is absent.
#[inline(always)]
fn load_or_zero<L: Lanes>(isa: L::Isa, v: Option<&[f32]>, k: usize) -> L {
    v.map_or(L::splat(isa, 0.0), |v| L::load(isa, &v[k..]))
}

/// The front of a row of `h` units that full `L` vectors cover.
#[inline(always)]
fn full<L: Lanes>(h: usize) -> usize {
    h / L::WIDTH * L::WIDTH
}

// ===== LSTM =====

/// One LSTM forward step (gate order `i, f, g, o`) for all `B` rows: per unit
/// `a_k = (xp_k + b_ih,k) + (hp_k + b_hh,k)` (a missing bias is skipped), `i = σ(a_i)`,
/// `f = σ(a_f)`, `g = tanh(a_g)`, `o = σ(a_o)`, `c = f·c_prev + i·g`, `h = o·tanh c`.
/// Writes the activated gates `[B, 4H]`, `c`, `tanh c` and `h` (`[B, H]` each).
pub fn lstm_forward(settings: Settings, h: usize, inp: CellInputs, gates: &mut [f32], c: &mut [f32], tanh_c: &mut [f32], y: &mut [f32]) {
    let gh = 4 * h;
    let b = inp.xp.len() / gh.max(1);
    let path = settings.path;
    for_each_row_chunk(settings.threads, [gates, c, tanh_c, y], [gh, h, h, h], b, rows_per_chunk(gh), |_, r, [gates, c, tanh_c, y]| {
        dispatch(path, LstmForward { h, inp: inp.rows(&r, gh, h), gates, c, tanh_c, y });
    });
}

struct LstmForward<'a, 'o> {
    h: usize,
    inp: CellInputs<'a>,
    gates: &'o mut [f32],
    c: &'o mut [f32],
    tanh_c: &'o mut [f32],
    y: &'o mut [f32],
}

impl LaneTask for LstmForward<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let LstmForward { h, inp, gates, c, tanh_c, y } = self;
        let gh = 4 * h;
        let rows = gates.chunks_exact_mut(gh).zip(c.chunks_exact_mut(h)).zip(tanh_c.chunks_exact_mut(h)).zip(y.chunks_exact_mut(h));
        for (i, (((g, c), tc), y)) in rows.enumerate() {
            let x = inp.row(i, gh, h);
            let f = full::<L>(h);
            lstm_forward_units::<L>(isa, x, g, c, tc, y, 0..f);
            lstm_forward_units::<f32>(Scalar, x, g, c, tc, y, f..h);
        }
    }
}

/// The pre-activation `(xp_k + b_ih,k) + (hp_k + b_hh,k)` of gate column `k`, a missing
/// bias skipped.
#[inline(always)]
fn lstm_pre<L: Lanes>(isa: L::Isa, x: &CellInputs, k: usize) -> L {
    let mut a = L::load(isa, &x.xp[k..]);
    if let Some(b) = x.b_ih {
        a = a.add(L::load(isa, &b[k..]));
    }
    let mut r = L::load(isa, &x.hp[k..]);
    if let Some(b) = x.b_hh {
        r = r.add(L::load(isa, &b[k..]));
    }
    a.add(r)
}

/// Units `js` (a multiple of `L::WIDTH` long) of one row of `y.len()` units.
#[inline(always)]
fn lstm_forward_units<L: Lanes>(isa: L::Isa, x: CellInputs, g: &mut [f32], c: &mut [f32], tc: &mut [f32], y: &mut [f32], js: Range<usize>) {
    let h = y.len();
    for j in js.step_by(L::WIDTH) {
        let ig = tr::sigmoid(lstm_pre::<L>(isa, &x, j));
        let fg = tr::sigmoid(lstm_pre::<L>(isa, &x, h + j));
        let gg = tr::tanh(lstm_pre::<L>(isa, &x, 2 * h + j));
        let og = tr::sigmoid(lstm_pre::<L>(isa, &x, 3 * h + j));
        let cv = fg.mul(load_or_zero::<L>(isa, x.prev, j)).add(ig.mul(gg));
        let tcv = tr::tanh(cv);
        ig.store(&mut g[j..]);
        fg.store(&mut g[h + j..]);
        gg.store(&mut g[2 * h + j..]);
        og.store(&mut g[3 * h + j..]);
        cv.store(&mut c[j..]);
        tcv.store(&mut tc[j..]);
        og.mul(tcv).store(&mut y[j..]);
    }
}

/// The saved values and incoming gradients of one LSTM backward step, `[B, ·]` row-major.
#[derive(Clone, Copy, Debug)]
pub struct LstmGrads<'a> {
    /// Activated gates `i, f, g, o` of the step, `[B, 4H]`.
    pub gates: &'a [f32],
    /// `tanh c` of the step, `[B, H]`.
    pub tanh_c: &'a [f32],
    /// The previous cell state `[B, H]`; `None` is zeros.
    pub c_prev: Option<&'a [f32]>,
    /// The output gradient of the step, `[B, H]`.
    pub gy: &'a [f32],
    /// The gradient reaching `h` from the later step, `[B, H]`.
    pub dh_next: &'a [f32],
}

impl<'a> LstmGrads<'a> {
    /// Rows `r`.
    fn rows(self, r: &Range<usize>, h: usize) -> LstmGrads<'a> {
        LstmGrads {
            gates: rows_of(self.gates, r, 4 * h),
            tanh_c: rows_of(self.tanh_c, r, h),
            c_prev: self.c_prev.map(|p| rows_of(p, r, h)),
            gy: rows_of(self.gy, r, h),
            dh_next: rows_of(self.dh_next, r, h),
        }
    }
}

/// One LSTM backward step: per unit `dh = gy + dh'`, `do = dh·tanh c`,
/// `dc = dc' + dh·o·(1 − tanh²c)`, `di = dc·g`, `df = dc·c_prev`, `dg = dc·i`; writes
/// `dc' = dc·f` over `dc_next` and the gate gradients
/// `[di·i(1−i), df·f(1−f), dg(1−g²), do·o(1−o)]` into `dg` (`[B, 4H]`).
pub fn lstm_backward(settings: Settings, h: usize, inp: LstmGrads, dc_next: &mut [f32], dg: &mut [f32]) {
    let gh = 4 * h;
    let b = inp.gates.len() / gh.max(1);
    let path = settings.path;
    for_each_row_chunk(settings.threads, [dc_next, dg], [h, gh], b, rows_per_chunk(gh), |_, r, [dc, dg]| {
        dispatch(path, LstmBackward { h, inp: inp.rows(&r, h), dc, dg });
    });
}

struct LstmBackward<'a, 'o> {
    h: usize,
    inp: LstmGrads<'a>,
    dc: &'o mut [f32],
    dg: &'o mut [f32],
}

impl LaneTask for LstmBackward<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let LstmBackward { h, inp, dc, dg } = self;
        let gh = 4 * h;
        for (i, (dc, dg)) in dc.chunks_exact_mut(h).zip(dg.chunks_exact_mut(gh)).enumerate() {
            let x = inp.rows(&(i..i + 1), h);
            let f = full::<L>(h);
            lstm_backward_units::<L>(isa, h, x, dc, dg, 0..f);
            lstm_backward_units::<f32>(Scalar, h, x, dc, dg, f..h);
        }
    }
}

#[inline(always)]
fn lstm_backward_units<L: Lanes>(isa: L::Isa, h: usize, x: LstmGrads, dc_next: &mut [f32], dg: &mut [f32], js: Range<usize>) {
    let one = L::splat(isa, 1.0);
    for j in js.step_by(L::WIDTH) {
        let g = |k: usize| L::load(isa, &x.gates[k..]);
        let (ig, fg, gg, og) = (g(j), g(h + j), g(2 * h + j), g(3 * h + j));
        let tcv = L::load(isa, &x.tanh_c[j..]);
        let c_prev = load_or_zero::<L>(isa, x.c_prev, j);
        let dh = L::load(isa, &x.gy[j..]).add(L::load(isa, &x.dh_next[j..]));
        let d_o = dh.mul(tcv);
        let dc = L::load(isa, &dc_next[j..]).add(dh.mul(og).mul(one.sub(tcv.mul(tcv))));
        let di = dc.mul(gg);
        let df = dc.mul(c_prev);
        let dgg = dc.mul(ig);
        dc.mul(fg).store(&mut dc_next[j..]);
        di.mul(ig).mul(one.sub(ig)).store(&mut dg[j..]);
        df.mul(fg).mul(one.sub(fg)).store(&mut dg[h + j..]);
        dgg.mul(one.sub(gg.mul(gg))).store(&mut dg[2 * h + j..]);
        d_o.mul(og).mul(one.sub(og)).store(&mut dg[3 * h + j..]);
    }
}

// ===== GRU =====

/// One GRU forward step (gate order `r, z, n`) for all `B` rows: per unit, with a missing
/// bias adding `0`, `r = σ((xp_r + b_ir) + (hp_r + b_hr))`, `z` likewise,
/// `hn = hp_n + b_hn`, `n = tanh((xp_n + b_in) + r·hn)`, `h = (1−z)·n + z·h_prev`. Writes
/// the activated gates `[B, 3H]`, `hn` and `h` (`[B, H]` each).
pub fn gru_forward(settings: Settings, h: usize, inp: CellInputs, gates: &mut [f32], hn: &mut [f32], y: &mut [f32]) {
    let gh = 3 * h;
    let b = inp.xp.len() / gh.max(1);
    let path = settings.path;
    for_each_row_chunk(settings.threads, [gates, hn, y], [gh, h, h], b, rows_per_chunk(gh), |_, r, [gates, hn, y]| {
        dispatch(path, GruForward { h, inp: inp.rows(&r, gh, h), gates, hn, y });
    });
}

struct GruForward<'a, 'o> {
    h: usize,
    inp: CellInputs<'a>,
    gates: &'o mut [f32],
    hn: &'o mut [f32],
    y: &'o mut [f32],
}

impl LaneTask for GruForward<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let GruForward { h, inp, gates, hn, y } = self;
        let gh = 3 * h;
        for (i, ((g, hn), y)) in gates.chunks_exact_mut(gh).zip(hn.chunks_exact_mut(h)).zip(y.chunks_exact_mut(h)).enumerate() {
            let x = inp.row(i, gh, h);
            let f = full::<L>(h);
            gru_forward_units::<L>(isa, h, x, g, hn, y, 0..f);
            gru_forward_units::<f32>(Scalar, h, x, g, hn, y, f..h);
        }
    }
}

/// `(xp_k + b_ih,k, hp_k + b_hh,k)` of gate column `k`, a missing bias adding `0`.
#[inline(always)]
fn gru_sides<L: Lanes>(isa: L::Isa, x: &CellInputs, k: usize) -> (L, L) {
    let a = L::load(isa, &x.xp[k..]).add(load_or_zero::<L>(isa, x.b_ih, k));
    let r = L::load(isa, &x.hp[k..]).add(load_or_zero::<L>(isa, x.b_hh, k));
    (a, r)
}

#[inline(always)]
fn gru_forward_units<L: Lanes>(isa: L::Isa, h: usize, x: CellInputs, g: &mut [f32], hn_out: &mut [f32], y: &mut [f32], js: Range<usize>) {
    for j in js.step_by(L::WIDTH) {
        let (xr, hr) = gru_sides::<L>(isa, &x, j);
        let rg = tr::sigmoid(xr.add(hr));
        let (xz, hz) = gru_sides::<L>(isa, &x, h + j);
        let zg = tr::sigmoid(xz.add(hz));
        let (xn, hn) = gru_sides::<L>(isa, &x, 2 * h + j);
        let ng = tr::tanh(xn.add(rg.mul(hn)));
        let hv = L::splat(isa, 1.0).sub(zg).mul(ng).add(zg.mul(load_or_zero::<L>(isa, x.prev, j)));
        rg.store(&mut g[j..]);
        zg.store(&mut g[h + j..]);
        ng.store(&mut g[2 * h + j..]);
        hn.store(&mut hn_out[j..]);
        hv.store(&mut y[j..]);
    }
}

/// The saved values and incoming gradients of one GRU backward step, `[B, ·]` row-major.
#[derive(Clone, Copy, Debug)]
pub struct GruGrads<'a> {
    /// Activated gates `r, z, n` of the step, `[B, 3H]`.
    pub gates: &'a [f32],
    /// The hidden-side `n` part `W_hn h + b_hn` of the step, `[B, H]`.
    pub hn: &'a [f32],
    /// The previous hidden state `[B, H]`; `None` is zeros.
    pub h_prev: Option<&'a [f32]>,
    /// The output gradient of the step, `[B, H]`.
    pub gy: &'a [f32],
    /// The gradient reaching `h` from the later step, `[B, H]`.
    pub dh_next: &'a [f32],
}

impl<'a> GruGrads<'a> {
    /// Rows `r`.
    fn rows(self, r: &Range<usize>, h: usize) -> GruGrads<'a> {
        GruGrads {
            gates: rows_of(self.gates, r, 3 * h),
            hn: rows_of(self.hn, r, h),
            h_prev: self.h_prev.map(|p| rows_of(p, r, h)),
            gy: rows_of(self.gy, r, h),
            dh_next: rows_of(self.dh_next, r, h),
        }
    }
}

/// One GRU backward step: per unit `dh = gy + dh'`, `dz = dh·(h_prev − n)`,
/// `dn = dh·(1−z)`, `dan = dn(1−n²)`, `dr = dan·hn`, `dar = dr·r(1−r)`, `daz = dz·z(1−z)`;
/// writes `dX = [dar, daz, dan]`, `dH = [dar, daz, dan·r]` (`[B, 3H]` each) and the direct
/// part `dh·z` of the next `dh'` (`[B, H]`).
pub fn gru_backward(settings: Settings, h: usize, inp: GruGrads, dxg: &mut [f32], dhg: &mut [f32], direct: &mut [f32]) {
    let gh = 3 * h;
    let b = inp.gates.len() / gh.max(1);
    let path = settings.path;
    for_each_row_chunk(settings.threads, [dxg, dhg, direct], [gh, gh, h], b, rows_per_chunk(gh), |_, r, [dxg, dhg, direct]| {
        dispatch(path, GruBackward { h, inp: inp.rows(&r, h), dxg, dhg, direct });
    });
}

struct GruBackward<'a, 'o> {
    h: usize,
    inp: GruGrads<'a>,
    dxg: &'o mut [f32],
    dhg: &'o mut [f32],
    direct: &'o mut [f32],
}

impl LaneTask for GruBackward<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self, isa: L::Isa) {
        let GruBackward { h, inp, dxg, dhg, direct } = self;
        let gh = 3 * h;
        let rows = dxg.chunks_exact_mut(gh).zip(dhg.chunks_exact_mut(gh)).zip(direct.chunks_exact_mut(h));
        for (i, ((dx, dh), dd)) in rows.enumerate() {
            let x = inp.rows(&(i..i + 1), h);
            let f = full::<L>(h);
            gru_backward_units::<L>(isa, h, x, dx, dh, dd, 0..f);
            gru_backward_units::<f32>(Scalar, h, x, dx, dh, dd, f..h);
        }
    }
}

#[inline(always)]
fn gru_backward_units<L: Lanes>(
    isa: L::Isa,
    h: usize,
    x: GruGrads,
    dxg: &mut [f32],
    dhg: &mut [f32],
    direct: &mut [f32],
    js: Range<usize>,
) {
    let one = L::splat(isa, 1.0);
    for j in js.step_by(L::WIDTH) {
        let g = |k: usize| L::load(isa, &x.gates[k..]);
        let (rg, zg, ng) = (g(j), g(h + j), g(2 * h + j));
        let dh = L::load(isa, &x.gy[j..]).add(L::load(isa, &x.dh_next[j..]));
        let dz = dh.mul(load_or_zero::<L>(isa, x.h_prev, j).sub(ng));
        let dn = dh.mul(one.sub(zg));
        dh.mul(zg).store(&mut direct[j..]);
        let dan = dn.mul(one.sub(ng.mul(ng)));
        let dr = dan.mul(L::load(isa, &x.hn[j..]));
        let dar = dr.mul(rg).mul(one.sub(rg));
        let daz = dz.mul(zg).mul(one.sub(zg));
        dar.store(&mut dxg[j..]);
        daz.store(&mut dxg[h + j..]);
        dan.store(&mut dxg[2 * h + j..]);
        dar.store(&mut dhg[j..]);
        daz.store(&mut dhg[h + j..]);
        dan.mul(rg).store(&mut dhg[2 * h + j..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{KernelPath, Mode};
    use crate::kernels::math::{sigmoid, tanh};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 2001) as f32 / 250.0 - 4.0).collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// H = 19 has full vectors and a tail on every path; 40 rows with 4H = 76 are one chunk,
    /// and H = 1100 makes several chunks.
    #[test]
    fn lstm_and_gru_steps_match_the_scalar_cell_on_every_path() {
        for (b, h) in [(40, 19), (5, 1100)] {
            let (xp, hp, b_ih, b_hh, prev) =
                (values(b * 4 * h, 1), values(b * 4 * h, 2), values(4 * h, 3), values(4 * h, 4), values(b * h, 5));
            let (gy, dh_next, dc0) = (values(b * h, 6), values(b * h, 7), values(b * h, 8));
            // The scalar cell as `docs/ops-recurrent.md` writes it.
            let gh = 4 * h;
            let (mut g_ref, mut c_ref, mut tc_ref, mut y_ref) = (vec![0.0; b * gh], vec![0.0; b * h], vec![0.0; b * h], vec![0.0; b * h]);
            let (mut dc_ref, mut dg_ref) = (dc0.clone(), vec![0.0; b * gh]);
            for r in 0..b {
                let pre = |k: usize| (xp[r * gh + k] + b_ih[k]) + hp[r * gh + k];
                for j in 0..h {
                    let (i, f, g, o) = (sigmoid(pre(j)), sigmoid(pre(h + j)), tanh(pre(2 * h + j)), sigmoid(pre(3 * h + j)));
                    let c = f * prev[r * h + j] + i * g;
                    let tc = tanh(c);
                    [g_ref[r * gh + j], g_ref[r * gh + h + j], g_ref[r * gh + 2 * h + j], g_ref[r * gh + 3 * h + j]] = [i, f, g, o];
                    (c_ref[r * h + j], tc_ref[r * h + j], y_ref[r * h + j]) = (c, tc, o * tc);
                    let dh = gy[r * h + j] + dh_next[r * h + j];
                    let dc = dc_ref[r * h + j] + dh * o * (1.0 - tc * tc);
                    dc_ref[r * h + j] = dc * f;
                    dg_ref[r * gh + j] = dc * g * i * (1.0 - i);
                    dg_ref[r * gh + h + j] = dc * prev[r * h + j] * f * (1.0 - f);
                    dg_ref[r * gh + 2 * h + j] = dc * i * (1.0 - g * g);
                    dg_ref[r * gh + 3 * h + j] = dh * tc * o * (1.0 - o);
                }
            }
            let gru_in =
                CellInputs { xp: &xp[..b * 3 * h], hp: &hp[..b * 3 * h], b_ih: None, b_hh: Some(&b_hh[..3 * h]), prev: Some(&prev) };
            let mut gru_ref = None;
            for path in KernelPath::supported() {
                for threads in [1, 2] {
                    let s = Settings { mode: Mode::Exact, threads, path };
                    let (mut g, mut c, mut tc, mut y) = (vec![0.0; b * gh], vec![0.0; b * h], vec![0.0; b * h], vec![0.0; b * h]);
                    let inp = CellInputs { xp: &xp, hp: &hp, b_ih: Some(&b_ih), b_hh: None, prev: Some(&prev) };
                    lstm_forward(s, h, inp, &mut g, &mut c, &mut tc, &mut y);
                    let what = format!("{path} threads={threads} b={b} h={h}");
                    assert!(bits(&g) == bits(&g_ref) && bits(&c) == bits(&c_ref), "lstm forward {what}");
                    assert!(bits(&tc) == bits(&tc_ref) && bits(&y) == bits(&y_ref), "lstm forward {what}");
                    let (mut dc, mut dg) = (dc0.clone(), vec![0.0; b * gh]);
                    let grads = LstmGrads { gates: &g, tanh_c: &tc, c_prev: Some(&prev), gy: &gy, dh_next: &dh_next };
                    lstm_backward(s, h, grads, &mut dc, &mut dg);
                    assert!(bits(&dc) == bits(&dc_ref) && bits(&dg) == bits(&dg_ref), "lstm backward {what}");
                    // The GRU: every path and thread count gives the scalar path's bits.
                    let (mut g3, mut hn, mut y3) = (vec![0.0; b * 3 * h], vec![0.0; b * h], vec![0.0; b * h]);
                    gru_forward(s, h, gru_in, &mut g3, &mut hn, &mut y3);
                    let (mut dx, mut dhh, mut direct) = (vec![0.0; b * 3 * h], vec![0.0; b * 3 * h], vec![0.0; b * h]);
                    let grads = GruGrads { gates: &g3, hn: &hn, h_prev: None, gy: &gy, dh_next: &dh_next };
                    gru_backward(s, h, grads, &mut dx, &mut dhh, &mut direct);
                    let all: Vec<u32> = [&g3, &hn, &y3, &dx, &dhh, &direct].iter().flat_map(|v| bits(v)).collect();
                    assert!(*gru_ref.get_or_insert_with(|| all.clone()) == all, "gru {what}");
                }
            }
        }
    }
}
