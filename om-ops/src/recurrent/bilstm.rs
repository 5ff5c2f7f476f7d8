//! `lstm_pair_layer`: both directions of one bidirectional LSTM layer as one operator, so
//! that the two independent recurrences run at the same time, one per thread of the team
//! (each step's `[B, H]×[H, 4H]` product is too small to share among threads, so a
//! direction is the unit of parallel work: its chunk also computes its input projection
//! before its forward loop, and its weight-gradient products and bias sums after its
//! backward loop, each product on its own thread). Each direction computes exactly what
//! [`lstm_layer`](super::lstm_layer) computes for it, in the same order, so values and
//! gradients have the bits of the composition it replaces in [`lstm()`](super::lstm): two
//! `lstm_layer`s and the concatenation of their states.

use super::lstm_cell::{backward_loop, forward_loop, DirBackward, DirForward, ForwardBufs};
use super::*;
use om_core::kernels::chunks::row_tiles;
use om_core::kernels::gemm::{gemm_scratch_len, gemm_with_scratch};
use om_core::kernels::parallel::{for_each_tile_scratch, Tiled};
use om_core::kernels::scratch::WorkerScratch;
use std::sync::Mutex;

/// Runs `f` on the values of the `N` tensors `ts` at once (nested
/// [`Tensor::try_with_f32`] calls, on the calling thread: a gathered copy of a
/// non-contiguous tensor is taken here, never inside a chunk).
fn with_values<const N: usize, R>(ts: [&Tensor; N], f: impl FnOnce([&[f32]; N]) -> R) -> Result<R> {
    fn nest<const N: usize>(ts: &[&Tensor; N], i: usize, acc: [&[f32]; N], f: &mut dyn FnMut([&[f32]; N])) -> Result<()> {
        match ts.get(i) {
            None => {
                f(acc);
                Ok(())
            }
            Some(t) => t.try_with_f32(|v| {
                let mut acc = acc;
                acc[i] = v;
                nest(ts, i + 1, acc, f)
            })?,
        }
    }
    let (mut f, mut out) = (Some(f), None);
    nest(&ts, 0, [&[]; N], &mut |vals| out = f.take().map(|f| f(vals)))?;
    Ok(out.expect("`nest` calls `f` once when every read succeeds"))
}

/// Takes direction `k`'s part out of `slots` (each chunk of a section over the two
/// directions takes its own, once: a mutable borrow handed to one thread without `unsafe`).
fn take_part<T>(slots: &[Mutex<Option<T>>; 2], k: usize) -> T {
    let mut slot = slots[k].lock().unwrap_or_else(|e| e.into_inner());
    slot.take().expect("each direction's chunk runs once")
}

/// One direction's parameter-gradient outputs (each empty when not needed).
struct DirGrads<'a> {
    dx: &'a mut [f32],
    dw_ih: &'a mut [f32],
    dw_hh: &'a mut [f32],
    db: &'a mut [f32],
}

/// What direction `dir`'s parameter gradients read.
#[derive(Clone, Copy)]
struct ParamInputs<'a> {
    dir: usize,
    /// Its pre-activation gradients `dG` `[T·B, 4H]`.
    dg: &'a [f32],
    /// The layer input `[T·B, I]`, `W_ih` `[4H, I]`.
    x: &'a [f32],
    w_ih: &'a [f32],
    /// The layer's output `[T + 1, B, 2H]` (the states of both directions).
    out: &'a [f32],
    h0: Option<&'a [f32]>,
}

