//! Recurrent layers: `lstm_layer` and `gru_layer` (one direction of one layer, with
//! backpropagation through time as an explicit loop) and the compositions `lstm` and `gru`
//! (any number of layers, bidirectional, batch-first, optional initial states), following
//! `torch.nn.LSTM`/`torch.nn.GRU`: gate rows stacked `i,f,g,o` (LSTM) and `r,z,n` (GRU).
//!
//! Products run on the canonical-order GEMM: the input projection of all steps is one
//! `[T·B, I]×[I, gH]` product against `W_ihᵀ`, each step one `[B, H]×[H, gH]` product
//! against `W_hhᵀ`; the weight and input gradients are single products over all steps after
//! the backward loop. Transposed operands (`W_ihᵀ`, `W_hhᵀ`, `dGᵀ`) are read in place by the
//! GEMM's packing, never copied. Gate sums, activations and cell updates of a step run over
//! the whole `[B, gH]` block in the lane loops of `om_core::kernels::gates` (the same f32
//! operations per element on every path) and the bias gradients are f64 sums in increasing
//! row order, so exact mode gives the same bits on every kernel path and thread count. Every
//! buffer comes from the pool. Layouts, saved slots and the order of the backward loop are
//! in `docs/ops-recurrent.md`.

use om_core::compute::{Compute, Settings};
use om_core::kernels::gates::{self, CellInputs, GruGrads, LstmGrads};
use om_core::kernels::gemm::{gemm, MatMut, MatRef};
use om_core::pool::{Buffer, F64Scratch};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

// ===== shared helpers =====

/// A pooled f32 scratch of `len` values. Every constructor fails with
/// `Error::OutOfMemory` (naming no operator yet) when the pool refuses the buffer.
struct Scratch {
    buf: Buffer,
    len: usize,
}

impl Scratch {
    fn new(len: usize) -> Result<Scratch> {
        Ok(Scratch { buf: Buffer::try_new(bytes(len))?, len })
    }

    fn zeroed(len: usize) -> Result<Scratch> {
        Ok(Scratch { buf: Buffer::try_zeroed(bytes(len))?, len })
    }

    /// A pooled copy of the values of an optional tensor (a bias, an initial state).
    fn of(t: Option<&Tensor>) -> Result<Option<Scratch>> {
        let Some(t) = t else { return Ok(None) };
        t.try_with_f32(|v| {
            let mut s = Scratch::new(v.len())?;
            s.get_mut().copy_from_slice(v);
            Ok(Some(s))
        })?
    }

    fn get(&self) -> &[f32] {
        &self.buf.f32()[..self.len]
    }

    fn get_mut(&mut self) -> &mut [f32] {
        &mut self.buf.f32_mut()[..self.len]
    }
}

/// The bytes of `len` floats (saturating: an impossible count is refused by the pool).
fn bytes(len: usize) -> usize {
    len.saturating_mul(4)
}

/// Step `t` of a `[T, len]` buffer for writing, with the step `prev` (≠ `t`) for reading.
fn step_and_prev(buf: &mut [f32], t: usize, prev: Option<usize>, len: usize) -> (&mut [f32], Option<&[f32]>) {
    match prev {
        Some(p) if p < t => {
            let (lo, hi) = buf.split_at_mut(t * len);
            (&mut hi[..len], Some(&lo[p * len..(p + 1) * len]))
        }
        Some(p) => {
            let (lo, hi) = buf.split_at_mut(p * len);
            (&mut lo[t * len..(t + 1) * len], Some(&hi[..len]))
        }
        None => (&mut buf[t * len..(t + 1) * len], None),
    }
}

/// Sizes of one recurrent layer.
#[derive(Clone, Copy, Debug)]
struct Dims {
    t: usize,
    b: usize,
    i: usize,
    h: usize,
}

