//! `lstm_pair_layer`: both directions of one bidirectional LSTM layer as one operator, so
//! that the two independent recurrences run at the same time, one per thread of the team
//! (each step's `[B, H]×[H, 4H]` product is too small to share among threads, so a
//! direction's time loop is the unit of parallel work). Each direction computes exactly what
//! [`lstm_layer`](super::lstm_layer) computes for it, in the same order, so values and
//! gradients have the bits of the composition it replaces in [`lstm()`](super::lstm): two
//! `lstm_layer`s and the concatenation of their states.

use super::lstm_cell::{backward_loop, forward_loop, DirBackward, DirForward, ForwardBufs};
use super::*;
use om_core::kernels::chunks::row_tiles;
use om_core::kernels::gemm::gemm_scratch_len;
use om_core::kernels::parallel::for_each_tile_scratch;
use om_core::kernels::scratch::WorkerScratch;

/// Direction `dir`'s states `[T, B, H]` from the `[T(+1), B, 2H]` output values `out`.
fn direction_states(out: &[f32], dm: Dims, dir: usize) -> Result<Scratch> {
    let (rows, h) = (dm.t * dm.b, dm.h);
    let mut y = Scratch::new(rows * h)?;
    for (r, dst) in y.get_mut().chunks_exact_mut(h).enumerate() {
        dst.copy_from_slice(&out[r * 2 * h + dir * h..r * 2 * h + (dir + 1) * h]);
    }
    Ok(y)
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
        let pf = Prologue::new(NAME, 4, x, LayerWeights { w_ih, w_hh, b_ih, b_hh }, &[("h0", h0), ("c0", c0)])?;
        let pr = Prologue::new(
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
        // Each thread's scratch for the step products, taken here: none inside a chunk.
        let mut gemm_scratch = WorkerScratch::f32(settings.threads, 2, gemm_scratch_len(one, b, h, gh, gh))?;
        let per = gemm_scratch.per_worker();
        let [gates, c, tanh_c] = {
            let dirs = [DirForward::new(&pf, c0f.as_ref(), false), DirForward::new(&pr, c0r.as_ref(), true)];
            let (y2, hp2) = (y2.get_mut(), hp2.get_mut());
            Tensor::build_many_f32([&[2, t_len, b, gh], &[2, t_len, b, h], &[2, t_len, b, h]], |[g2, c2, tc2]| {
                let widths = [t_len * b * gh, t_len * bh, t_len * bh, t_len * bh, b * gh];
                let outs = row_tiles([g2, c2, tc2, &mut y2[..], &mut hp2[..]], widths, 2, 1);
                for_each_tile_scratch(settings.threads, outs, gemm_scratch.parts(), per, |dir, tiles, gemm| {
                    let [gates, c, tanh_c, y, hp] = tiles.map(|t| t.into_slice());
                    forward_loop(one, dm, dirs[dir], ForwardBufs { gates, c, tanh_c, y, hp, gemm });
                });
                Ok(())
            })
        }?;
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
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let dm = record_dims(&r.input_shapes);
        let Dims { t: t_len, b, h, .. } = dm;
        let (gh, bh) = (4 * h, b * h);
        let settings = Compute::settings();
        let one = Settings { threads: 1, ..settings };
        let (c0f, c0r) = (Scratch::of(r.c0.as_ref().map(|s| s.tensor()))?, Scratch::of(r.c0_r.as_ref().map(|s| s.tensor()))?);
        // Each direction's state gradients `[T, B, H]`, and its final cell-state gradient.
        let mut gy2 = Scratch::new(2 * t_len * bh)?;
        let mut dc2 = Scratch::new(2 * bh)?;
        g.try_with_f32(|gs| {
            let (gy2, dc2) = (gy2.get_mut(), dc2.get_mut());
            for dir in 0..2 {
                for (r, dst) in gy2[dir * t_len * bh..(dir + 1) * t_len * bh].chunks_exact_mut(h).enumerate() {
                    dst.copy_from_slice(&gs[r * 2 * h + dir * h..r * 2 * h + (dir + 1) * h]);
                }
                for (j, dst) in dc2[dir * bh..(dir + 1) * bh].chunks_exact_mut(h).enumerate() {
                    let row = (t_len * b + j) * 2 * h;
                    dst.copy_from_slice(&gs[row + dir * h..row + (dir + 1) * h]);
                }
            }
        })?;
        let mut dg2 = Scratch::new(2 * t_len * b * gh)?;
        let mut dh2 = Scratch::zeroed(2 * bh)?;
        // Each thread's scratch for the step products, taken here: none inside a chunk.
        let mut gemm_scratch = WorkerScratch::f32(settings.threads, 2, gemm_scratch_len(one, b, gh, h, h))?;
        let per = gemm_scratch.per_worker();
        r.gates().try_with_f32(|gates| {
            r.c().try_with_f32(|c_all| {
                r.tanh_c().try_with_f32(|tc_all| {
                    r.w_hh().try_with_f32(|whf| {
                        r.w_hh_r().try_with_f32(|whr| {
                            let (n_g, n_h) = (t_len * b * gh, t_len * bh);
                            let gy2 = gy2.get();
                            let dirs =
                                [(0, c0f.as_ref().map(Scratch::get), whf), (1, c0r.as_ref().map(Scratch::get), whr)].map(|(k, c0, whh)| {
                                    DirBackward {
                                        gates: &gates[k * n_g..(k + 1) * n_g],
                                        c: &c_all[k * n_h..(k + 1) * n_h],
                                        tanh_c: &tc_all[k * n_h..(k + 1) * n_h],
                                        gy: &gy2[k * n_h..(k + 1) * n_h],
                                        c0,
                                        whh,
                                        reverse: k == 1,
                                    }
                                });
                            let outs = row_tiles([dg2.get_mut(), dh2.get_mut(), dc2.get_mut()], [n_g, bh, bh], 2, 1);
                            for_each_tile_scratch(settings.threads, outs, gemm_scratch.parts(), per, |k, tiles, gemm| {
                                let [dg, dh, dc] = tiles.map(|t| t.into_slice());
                                backward_loop(one, dm, dirs[k], dg, dh, dc, gemm)
                            });
                        })
                    })
                })
            })
        })?????;
        let needs = [
            [d.needs_x(), d.needs_w_ih(), d.needs_w_hh(), d.needs_b_ih(), d.needs_b_hh()],
            [d.needs_x(), d.needs_w_ih_r(), d.needs_w_hh_r(), d.needs_b_ih_r(), d.needs_b_hh_r()],
        ];
        let (dg_all, w_ih) = (dg2.get(), [r.w_ih(), r.w_ih_r()]);
        let h0s = [r.h0.as_ref().map(|s| s.tensor()), r.h0_r.as_ref().map(|s| s.tensor())];
        let mut dx = None;
        for k in 0..2 {
            let h_prev = if needs[k][2] {
                let h0 = Scratch::of(h0s[k])?;
                let y = r.out().try_with_f32(|out| direction_states(out, dm, k))??;
                previous_states(y.get(), h0.as_ref().map(Scratch::get), dm, k == 1)?
            } else {
                Scratch::new(0)?
            };
            let dg = &dg_all[k * t_len * b * gh..(k + 1) * t_len * b * gh];
            let [dxk, dwih, dwhh, dbih, dbhh] = parameter_grads(
                settings,
                dm,
                gh,
                GradProducts { dx_gates: dg, dh_gates: None, x: r.x(), w_ih: w_ih[k], h_prev: h_prev.get() },
                needs[k],
            )?;
            // The engine would add the reverse direction's dx into the forward one's.
            dx = match (dx, dxk) {
                (Some(a), Some(bx)) => Some(crate::add(&a, &bx)?),
                (a, bx) => a.or(bx),
            };
            if k == 0 {
                emit_parameter_grads!(d, [None, dwih, dwhh, dbih, dbhh]);
            } else {
                let emits = [(dwih, 0), (dwhh, 1), (dbih, 2), (dbhh, 3)];
                for (t, slot) in emits {
                    if let Some(t) = t {
                        match slot {
                            0 => d.w_ih_r(t),
                            1 => d.w_hh_r(t),
                            2 => d.b_ih_r(t),
                            _ => d.b_hh_r(t),
                        }
                    }
                }
            }
        }
        if let Some(dx) = dx {
            d.x(dx);
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