/// Direction `p.dir`'s `parameter_grads` on one thread, into `o` (an empty output is not
/// needed): `dx = dG·W_ih`, `dW_ih = dGᵀ·x`, `dW_hh = dGᵀ·H_prev` (`H_prev` built in
/// `h_prev`, `[T·B, H]`, from the states in `p.out` by `previous_states_into`), the
/// bias sums with `column_sums_into` (accumulating in `acc`, `4H` f64 zeros): the same
/// products and sums, so the same bits.
fn direction_grads(settings: Settings, dm: Dims, p: ParamInputs, o: DirGrads, acc: &mut [f64], h_prev: &mut [f32], gemm: &mut [f32]) {
    let Dims { t: t_len, b, i, h } = dm;
    let (k, dg) = (p.dir, p.dg);
    let (gh, rows) = (4 * h, t_len * b);
    let dgt = MatRef::row_major(dg, rows, gh).t();
    if !o.dx.is_empty() {
        gemm_with_scratch(
            settings,
            MatRef::row_major(dg, rows, gh),
            MatRef::row_major(p.w_ih, gh, i),
            MatMut::row_major(o.dx, rows, i),
            gemm,
        );
    }
    if !o.dw_ih.is_empty() {
        gemm_with_scratch(settings, dgt, MatRef::row_major(p.x, rows, i), MatMut::row_major(o.dw_ih, gh, i), gemm);
    }
    if !o.dw_hh.is_empty() {
        let h_prev = &mut h_prev[..rows * h];
        previous_states_into(h_prev, p.h0, dm, k == 1, |q, dst| {
            for (j, row) in dst.chunks_exact_mut(h).enumerate() {
                let src = (q * b + j) * 2 * h + k * h;
                row.copy_from_slice(&p.out[src..src + h]);
            }
        });
        gemm_with_scratch(settings, dgt, MatRef::row_major(h_prev, rows, h), MatMut::row_major(o.dw_hh, gh, h), gemm);
    }
    if !o.db.is_empty() {
        column_sums_into(dg, acc, o.db);
    }
}

/// Both directions of one bidirectional LSTM layer: `x` `[T, B, I]`, the forward
/// direction's `w_ih`, `w_hh`, `b_ih`, `b_hh`, `h0`, `c0` and the reverse direction's
/// (`_r`), as [`lstm_layer`](crate::lstm_layer) takes them. Returns `[T + 1, B, 2H]`: rows
/// `0..T` are the states of both directions side by side (the forward direction's in
/// features `0..H`, the reverse's in `H..2H`, as `lstm` concatenates them) and row `T` the
/// final cell states (step `T−1` of the forward direction, step 0 of the reverse one). The
/// two time loops run at the same time on the thread team, in forward and backward; each
/// is `lstm_layer`'s, so the values and gradients are those of two `lstm_layer` calls with
/// `final_cell` (the gradient of `x` is the sum of the directions' gradients).
/// Backward: `lstm_layer`'s for each direction (backpropagation through time, then
/// `dx = dG·W_ih`, `dW_ih = dGᵀ·x`, `dW_hh = dGᵀ·H_prev`, `db_ih = db_hh = Σ dG`), with
/// `dx` the forward direction's plus the reverse direction's.
///
/// # Examples
///
/// ```
/// use om_ops::{lstm_layer, lstm_pair_layer, Tensor};
/// let (t, b, i, h) = (3, 2, 4, 5);
/// let x = Tensor::randn_with_seed(&[t, b, i], 1)?;
/// let w = |rows, cols, seed| Tensor::rand_uniform(&[rows, cols], -0.4, 0.4, seed);
/// let (wi, wh, wi_r, wh_r) = (w(4 * h, i, 2)?, w(4 * h, h, 3)?, w(4 * h, i, 4)?, w(4 * h, h, 5)?);
/// let both = lstm_pair_layer(&x, &wi, &wh, None, None, None, None, &wi_r, &wh_r, None, None, None, None)?;
/// assert_eq!(both.shape(), &[t + 1, b, 2 * h]);
/// // The reverse direction's states are those of `lstm_layer` run in reverse.
/// let rev = lstm_layer(&x, &wi_r, &wh_r, None, None, None, None, true, true)?;
/// let half = om_ops::slice(&both, 2, h as isize, 2 * h as isize, 1)?;
/// assert_eq!(half.to_vec(), rev.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, w_ih, w_hh, w_ih_r, w_hh_r, gates: owned, c: owned, tanh_c: owned, out, h0, c0, h0_r, c0_r])]
pub mod lstm_pair_layer {
    use super::*;