/// Validates the tensors of one layer with `gates` gate blocks (4 for LSTM, 3 for GRU).
/// `x_shape` is the layer input's shape `[T, B, I]`; `states` are the optional `[B, H]`
/// initial states with their names.
#[allow(clippy::too_many_arguments)]
fn check_layer(
    op: &'static str,
    gates: usize,
    x_shape: &[usize],
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
    states: &[(&'static str, Option<&Tensor>)],
) -> Result<Dims> {
    w_ih.expect_f32(op, "w_ih")?;
    w_hh.expect_f32(op, "w_hh")?;
    for (arg, b) in [("b_ih", b_ih), ("b_hh", b_hh)] {
        if let Some(b) = b {
            b.expect_f32(op, arg)?;
        }
    }
    for &(arg, s) in states {
        if let Some(s) = s {
            s.expect_f32(op, arg)?;
        }
    }
    if x_shape.len() != 3 {
        return Err(Error::shape(op, &[x_shape], format!("x must be [T, B, I] (rank 3), got rank {}", x_shape.len())));
    }
    let (t, b, i) = (x_shape[0], x_shape[1], x_shape[2]);
    if t == 0 {
        return Err(Error::shape(op, &[x_shape], "the sequence is empty (T = 0)"));
    }
    if i == 0 {
        return Err(Error::shape(op, &[x_shape], "the input size must be at least 1 (as in PyTorch; an empty batch is fine)"));
    }
    if w_hh.rank() != 2 || w_hh.shape()[1] == 0 || w_hh.shape()[0] != gates * w_hh.shape()[1] {
        return Err(Error::shape(op, &[w_hh.shape()], format!("w_hh must be [{gates}·H, H] with H ≥ 1, got {:?}", w_hh.shape())));
    }
    let h = w_hh.shape()[1];
    if w_ih.shape() != [gates * h, i] {
        return Err(Error::shape(
            op,
            &[x_shape, w_ih.shape(), w_hh.shape()],
            format!("w_ih must be [{gates}·H, I] = [{}, {i}] (H = {h} from w_hh, I = {i} from x), got {:?}", gates * h, w_ih.shape()),
        ));
    }
    for (arg, bias) in [("b_ih", b_ih), ("b_hh", b_hh)] {
        if let Some(bias) = bias {
            if bias.shape() != [gates * h] {
                return Err(Error::shape(
                    op,
                    &[w_hh.shape(), bias.shape()],
                    format!("`{arg}` must be [{gates}·H] = [{}], got {:?}", gates * h, bias.shape()),
                ));
            }
        }
    }
    for &(arg, s) in states {
        if let Some(s) = s {
            if s.shape() != [b, h] {
                return Err(Error::shape(op, &[x_shape, s.shape()], format!("`{arg}` must be [B, H] = [{b}, {h}], got {:?}", s.shape())));
            }
        }
    }
    Ok(Dims { t, b, i, h })
}

/// Forward step `s` (0-based in processing order) visits time `t`.
fn time_of(s: usize, t_len: usize, reverse: bool) -> usize {
    if reverse {
        t_len - 1 - s
    } else {
        s
    }
}

/// The time visited just before `t` (None at the first step).
fn prev_time(t: usize, t_len: usize, reverse: bool) -> Option<usize> {
    if reverse {
        (t + 1 < t_len).then_some(t + 1)
    } else {
        t.checked_sub(1)
    }
}

/// `x·W_ihᵀ` for all steps: `[T·B, gH]`, one GEMM reading `W_ih` transposed in place.
fn input_projection(settings: Settings, x: &Tensor, w_ih: &Tensor, dm: Dims, gh: usize) -> Result<Scratch> {
    let rows = dm.t * dm.b;
    let mut xp = Scratch::new(rows.saturating_mul(gh))?;
    x.try_with_f32(|xs| {
        w_ih.try_with_f32(|ws| {
            let (a, b) = (MatRef::row_major(xs, rows, dm.i), MatRef::row_major(ws, gh, dm.i).t());
            gemm(settings, a, b, MatMut::row_major(xp.get_mut(), rows, gh));
        })
    })??;
    Ok(xp)
}

/// The previous hidden states of every step in time order (`[T·B, H]`): the state of the
/// step processed just before `t`, `h0` (or zeros) at the first step.
fn previous_states(y: &[f32], h0: Option<&[f32]>, dm: Dims, reverse: bool) -> Result<Scratch> {
    let bh = dm.b * dm.h;
    let mut out = Scratch::new(dm.t * bh)?;
    let o = out.get_mut();
    for t in 0..dm.t {
        let dst = &mut o[t * bh..(t + 1) * bh];
        match (prev_time(t, dm.t, reverse), h0) {
            (Some(p), _) => dst.copy_from_slice(&y[p * bh..(p + 1) * bh]),
            (None, Some(h0)) => dst.copy_from_slice(h0),
            (None, None) => dst.fill(0.0),
        }
    }
    Ok(out)
}

/// The gradients after the backward loop, each a single product over all steps:
/// `dx = dX·W_ih`, `dW_ih = dXᵀ·x`, `dW_hh = dHᵀ·H_prev`, and the f64 row sums of `dX` and
/// `dH` (increasing row order) for the biases. Returns `[dx, dw_ih, dw_hh, db_ih, db_hh]`,
/// each only when `needs` says so; `dh` is `None` when it equals `dx_gates` (LSTM).
#[allow(clippy::too_many_arguments)]
fn parameter_grads(
    settings: Settings,
    dm: Dims,
    gh: usize,
    dx_gates: &[f32],
    dh_gates: Option<&[f32]>,
    x: &Tensor,
    w_ih: &Tensor,
    h_prev: &[f32],
    needs: [bool; 5],
) -> Result<[Option<Tensor>; 5]> {
    let rows = dm.t * dm.b;
    let mut out: [Option<Tensor>; 5] = Default::default();
    // dXᵀ and dHᵀ are read transposed in place.
    let dxt = MatRef::row_major(dx_gates, rows, gh).t();
    if needs[0] {
        out[0] = Some(w_ih.try_with_f32(|ws| {
            Tensor::build_f32(&[dm.t, dm.b, dm.i], |dx| {
                gemm(settings, MatRef::row_major(dx_gates, rows, gh), MatRef::row_major(ws, gh, dm.i), MatMut::row_major(dx, rows, dm.i));
                Ok(())
            })
        })??);
    }
    if needs[1] {
        out[1] = Some(x.try_with_f32(|xs| {
            Tensor::build_f32(&[gh, dm.i], |dw| {
                gemm(settings, dxt, MatRef::row_major(xs, rows, dm.i), MatMut::row_major(dw, gh, dm.i));
                Ok(())
            })
        })??);
    }
    if needs[2] {
        let dht = dh_gates.map_or(dxt, |dhg| MatRef::row_major(dhg, rows, gh).t());
        out[2] = Some(Tensor::build_f32(&[gh, dm.h], |dw| {
            gemm(settings, dht, MatRef::row_major(h_prev, rows, dm.h), MatMut::row_major(dw, gh, dm.h));
            Ok(())
        })?);
    }
    if needs[3] || (needs[4] && dh_gates.is_none()) {
        let s = row_sums(dx_gates, gh)?;
        if needs[4] && dh_gates.is_none() {
            out[4] = Some(s.clone());
        }
        if needs[3] {
            out[3] = Some(s);
        }
    }
    if let (true, Some(dhg)) = (needs[4], dh_gates) {
        out[4] = Some(row_sums(dhg, gh)?);
    }
    Ok(out)
}

/// Column sums of the row-major `[rows, cols]` matrix `m`: f64 in increasing row order,
/// rounded once.
fn row_sums(m: &[f32], cols: usize) -> Result<Tensor> {
    let mut acc = F64Scratch::try_zeroed(cols)?;
    let a = acc.values();
    for row in m.chunks_exact(cols) {
        for (s, &v) in a.iter_mut().zip(row) {
            *s += v as f64;
        }
    }
    Tensor::build_f32(&[cols], |out| {
        for (o, &s) in out.iter_mut().zip(a.iter()) {
            *o = s as f32;
        }
        Ok(())
    })
}

/// The shapes of the inputs of a layer record: `[T, B, I]` and `H`.
fn record_dims(input_shapes: &[om_core::layout::Dims]) -> Dims {
    let (x, w_hh) = (&input_shapes[0], &input_shapes[2]);
    Dims { t: x[0], b: x[1], i: x[2], h: w_hh[1] }
}

/// What both layers' forwards start from: the validated sizes, the settings, every step's
/// input projection `x·W_ihᵀ`, pooled copies of the biases and of the initial hidden state
/// (zeros when absent), and the buffer of one step's hidden projection `h·W_hhᵀ`.
struct Prologue {
    dm: Dims,
    settings: Settings,
    xp: Scratch,
    b_ih: Option<Scratch>,
    b_hh: Option<Scratch>,
    h0: Scratch,
    has_h0: bool,
    hp: Scratch,
}

impl Prologue {
    /// Validates one layer with `gates` gate blocks (`states`: its optional `[B, H]`
    /// initial states by name, the hidden state first) and prepares its buffers.
    #[allow(clippy::too_many_arguments)]
    fn new(
        op: &'static str,
        gates: usize,
        x: &Tensor,
        w_ih: &Tensor,
        w_hh: &Tensor,
        b_ih: Option<&Tensor>,
        b_hh: Option<&Tensor>,
        states: &[(&'static str, Option<&Tensor>)],
    ) -> Result<Prologue> {
        x.expect_f32(op, "x")?;
        let dm = check_layer(op, gates, x.shape(), w_ih, w_hh, b_ih, b_hh, states)?;
        let gh = gates * dm.h;
        let settings = Compute::settings();
        let xp = input_projection(settings, x, w_ih, dm, gh)?;
        let h0 = states.first().and_then(|&(_, h0)| h0);
        Ok(Prologue {
            dm,
            settings,
            xp,
            b_ih: Scratch::of(b_ih)?,
            b_hh: Scratch::of(b_hh)?,
            h0: match Scratch::of(h0)? {
                Some(h0) => h0,
                None => Scratch::zeroed(dm.b * dm.h)?,
            },
            has_h0: h0.is_some(),
            hp: Scratch::new(dm.b * gh)?,
        })
    }

    /// The step inputs of time `t`, after `hp` holds the step's hidden projection; `prev`
    /// is the previous state the cell update reads (`c'` for the LSTM, `h'` for the GRU).
    fn cell_inputs<'a>(&'a self, t: usize, gh: usize, prev: Option<&'a [f32]>) -> CellInputs<'a> {
        let rows = t * self.dm.b * gh..(t + 1) * self.dm.b * gh;
        CellInputs {
            xp: &self.xp.get()[rows],
            hp: self.hp.get(),
            b_ih: self.b_ih.as_ref().map(Scratch::get),
            b_hh: self.b_hh.as_ref().map(Scratch::get),
            prev,
        }
    }
}

/// Emits `[dx, dw_ih, dw_hh, db_ih, db_hh]` from [`parameter_grads`] to the inputs of a
/// layer's `Grads` (the two layers' generated `Grads` share these method names).
macro_rules! emit_parameter_grads {
    ($d:ident, $grads:expr) => {{
        let [dx, dwih, dwhh, dbih, dbhh] = $grads;
        if let Some(t) = dx {
            $d.x(t);
        }
        if let Some(t) = dwih {
            $d.w_ih(t);
        }
        if let Some(t) = dwhh {
            $d.w_hh(t);
        }
        if let Some(t) = dbih {
            $d.b_ih(t);
        }
        if let Some(t) = dbhh {
            $d.b_hh(t);
        }
    }};
}

// ===== LSTM layer =====

/// One direction of one LSTM layer (PyTorch gate order `i,f,g,o`): `x` `[T, B, I]`,
/// `w_ih` `[4H, I]`, `w_hh` `[4H, H]`, optional biases `[4H]` and initial states `h0`, `c0`
/// `[B, H]` (zeros if absent). Returns every step's hidden state `y` `[T, B, H]`; a reverse
/// layer runs `t = T−1..0` and `y[t]` is its state at `t`. Per step: `a = (x·W_ihᵀ + b_ih) +
/// (h·W_hhᵀ + b_hh)`, `c = f·c' + i·g`, `h = o·tanh c`. Backward through time in reverse
/// step order (`dh = gy + dh'`, `dc = dc' + dh·o·(1−tanh²c)`, `dh' = dG·W_hh`, `dc' = dc·f`),
/// then `dx = dG·W_ih`, `dW_ih = dGᵀ·x`, `dW_hh = dGᵀ·H_prev`, `db_ih = db_hh = Σ dG`.
///
/// With `final_cell` the output has one more row, `[T + 1, B, H]`: rows `0..T` are `y` and
/// row `T` is the final cell state `c_n` (the cell state of the last step processed), so
/// that [`lstm()`] can return `c_n` with its gradient — its gradient enters the backward
/// loop as the cell-state gradient after the last step (`dc' = g[T]` instead of 0).
#[op(saved = [x, w_ih, w_hh, gates: owned, c: owned, tanh_c: owned, out, h0, c0], attrs = [reverse: bool, final_cell: bool])]
pub mod lstm_layer {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        x: &Tensor,
        w_ih: &Tensor,
        w_hh: &Tensor,
        b_ih: Option<&Tensor>,
        b_hh: Option<&Tensor>,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
        reverse: bool,
        final_cell: bool,
    ) -> Result<(Tensor, Owned)> {
        let mut p = Prologue::new(NAME, 4, x, w_ih, w_hh, b_ih, b_hh, &[("h0", h0), ("c0", c0)])?;
        let (Dims { t: t_len, b, h, .. }, settings) = (p.dm, p.settings);
        let (gh, bh) = (4 * h, b * h);
        let c0 = Scratch::of(c0)?;
        let mut owned = None;
        let y = w_hh.try_with_f32(|whh| {
            Tensor::build_f32(&[t_len + usize::from(final_cell), b, h], |y| {
                // W_hhᵀ is read transposed in place by every step's product.
                let whh_t = MatRef::row_major(whh, gh, h).t();
                let [gates, c, tanh_c] =
                    Tensor::build_many_f32([&[t_len, b, gh], &[t_len, b, h], &[t_len, b, h]], |[gates, c_all, tc_all]| {
                        for s in 0..t_len {
                            let t = time_of(s, t_len, reverse);
                            let prev = prev_time(t, t_len, reverse);
                            let (y_t, y_prev) = step_and_prev(y, t, prev, bh);
                            let (c_t, c_prev) = step_and_prev(c_all, t, prev, bh);
                            let h_prev = MatRef::row_major(y_prev.unwrap_or(p.h0.get()), b, h);
                            gemm(settings, h_prev, whh_t, MatMut::row_major(p.hp.get_mut(), b, gh));
                            let inp = p.cell_inputs(t, gh, c_prev.or(c0.as_ref().map(Scratch::get)));
                            gates::lstm_forward(
                                settings,
                                h,
                                inp,
                                &mut gates[t * b * gh..(t + 1) * b * gh],
                                c_t,
                                &mut tc_all[t * bh..(t + 1) * bh],
                                y_t,
                            );
                        }
                        if final_cell {
                            let last = time_of(t_len - 1, t_len, reverse);
                            y[t_len * bh..].copy_from_slice(&c_all[last * bh..(last + 1) * bh]);
                        }
                        Ok(())
                    })?;
                owned = Some(Owned { gates, c, tanh_c });
                Ok(())
            })
        })??;
        Ok((y, owned.expect("built")))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let dm = record_dims(&r.input_shapes);
        let Dims { t: t_len, b, h, .. } = dm;
        let (gh, bh) = (4 * h, b * h);
        let settings = Compute::settings();
        let c0 = Scratch::of(r.c0.as_ref().map(|s| s.tensor()))?;
        let mut dg = Scratch::new(t_len * b * gh)?;
        let mut dh_next = Scratch::zeroed(bh)?;
        let mut dc_next = Scratch::zeroed(bh)?;
        if r.final_cell {
            // The gradient of c_n is the cell-state gradient after the last step.
            g.try_with_f32(|gy| dc_next.get_mut().copy_from_slice(&gy[t_len * bh..]))?;
        }
        r.gates().try_with_f32(|gates| {
            r.c().try_with_f32(|c_all| {
                r.tanh_c().try_with_f32(|tc_all| {
                    g.try_with_f32(|gy| {
                        r.w_hh().try_with_f32(|whh| {
                            let dg = dg.get_mut();
                            for s in (0..t_len).rev() {
                                let t = time_of(s, t_len, r.reverse);
                                let c_prev = match prev_time(t, t_len, r.reverse) {
                                    Some(p) => Some(&c_all[p * bh..(p + 1) * bh]),
                                    None => c0.as_ref().map(Scratch::get),
                                };
                                let inp = LstmGrads {
                                    gates: &gates[t * b * gh..(t + 1) * b * gh],
                                    tanh_c: &tc_all[t * bh..(t + 1) * bh],
                                    c_prev,
                                    gy: &gy[t * bh..(t + 1) * bh],
                                    dh_next: dh_next.get(),
                                };
                                gates::lstm_backward(settings, h, inp, dc_next.get_mut(), &mut dg[t * b * gh..(t + 1) * b * gh]);
                                gemm(
                                    settings,
                                    MatRef::with_stride(&dg[t * b * gh..], b, gh, gh),
                                    MatRef::with_stride(whh, gh, h, h),
                                    MatMut::with_stride(dh_next.get_mut(), b, h, h),
                                );
                            }
                        })
                    })
                })
            })
        })?????;
        let needs = [d.needs_x(), d.needs_w_ih(), d.needs_w_hh(), d.needs_b_ih(), d.needs_b_hh()];
        let h_prev = if needs[2] {
            let h0 = Scratch::of(r.h0.as_ref().map(|s| s.tensor()))?;
            r.out().try_with_f32(|y| previous_states(y, h0.as_ref().map(Scratch::get), dm, r.reverse))??
        } else {
            Scratch::new(0)?
        };
        emit_parameter_grads!(d, parameter_grads(settings, dm, gh, dg.get(), None, r.x(), r.w_ih(), h_prev.get(), needs)?);
        if d.needs_h0() {
            d.h0(Tensor::from_slice(dh_next.get(), &[b, h])?);
        }
        if d.needs_c0() {
            d.c0(Tensor::from_slice(dc_next.get(), &[b, h])?);
        }
        Ok(())
    }
    fn cases() -> Vec<Case> {
        let inp = Case::input;
        let w = |t: &[Tensor], k: usize| Some(t[k].clone());
        vec![
            Case::new(
                "full",
                vec![
                    inp(&[3, 2, 3], -1.0, 1.0, 1),
                    inp(&[8, 3], -0.6, 0.6, 2),
                    inp(&[8, 2], -0.6, 0.6, 3),
                    inp(&[8], -0.5, 0.5, 4),
                    inp(&[8], -0.5, 0.5, 5),
                    inp(&[2, 2], -1.0, 1.0, 6),
                    inp(&[2, 2], -1.0, 1.0, 7),
                ],
                move |t| super::lstm_layer(&t[0], &t[1], &t[2], w(t, 3).as_ref(), w(t, 4).as_ref(), Some(&t[5]), Some(&t[6]), false, false),
            ),
            Case::new(
                "reverse_full",
                vec![
                    inp(&[4, 2, 2], -1.0, 1.0, 8),
                    inp(&[12, 2], -0.6, 0.6, 9),
                    inp(&[12, 3], -0.6, 0.6, 10),
                    inp(&[12], -0.5, 0.5, 11),
                    inp(&[12], -0.5, 0.5, 12),
                    inp(&[2, 3], -1.0, 1.0, 13),
                    inp(&[2, 3], -1.0, 1.0, 14),
                ],
                move |t| super::lstm_layer(&t[0], &t[1], &t[2], w(t, 3).as_ref(), w(t, 4).as_ref(), Some(&t[5]), Some(&t[6]), true, false),
            ),
            Case::new(
                "reverse_plain",
                vec![inp(&[3, 2, 3], -1.0, 1.0, 15), inp(&[8, 3], -0.6, 0.6, 16), inp(&[8, 2], -0.6, 0.6, 17)],
                |t| super::lstm_layer(&t[0], &t[1], &t[2], None, None, None, None, true, false),
            ),
            // Batch-first storage read as [T, B, I]; h0 only, b_hh only.
            Case::new(
                "transposed_h0_only",
                vec![
                    inp(&[2, 3, 2], -1.0, 1.0, 18),
                    inp(&[8, 2], -0.6, 0.6, 19),
                    inp(&[8, 2], -0.6, 0.6, 20),
                    inp(&[8], -0.5, 0.5, 21),
                    inp(&[2, 2], -1.0, 1.0, 22),
                ],
                |t| super::lstm_layer(&crate::transpose(&t[0], 0, 1)?, &t[1], &t[2], None, Some(&t[3]), Some(&t[4]), None, false, false),
            ),
            Case::new(
                "c0_only",
                vec![
                    inp(&[2, 1, 2], -1.0, 1.0, 23),
                    inp(&[4, 2], -0.6, 0.6, 24),
                    inp(&[4, 1], -0.6, 0.6, 25),
                    inp(&[4], -0.5, 0.5, 26),
                    inp(&[1, 1], -1.0, 1.0, 27),
                ],
                |t| super::lstm_layer(&t[0], &t[1], &t[2], Some(&t[3]), None, None, Some(&t[4]), false, false),
            ),
            // The final cell state as an extra output row, both directions.
            Case::new(
                "final_cell",
                vec![
                    inp(&[3, 2, 3], -1.0, 1.0, 28),
                    inp(&[8, 3], -0.6, 0.6, 29),
                    inp(&[8, 2], -0.6, 0.6, 30),
                    inp(&[8], -0.5, 0.5, 31),
                    inp(&[2, 2], -1.0, 1.0, 32),
                    inp(&[2, 2], -1.0, 1.0, 33),
                ],
                move |t| super::lstm_layer(&t[0], &t[1], &t[2], w(t, 3).as_ref(), None, Some(&t[4]), Some(&t[5]), false, true),
            ),
            Case::new(
                "reverse_final_cell_plain",
                vec![inp(&[4, 1, 2], -1.0, 1.0, 34), inp(&[12, 2], -0.6, 0.6, 35), inp(&[12, 3], -0.6, 0.6, 36)],
                |t| super::lstm_layer(&t[0], &t[1], &t[2], None, None, None, None, true, true),
            ),
        ]
    }
}

// ===== GRU layer =====

/// One direction of one GRU layer (PyTorch gate order `r,z,n`): `x` `[T, B, I]`, `w_ih`
/// `[3H, I]`, `w_hh` `[3H, H]`, optional biases `[3H]` and initial state `h0` `[B, H]`.
/// Returns every step's hidden state `[T, B, H]` (a reverse layer runs `t = T−1..0`). Per
/// step: `r = σ((W_ir x + b_ir) + (W_hr h + b_hr))`, `z` likewise, `n = tanh((W_in x + b_in) +
/// r·(W_hn h + b_hn))`, `h = (1−z)·n + z·h'`. Backward through time in reverse step order
/// with `dX[t] = [dar, daz, dan]`, `dH[t] = [dar, daz, dan·r]`, `dh' = dH[t]·W_hh + dh·z`;
/// then `dx = dX·W_ih`, `dW_ih = dXᵀ·x`, `dW_hh = dHᵀ·H_prev`, `db_ih = Σ dX`, `db_hh = Σ dH`.
#[op(saved = [x, w_ih, w_hh, gates: owned, hn: owned, out, h0], attrs = [reverse: bool])]
pub mod gru_layer {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        x: &Tensor,
        w_ih: &Tensor,
        w_hh: &Tensor,
        b_ih: Option<&Tensor>,
        b_hh: Option<&Tensor>,
        h0: Option<&Tensor>,
        reverse: bool,
    ) -> Result<(Tensor, Owned)> {
        let mut p = Prologue::new(NAME, 3, x, w_ih, w_hh, b_ih, b_hh, &[("h0", h0)])?;
        let (Dims { t: t_len, b, h, .. }, settings) = (p.dm, p.settings);
        let (gh, bh) = (3 * h, b * h);
        let [y, gates, hn] = w_hh.try_with_f32(|whh| {
            Tensor::build_many_f32([&[t_len, b, h], &[t_len, b, gh], &[t_len, b, h]], |[y, gates, hn_all]| {
                // W_hhᵀ is read transposed in place by every step's product.
                let whh_t = MatRef::row_major(whh, gh, h).t();
                for s in 0..t_len {
                    let t = time_of(s, t_len, reverse);
                    let (y_t, y_prev) = step_and_prev(y, t, prev_time(t, t_len, reverse), bh);
                    // The cell update reads h' only when there is one (no h0: none at the
                    // first step); the product reads zeros then.
                    let h_prev = y_prev.or(p.has_h0.then(|| p.h0.get()));
                    let a = MatRef::row_major(h_prev.unwrap_or(p.h0.get()), b, h);
                    gemm(settings, a, whh_t, MatMut::row_major(p.hp.get_mut(), b, gh));
                    let inp = p.cell_inputs(t, gh, h_prev);
                    gates::gru_forward(settings, h, inp, &mut gates[t * b * gh..(t + 1) * b * gh], &mut hn_all[t * bh..(t + 1) * bh], y_t);
                }
                Ok(())
            })
        })??;
        Ok((y, Owned { gates, hn }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let dm = record_dims(&r.input_shapes);
        let Dims { t: t_len, b, h, .. } = dm;
        let (gh, bh) = (3 * h, b * h);
        let settings = Compute::settings();
        let h0 = Scratch::of(r.h0.as_ref().map(|s| s.tensor()))?;
        let h_prev = r.out().try_with_f32(|y| previous_states(y, h0.as_ref().map(Scratch::get), dm, r.reverse))??;
        let mut dxg = Scratch::new(t_len * b * gh)?;
        let mut dhg = Scratch::new(t_len * b * gh)?;
        let mut dh_next = Scratch::zeroed(bh)?;
        let mut direct = Scratch::new(bh)?;
        r.gates().try_with_f32(|gates| {
            r.hn().try_with_f32(|hn_all| {
                g.try_with_f32(|gy| {
                    r.w_hh().try_with_f32(|whh| {
                        let (dxg, dhg) = (dxg.get_mut(), dhg.get_mut());
                        for s in (0..t_len).rev() {
                            let t = time_of(s, t_len, r.reverse);
                            let (rows, units) = (t * b * gh..(t + 1) * b * gh, t * bh..(t + 1) * bh);
                            let inp = GruGrads {
                                gates: &gates[rows.clone()],
                                hn: &hn_all[units.clone()],
                                h_prev: Some(&h_prev.get()[units.clone()]),
                                gy: &gy[units],
                                dh_next: dh_next.get(),
                            };
                            gates::gru_backward(settings, h, inp, &mut dxg[rows.clone()], &mut dhg[rows], direct.get_mut());
                            gemm(
                                settings,
                                MatRef::with_stride(&dhg[t * b * gh..], b, gh, gh),
                                MatRef::with_stride(whh, gh, h, h),
                                MatMut::with_stride(dh_next.get_mut(), b, h, h),
                            );
                            for (v, &dd) in dh_next.get_mut().iter_mut().zip(direct.get()) {
                                *v += dd;
                            }
                        }
                    })
                })
            })
        })????;
        let needs = [d.needs_x(), d.needs_w_ih(), d.needs_w_hh(), d.needs_b_ih(), d.needs_b_hh()];
        emit_parameter_grads!(d, parameter_grads(settings, dm, gh, dxg.get(), Some(dhg.get()), r.x(), r.w_ih(), h_prev.get(), needs)?);
        if d.needs_h0() {
            d.h0(Tensor::from_slice(dh_next.get(), &[b, h])?);
        }
        Ok(())
    }
    fn cases() -> Vec<Case> {
        let inp = Case::input;
        vec![
            Case::new(
                "full",
                vec![
                    inp(&[3, 2, 3], -1.0, 1.0, 1),
                    inp(&[6, 3], -0.6, 0.6, 2),
                    inp(&[6, 2], -0.6, 0.6, 3),
                    inp(&[6], -0.5, 0.5, 4),
                    inp(&[6], -0.5, 0.5, 5),
                    inp(&[2, 2], -1.0, 1.0, 6),
                ],
                |t| super::gru_layer(&t[0], &t[1], &t[2], Some(&t[3]), Some(&t[4]), Some(&t[5]), false),
            ),
            Case::new(
                "reverse_full",
                vec![
                    inp(&[4, 2, 2], -1.0, 1.0, 7),
                    inp(&[9, 2], -0.6, 0.6, 8),
                    inp(&[9, 3], -0.6, 0.6, 9),
                    inp(&[9], -0.5, 0.5, 10),
                    inp(&[9], -0.5, 0.5, 11),
                    inp(&[2, 3], -1.0, 1.0, 12),
                ],
                |t| super::gru_layer(&t[0], &t[1], &t[2], Some(&t[3]), Some(&t[4]), Some(&t[5]), true),
            ),
            Case::new(
                "reverse_plain",
                vec![inp(&[3, 2, 3], -1.0, 1.0, 13), inp(&[6, 3], -0.6, 0.6, 14), inp(&[6, 2], -0.6, 0.6, 15)],
                |t| super::gru_layer(&t[0], &t[1], &t[2], None, None, None, true),
            ),
            // Batch-first storage read as [T, B, I]; b_hh and h0 only.
            Case::new(
                "transposed_bhh_h0",
                vec![
                    inp(&[2, 3, 2], -1.0, 1.0, 16),
                    inp(&[6, 2], -0.6, 0.6, 17),
                    inp(&[6, 2], -0.6, 0.6, 18),
                    inp(&[6], -0.5, 0.5, 19),
                    inp(&[2, 2], -1.0, 1.0, 20),
                ],
                |t| super::gru_layer(&crate::transpose(&t[0], 0, 1)?, &t[1], &t[2], None, Some(&t[3]), Some(&t[4]), false),
            ),
            Case::new(
                "bih_only",
                vec![inp(&[2, 1, 2], -1.0, 1.0, 21), inp(&[3, 2], -0.6, 0.6, 22), inp(&[3, 1], -0.6, 0.6, 23), inp(&[3], -0.5, 0.5, 24)],
                |t| super::gru_layer(&t[0], &t[1], &t[2], Some(&t[3]), None, None, false),
            ),
        ]
    }
}

// ===== multi-layer compositions =====

/// The weights of one layer and direction, as in a PyTorch state dict: `w_ih` =
/// `weight_ih_l{k}[_reverse]` (`[gH, I]` for layer 0, `[gH, dirs·H]` above), `w_hh` =
/// `weight_hh_l{k}[_reverse]` (`[gH, H]`), `b_ih`/`b_hh` = `bias_ih_l{k}[_reverse]`/
/// `bias_hh_l{k}[_reverse]` (`[gH]`, absent for `bias=False`); `g` is 4 (LSTM) or 3 (GRU).
#[derive(Clone, Debug)]
pub struct RnnWeights {
    /// Input-to-hidden weights `[gH, I]`.
    pub w_ih: Tensor,
    /// Hidden-to-hidden weights `[gH, H]`.
    pub w_hh: Tensor,
    /// Input-side bias `[gH]`.
    pub b_ih: Option<Tensor>,
    /// Hidden-side bias `[gH]`.
    pub b_hh: Option<Tensor>,
}

impl RnnWeights {
    /// Weights with both biases.
    pub fn new(w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> RnnWeights {
        RnnWeights { w_ih, w_hh, b_ih: Some(b_ih), b_hh: Some(b_hh) }
    }

    /// Weights without biases (`bias=False`).
    pub fn without_bias(w_ih: Tensor, w_hh: Tensor) -> RnnWeights {
        RnnWeights { w_ih, w_hh, b_ih: None, b_hh: None }
    }

    /// Takes the weights from a flat list in PyTorch's parameter order: per layer and
    /// direction `w_ih, w_hh, b_ih, b_hh` (with `bias`) or `w_ih, w_hh` (without).
    pub fn from_flat(ts: &[Tensor], bias: bool) -> Vec<RnnWeights> {
        let per = if bias { 4 } else { 2 };
        ts.chunks(per)
            .map(|c| RnnWeights {
                w_ih: c[0].clone(),
                w_hh: c[1].clone(),
                b_ih: c.get(2).filter(|_| bias).cloned(),
                b_hh: c.get(3).filter(|_| bias).cloned(),
            })
            .collect()
    }
}

/// The structure of a recurrent stack: PyTorch's `num_layers`, `bidirectional` and
/// `batch_first` of `nn.LSTM`/`nn.GRU`, with PyTorch's defaults (`Default`: one layer,
/// unidirectional, time-major) and a builder method per field.
///
/// ```
/// use om_ops::RnnConfig;
/// // nn.LSTM(.., num_layers=2, bidirectional=True, batch_first=True)
/// let c = RnnConfig::default().layers(2).bidirectional(true).batch_first(true);
/// assert_eq!(c, RnnConfig { layers: 2, bidirectional: true, batch_first: true });
/// assert_eq!(RnnConfig::default(), RnnConfig::new(1));
/// assert_eq!(c.dirs(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnnConfig {
    /// Number of stacked layers (at least 1).
    pub layers: usize,
    /// Whether each layer also runs in reverse (outputs concatenated on the feature axis).
    pub bidirectional: bool,
    /// Whether `x` and `y` are `[B, T, F]` instead of `[T, B, F]`.
    pub batch_first: bool,
}

impl RnnConfig {
    /// `layers` unidirectional layers, time-major.
    pub fn new(layers: usize) -> RnnConfig {
        RnnConfig { layers, bidirectional: false, batch_first: false }
    }

    /// The number of stacked layers (at least 1). Default 1.
    pub fn layers(self, layers: usize) -> RnnConfig {
        RnnConfig { layers, ..self }
    }

    /// Whether each layer also runs in reverse. Default off.
    pub fn bidirectional(self, bidirectional: bool) -> RnnConfig {
        RnnConfig { bidirectional, ..self }
    }

    /// Whether `x` and `y` are `[B, T, F]` instead of `[T, B, F]`. Default off.
    pub fn batch_first(self, batch_first: bool) -> RnnConfig {
        RnnConfig { batch_first, ..self }
    }

    /// Number of directions (1 or 2).
    pub fn dirs(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }
}

impl Default for RnnConfig {
    /// PyTorch's defaults: one layer, unidirectional, time-major.
    fn default() -> Self {
        RnnConfig::new(1)
    }
}

/// The outputs of `lstm`/`gru`.
#[derive(Clone, Debug)]
pub struct RnnOutput {
    /// Every step's hidden state of the last layer: `[T, B, dirs·H]` (`[B, T, dirs·H]`
    /// batch-first).
    pub y: Tensor,
    /// The final hidden state of every layer and direction `[layers·dirs, B, H]` (step
    /// T−1 of a forward layer, step 0 of a reverse one).
    pub h_n: Tensor,
    /// The final cell state of every layer and direction `[layers·dirs, B, H]` (LSTM only;
    /// `None` for a GRU), as `torch.nn.LSTM` returns it: pass it back as `c0` (with `h_n`
    /// as `h0`) to continue a long sequence in chunks.
    pub c_n: Option<Tensor>,
}

/// Validates a stack: `x` rank 3 f32, the weight count, every layer's weight shapes (layer
/// l > 0 reads `dirs·H` features) and the `[layers·dirs, B, H]` initial states. Returns
/// `(x as [T, B, I], H)`.
fn check_stack(
    op: &'static str,
    gates: usize,
    x: &Tensor,
    weights: &[RnnWeights],
    states: &[(&'static str, Option<&Tensor>)],
    config: RnnConfig,
) -> Result<(Tensor, usize)> {
    x.expect_f32(op, "x")?;
    if x.rank() != 3 {
        let layout = if config.batch_first { "[B, T, I]" } else { "[T, B, I]" };
        return Err(Error::shape(op, &[x.shape()], format!("x must be {layout} (rank 3), got rank {}", x.rank())));
    }
    let xt = if config.batch_first { crate::transpose(x, 0, 1)? } else { x.clone() };
    if config.layers == 0 {
        return Err(Error::argument(op, "layers must be at least 1"));
    }
    let dirs = config.dirs();
    if weights.len() != config.layers * dirs {
        return Err(Error::argument(
            op,
            format!(
                "expected {} weight sets ({} layers × {dirs} directions, PyTorch order: layer 0 forward, layer 0 reverse, …), got {}",
                config.layers * dirs,
                config.layers,
                weights.len()
            ),
        ));
    }
    let w0 = &weights[0].w_hh;
    if w0.rank() != 2 || w0.shape()[1] == 0 {
        return Err(Error::shape(op, &[w0.shape()], format!("w_hh must be [{gates}·H, H] with H ≥ 1, got {:?}", w0.shape())));
    }
    let h = w0.shape()[1];
    let (t, b) = (xt.shape()[0], xt.shape()[1]);
    for (k, w) in weights.iter().enumerate() {
        let features = if k < dirs { xt.shape()[2] } else { dirs * h };
        let dm = check_layer(op, gates, &[t, b, features], &w.w_ih, &w.w_hh, w.b_ih.as_ref(), w.b_hh.as_ref(), &[])?;
        if dm.h != h {
            return Err(Error::shape(op, &[w0.shape(), w.w_hh.shape()], format!("weight set {k} has H = {}, set 0 has H = {h}", dm.h)));
        }
    }
    for &(arg, s) in states {
        if let Some(s) = s {
            s.expect_f32(op, arg)?;
            if s.shape() != [config.layers * dirs, b, h] {
                return Err(Error::shape(
                    op,
                    &[x.shape(), s.shape()],
                    format!("`{arg}` must be [layers·dirs, B, H] = [{}, {b}, {h}], got {:?}", config.layers * dirs, s.shape()),
                ));
            }
        }
    }
    Ok((xt, h))
}

/// Runs a stack of layers: `layer(input, weights, k, reverse)` runs weight set `k` and
/// returns its states `[T, B, H]` and, for an LSTM, its final cell state `[B, H]`.
fn run_stack(
    xt: Tensor,
    weights: &[RnnWeights],
    config: RnnConfig,
    layer: impl Fn(&Tensor, &RnnWeights, usize, bool) -> Result<(Tensor, Option<Tensor>)>,
) -> Result<RnnOutput> {
    let dirs = config.dirs();
    let t_len = xt.shape()[0];
    let mut input = xt;
    with_tensor_list(|finals| {
        with_tensor_list(|cells| {
            for l in 0..config.layers {
                let mut run = |dir: usize| -> Result<Tensor> {
                    let k = l * dirs + dir;
                    let reverse = dir == 1;
                    let (y, cell) = layer(&input, &weights[k], k, reverse)?;
                    let last = if reverse { 0 } else { t_len as isize - 1 };
                    finals.push(crate::unsqueeze(&crate::select(&y, 0, last)?, 0)?);
                    if let Some(c) = cell {
                        cells.push(crate::unsqueeze(&c, 0)?);
                    }
                    Ok(y)
                };
                let forward = run(0)?;
                input = if dirs == 1 { forward } else { crate::concat(&[forward, run(1)?], 2)? };
            }
            let y = if config.batch_first { crate::transpose(&input, 0, 1)? } else { input };
            let c_n = if cells.is_empty() { None } else { Some(crate::concat(cells, 0)?) };
            Ok(RnnOutput { y, h_n: crate::concat(finals, 0)?, c_n })
        })
    })
}

thread_local! {
    /// Emptied tensor lists kept for [`with_tensor_list`], so a warm step does not allocate one.
    static TENSOR_LISTS: std::cell::RefCell<Vec<Vec<Tensor>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with an empty tensor list whose capacity is reused across calls on this thread
/// (the list is emptied, dropping its handles, before it is kept again).
fn with_tensor_list<R>(f: impl FnOnce(&mut Vec<Tensor>) -> R) -> R {
    let mut list = TENSOR_LISTS.with(|l| l.borrow_mut().pop()).unwrap_or_default();
    let out = f(&mut list);
    list.clear();
    let _ = TENSOR_LISTS.try_with(|l| l.borrow_mut().push(list));
    out
}

/// The `[B, H]` slice `k` of an optional `[layers·dirs, B, H]` state.
fn state(s: Option<&Tensor>, k: usize) -> Result<Option<Tensor>> {
    s.map(|s| crate::select(s, 0, k as isize)).transpose()
}

/// Multi-layer, optionally bidirectional LSTM as `torch.nn.LSTM` (no dropout, no
/// projections): `x` `[T, B, I]` (`[B, T, I]` batch-first), one [`RnnWeights`] per layer
/// and direction in PyTorch's order, optional `h0`, `c0` `[layers·dirs, B, H]`. Layer l+1
/// reads the concatenation of layer l's directions. Returns the last layer's states `y`,
/// the final hidden states `h_n` and the final cell states `c_n` (`Some`), each with its
/// gradient: a long sequence can be run in chunks, each chunk starting from the previous
/// chunk's `h_n`, `c_n`, with the same values as one run over the whole sequence.
/// Backward: through `lstm_layer` (and the concatenation of directions).
#[op(composition)]
pub mod lstm {
    use super::*;

    pub fn forward(x: &Tensor, h0: Option<&Tensor>, c0: Option<&Tensor>, weights: &[RnnWeights], config: RnnConfig) -> Result<RnnOutput> {
        let (xt, _) = check_stack(NAME, 4, x, weights, &[("h0", h0), ("c0", c0)], config)?;
        run_stack(xt, weights, config, |inp, w, k, reverse| {
            let (h, c) = (state(h0, k)?, state(c0, k)?);
            let out = crate::lstm_layer(inp, &w.w_ih, &w.w_hh, w.b_ih.as_ref(), w.b_hh.as_ref(), h.as_ref(), c.as_ref(), reverse, true)?;
            // Rows 0..T are the states; row T is the final cell state.
            let t_len = inp.shape()[0];
            Ok((crate::slice(&out, 0, 0, t_len as isize, 1)?, Some(crate::select(&out, 0, t_len as isize)?)))
        })
    }

    fn cases() -> Vec<Case> {
        stack_cases(4, super::lstm)
    }
}

/// Multi-layer, optionally bidirectional GRU as `torch.nn.GRU` (no dropout): `x`
/// `[T, B, I]` (`[B, T, I]` batch-first), one [`RnnWeights`] per layer and direction in
/// PyTorch's order, optional `h0` `[layers·dirs, B, H]`. Returns the last layer's states
/// `y` and the final hidden states `h_n`.
/// Backward: through `gru_layer` (and the concatenation of directions).
#[op(composition)]
pub mod gru {
    use super::*;

    pub fn forward(x: &Tensor, h0: Option<&Tensor>, weights: &[RnnWeights], config: RnnConfig) -> Result<RnnOutput> {
        let (xt, _) = check_stack(NAME, 3, x, weights, &[("h0", h0)], config)?;
        run_stack(xt, weights, config, |inp, w, k, reverse| {
            let h = state(h0, k)?;
            Ok((crate::gru_layer(inp, &w.w_ih, &w.w_hh, w.b_ih.as_ref(), w.b_hh.as_ref(), h.as_ref(), reverse)?, None))
        })
    }

    fn cases() -> Vec<Case> {
        stack_cases(3, |x, h0, _, w, cfg| super::gru(x, h0, w, cfg))
    }
}

/// A stack under test: `(x, h0, c0, weights, config)`.
type StackFn = fn(&Tensor, Option<&Tensor>, Option<&Tensor>, &[RnnWeights], RnnConfig) -> Result<RnnOutput>;

/// Gradient-check cases of a stack with `gates` gate blocks: the checked function is the
/// concatenation of `y`, `h_n` and (LSTM) `c_n`, flattened.
fn stack_cases(gates: usize, f: StackFn) -> Vec<Case> {
    let lstm = gates == 4;
    let spec = |name, [t, b, i, h, layers]: [usize; 5], [bidirectional, batch_first, bias, states]: [bool; 4]| {
        (name, [t, b, i, h], RnnConfig { layers, bidirectional, batch_first }, bias, states)
    };
    let specs = [
        spec("one_layer", [3, 2, 3, 2, 1], [false, false, true, false]),
        spec("two_layers_states", [3, 2, 2, 2, 2], [false, false, true, true]),
        spec("bidirectional_no_bias", [3, 2, 2, 2, 1], [true, false, false, false]),
        spec("bidirectional_two_layers_batch_first_states", [2, 2, 2, 2, 2], [true, true, true, true]),
        spec("batch_first_no_bias_states", [4, 1, 2, 3, 1], [false, true, false, true]),
    ];
    specs
        .into_iter()
        .enumerate()
        .map(|(n, (name, [t, b, i, h], config, bias, states))| {
            let RnnConfig { layers, batch_first, .. } = config;
            let dirs = config.dirs();
            let mut seed = 100 * n as u64;
            let mut next = || {
                seed += 1;
                seed
            };
            let x_shape = if batch_first { [b, t, i] } else { [t, b, i] };
            let mut inputs = vec![Case::input(&x_shape, -1.0, 1.0, next())];
            let n_states = if states {
                if lstm {
                    2
                } else {
                    1
                }
            } else {
                0
            };
            for _ in 0..n_states {
                inputs.push(Case::input(&[layers * dirs, b, h], -1.0, 1.0, next()));
            }
            for l in 0..layers {
                let features = if l == 0 { i } else { dirs * h };
                for _ in 0..dirs {
                    inputs.push(Case::input(&[gates * h, features], -0.6, 0.6, next()));
                    inputs.push(Case::input(&[gates * h, h], -0.6, 0.6, next()));
                    if bias {
                        inputs.push(Case::input(&[gates * h], -0.5, 0.5, next()));
                        inputs.push(Case::input(&[gates * h], -0.5, 0.5, next()));
                    }
                }
            }
            Case::new(name, inputs, move |ts| {
                let (h0, c0) = match n_states {
                    2 => (Some(&ts[1]), Some(&ts[2])),
                    1 => (Some(&ts[1]), None),
                    _ => (None, None),
                };
                let weights = RnnWeights::from_flat(&ts[1 + n_states..], bias);
                let out = f(&ts[0], h0, c0, &weights, config)?;
                let mut parts = vec![crate::reshape(&out.y, [-1])?, crate::reshape(&out.h_n, [-1])?];
                if let Some(c_n) = &out.c_n {
                    parts.push(crate::reshape(c_n, [-1])?);
                }
                crate::concat(&parts, 0)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