    // The operator's public signature: `#[op]` takes each tensor input as its own
    // parameter (the generated function carries the same allowance).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        x: &Tensor,
        w_ih: &Tensor,
        w_hh: &Tensor,
        b_ih: Option<&Tensor>,
        b_hh: Option<&Tensor>,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
        w_ih_r: &Tensor,
        w_hh_r: &Tensor,
        b_ih_r: Option<&Tensor>,
        b_hh_r: Option<&Tensor>,
        h0_r: Option<&Tensor>,
        c0_r: Option<&Tensor>,
    ) -> Result<(Tensor, Owned)> {
        let mut pf = Prologue::unfilled(NAME, 4, x, LayerWeights { w_ih, w_hh, b_ih, b_hh }, &[("h0", h0), ("c0", c0)])?;
        let mut pr = Prologue::unfilled(
            NAME,
            4,
            x,
            LayerWeights { w_ih: w_ih_r, w_hh: w_hh_r, b_ih: b_ih_r, b_hh: b_hh_r },
            &[("h0_r", h0_r), ("c0_r", c0_r)],
        )?;
        if pr.dm.h != pf.dm.h {
            return Err(Error::shape(NAME, &[w_hh.shape(), w_hh_r.shape()], "both directions must have the same hidden size H"));
        }
        let (dm, settings) = (pf.dm, pf.settings);
        let Dims { t: t_len, b, h, .. } = dm;
        let (gh, bh) = (4 * h, b * h);
        let (c0f, c0r) = (Scratch::of(c0)?, Scratch::of(c0_r)?);
        let mut y2 = Scratch::new(2 * t_len * bh)?;
        let mut hp2 = Scratch::new(2 * b * gh)?;
        let one = Settings { threads: 1, ..settings };
        // Each thread's scratch for its direction's products (the input projection, then
        // each step's), taken here: none inside a chunk.
        let gemm_len = gemm_scratch_len(one, b, h, gh, gh).max(gemm_scratch_len(one, t_len * b, dm.i, gh, gh));
        let mut gemm_scratch = WorkerScratch::f32(settings.threads, 2, gemm_len)?;
        let per = gemm_scratch.per_worker();
        // Each direction's chunk writes its own input projection and `W_hhᵀ`, then runs
        // its time loop: one section, and the projections share the threads too.
        let proj = [Mutex::new(Some((pf.xp.get_mut(), pf.whh_t.get_mut()))), Mutex::new(Some((pr.xp.get_mut(), pr.whh_t.get_mut())))];
        // The rest of each direction's inputs, by field (`xp` and `whh_t` are lent above).
        let rest = [(&pf.b_ih, &pf.b_hh, &pf.h0, &c0f), (&pr.b_ih, &pr.b_hh, &pr.h0, &c0r)];
        let [gates, c, tanh_c] = with_values([x, w_ih, w_hh, w_ih_r, w_hh_r], |[xs, wif, whf, wir, whr]| {
            let (y2, hp2) = (y2.get_mut(), hp2.get_mut());
            let weights = [[xs, wif, whf], [xs, wir, whr]];
            Tensor::build_many_f32([&[2, t_len, b, gh], &[2, t_len, b, h], &[2, t_len, b, h]], |[g2, c2, tc2]| {
                let widths = [t_len * b * gh, t_len * bh, t_len * bh, t_len * bh, b * gh];
                let outs = row_tiles([g2, c2, tc2, &mut y2[..], &mut hp2[..]], widths, 2, 1);
                for_each_tile_scratch(settings.threads, outs, gemm_scratch.parts(), per, |dir, tiles, gemm| {
                    let [gates, c, tanh_c, y, hp] = tiles.map(|t| t.into_slice());
                    let (xp, whh_t) = take_part(&proj, dir);
                    project_into(one, dm, gh, weights[dir], xp, whh_t, gemm);
                    let (b_ih, b_hh, h0, c0) = rest[dir];
                    let d = DirForward {
                        xp,
                        b_ih: b_ih.as_ref().map(Scratch::get),
                        b_hh: b_hh.as_ref().map(Scratch::get),
                        h0: h0.get(),
                        c0: c0.as_ref().map(Scratch::get),
                        whh_t,
                        reverse: dir == 1,
                    };
                    forward_loop(one, dm, d, ForwardBufs { gates, c, tanh_c, y, hp, gemm });
                });
                Ok(())
            })
        })??;
        let y = c.try_with_f32(|c2| {
            Tensor::build_f32(&[t_len + 1, b, 2 * h], |out| {
                let y2 = y2.get();
                for (r, row) in out[..t_len * b * 2 * h].chunks_exact_mut(2 * h).enumerate() {
                    row[..h].copy_from_slice(&y2[r * h..(r + 1) * h]);
                    row[h..].copy_from_slice(&y2[t_len * bh + r * h..t_len * bh + (r + 1) * h]);
                }
                // Row T: the cell state of the last step processed by each direction.
                let (last_f, last_r) = ((t_len - 1) * bh, t_len * bh);
                for (j, row) in out[t_len * b * 2 * h..].chunks_exact_mut(2 * h).enumerate() {
                    row[..h].copy_from_slice(&c2[last_f + j * h..last_f + (j + 1) * h]);
                    row[h..].copy_from_slice(&c2[last_r + j * h..last_r + (j + 1) * h]);
                }
                Ok(())
            })
        })??;
        Ok((y, Owned { gates, c, tanh_c }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    /// One section over the two directions: each direction's chunk splits its state
    /// gradients out of `g`, runs its backward loop, then its parameter gradients (products
    /// on its own thread: the same bits as on the team); `dx` is the sum of the two.
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let dm = record_dims(&r.input_shapes);
        let Dims { t: t_len, b, i, h } = dm;
        let (gh, bh, rows) = (4 * h, b * h, t_len * b);
        let settings = Compute::settings();
        let one = Settings { threads: 1, ..settings };
        let (c0f, c0r) = (Scratch::of(r.c0.as_ref().map(|s| s.tensor()))?, Scratch::of(r.c0_r.as_ref().map(|s| s.tensor()))?);
        let needs = [
            [d.needs_x(), d.needs_w_ih(), d.needs_w_hh(), d.needs_b_ih(), d.needs_b_hh()],
            [d.needs_x(), d.needs_w_ih_r(), d.needs_w_hh_r(), d.needs_b_ih_r(), d.needs_b_hh_r()],
        ];
        let h0s = [r.h0.as_ref().map(|s| s.tensor()), r.h0_r.as_ref().map(|s| s.tensor())];
        let h0s = [Scratch::of(h0s[0].filter(|_| needs[0][2]))?, Scratch::of(h0s[1].filter(|_| needs[1][2]))?];
        // Each direction's state gradients `[T, B, H]`, pre-activation gradients, and the
        // gradients of its initial states.
        let mut gy2 = Scratch::new(2 * t_len * bh)?;
        let mut dg2 = Scratch::new(2 * t_len * b * gh)?;
        let mut dh2 = Scratch::zeroed(2 * bh)?;
        let mut dc2 = Scratch::new(2 * bh)?;
        let mut acc = F64Scratch::try_zeroed(2 * gh)?;
        // Each thread's scratch, taken here (none inside a chunk): its direction's previous
        // states `H_prev` `[T·B, H]`, then the scratch of the largest of its products.
        let gemm_len = [
            gemm_scratch_len(one, b, gh, h, h),
            gemm_scratch_len(one, rows, gh, i, i),
            gemm_scratch_len(one, gh, rows, i, i),
            gemm_scratch_len(one, gh, rows, h, h),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let mut scratch = WorkerScratch::f32(settings.threads, 2, rows * h + gemm_len)?;
        let per = scratch.per_worker();
        let (x_shape, wi_shape, wh_shape, b_shape) = ([t_len, b, i], [gh, i], [gh, h], [gh]);
        // An output that is not needed is empty (and not computed).
        let sizes = |k: usize| -> [&[usize]; 4] {
            fn pick(yes: bool, s: &[usize]) -> &[usize] {
                if yes {
                    s
                } else {
                    &[0]
                }
            }
            [
                pick(needs[k][0], &x_shape),
                pick(needs[k][1], &wi_shape),
                pick(needs[k][2], &wh_shape),
                pick(needs[k][3] || needs[k][4], &b_shape),
            ]
        };
        let ([f0, f1, f2, f3], [r0, r1, r2, r3]) = (sizes(0), sizes(1));
        let vals = [r.gates(), r.c(), r.tanh_c(), r.w_hh(), r.w_hh_r(), g, r.x(), r.w_ih(), r.w_ih_r(), r.out()];
        let grads = with_values(vals, |[gates, c_all, tc_all, whf, whr, gs, xs, wif, wir, out]| {
            Tensor::build_many_f32([f0, f1, f2, f3, r0, r1, r2, r3], |[dxf, dwif, dwhf, dbf, dxr, dwir, dwhr, dbr]| {
                let parts = [
                    Mutex::new(Some(DirGrads { dx: dxf, dw_ih: dwif, dw_hh: dwhf, db: dbf })),
                    Mutex::new(Some(DirGrads { dx: dxr, dw_ih: dwir, dw_hh: dwhr, db: dbr })),
                ];
                let (n_g, n_h) = (t_len * b * gh, t_len * bh);
                let (w_hh, w_ih, c0) = ([whf, whr], [wif, wir], [c0f.as_ref().map(Scratch::get), c0r.as_ref().map(Scratch::get)]);
                let h0 = [h0s[0].as_ref().map(Scratch::get), h0s[1].as_ref().map(Scratch::get)];
                // The accumulators (`4H` ≥ 4 values each) make two chunks even when every
                // other band is empty (B = 0: the weight gradients are then zeros).
                let outs = (
                    row_tiles([gy2.get_mut(), dg2.get_mut(), dh2.get_mut(), dc2.get_mut()], [n_h, n_g, bh, bh], 2, 1),
                    Tiled::row_bands(acc.values(), 2, gh, 1),
                );
                for_each_tile_scratch(settings.threads, outs, scratch.parts(), per, |k, (tiles, acc), part| {
                    let [gy, dg, dh, dc] = tiles.map(|t| t.into_slice());
                    // The direction's features of every row of `g` (rows 0..T: states; row
                    // T: the final cell state).
                    for (r, dst) in gy.chunks_exact_mut(h).enumerate() {
                        dst.copy_from_slice(&gs[r * 2 * h + k * h..r * 2 * h + (k + 1) * h]);
                    }
                    for (j, dst) in dc.chunks_exact_mut(h).enumerate() {
                        let row = (t_len * b + j) * 2 * h;
                        dst.copy_from_slice(&gs[row + k * h..row + (k + 1) * h]);
                    }
                    let (h_prev, gemm) = part.split_at_mut(rows * h);
                    let dir = DirBackward {
                        gates: &gates[k * n_g..(k + 1) * n_g],
                        c: &c_all[k * n_h..(k + 1) * n_h],
                        tanh_c: &tc_all[k * n_h..(k + 1) * n_h],
                        gy,
                        c0: c0[k],
                        whh: w_hh[k],
                        reverse: k == 1,
                    };
                    backward_loop(one, dm, dir, dg, dh, dc, gemm);
                    let p = ParamInputs { dir: k, dg, x: xs, w_ih: w_ih[k], out, h0: h0[k] };
                    direction_grads(one, dm, p, take_part(&parts, k), acc.into_slice(), h_prev, gemm);
                });
                Ok(())
            })
        })??;
        let [dxf, dwif, dwhf, dbf, dxr, dwir, dwhr, dbr] = grads;
        let keep = |t: Tensor, yes: bool| yes.then_some(t);
        if d.needs_x() {
            // The engine would add the reverse direction's dx into the forward one's.
            d.x(crate::add(&dxf, &dxr)?);
        }
        let bias = |t: Tensor, k: usize| [keep(t.clone(), needs[k][3]), keep(t, needs[k][4])];
        let ([dbif, dbhf], [dbir, dbhr]) = (bias(dbf, 0), bias(dbr, 1));
        emit_parameter_grads!(d, [None, keep(dwif, needs[0][1]), keep(dwhf, needs[0][2]), dbif, dbhf]);
        for (t, slot) in [(keep(dwir, needs[1][1]), 0), (keep(dwhr, needs[1][2]), 1), (dbir, 2), (dbhr, 3)] {
            if let Some(t) = t {
                match slot {
                    0 => d.w_ih_r(t),
                    1 => d.w_hh_r(t),
                    2 => d.b_ih_r(t),
                    _ => d.b_hh_r(t),
                }
            }
        }
        let (dh2, dc2) = (dh2.get(), dc2.get());
        if d.needs_h0() {
            d.h0(Tensor::from_slice(&dh2[..bh], &[b, h])?);
        }
        if d.needs_c0() {
            d.c0(Tensor::from_slice(&dc2[..bh], &[b, h])?);
        }
        if d.needs_h0_r() {
            d.h0_r(Tensor::from_slice(&dh2[bh..], &[b, h])?);
        }
        if d.needs_c0_r() {
            d.c0_r(Tensor::from_slice(&dc2[bh..], &[b, h])?);
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        let inp = Case::input;
        let o = |t: &[Tensor], k: usize| Some(t[k].clone());
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
                    inp(&[8, 3], -0.6, 0.6, 8),
                    inp(&[8, 2], -0.6, 0.6, 9),
                    inp(&[8], -0.5, 0.5, 10),
                    inp(&[8], -0.5, 0.5, 11),
                    inp(&[2, 2], -1.0, 1.0, 12),
                    inp(&[2, 2], -1.0, 1.0, 13),
                ],
                move |t| {
                    let (bf, br) = ((o(t, 3), o(t, 4), o(t, 5), o(t, 6)), (o(t, 9), o(t, 10), o(t, 11), o(t, 12)));
                    super::lstm_pair_layer(
                        &t[0],
                        &t[1],
                        &t[2],
                        bf.0.as_ref(),
                        bf.1.as_ref(),
                        bf.2.as_ref(),
                        bf.3.as_ref(),
                        &t[7],
                        &t[8],
                        br.0.as_ref(),
                        br.1.as_ref(),
                        br.2.as_ref(),
                        br.3.as_ref(),
                    )
                },
            ),
            // Batch-first storage read as [T, B, I]; no biases, no states.
            Case::new(
                "transposed_plain",
                vec![
                    inp(&[2, 4, 3], -1.0, 1.0, 14),
                    inp(&[12, 3], -0.6, 0.6, 15),
                    inp(&[12, 3], -0.6, 0.6, 16),
                    inp(&[12, 3], -0.6, 0.6, 17),
                    inp(&[12, 3], -0.6, 0.6, 18),
                ],
                |t| {
                    super::lstm_pair_layer(
                        &crate::transpose(&t[0], 0, 1)?,
                        &t[1],
                        &t[2],
                        None,
                        None,
                        None,
                        None,
                        &t[3],
                        &t[4],
                        None,
                        None,
                        None,
                        None,
                    )
                },
            ),
        ]
    }
}
