//! Recurrent operators against `torch.nn.LSTM`/`torch.nn.GRU` (`tools/oracle_rnn_ops.py`),
//! and long sequences.

use super::{RnnConfig, RnnOutput, RnnWeights};
use crate::oracle::{assert_close, both_modes, Oracle};
use om_core::Tensor;

/// The oracle cases: (name, layers, bidirectional, batch_first, bias, initial states).
const CASES: [(&str, usize, bool, bool, bool, bool); 5] = [
    ("one", 1, false, false, true, false),
    ("two_states", 2, false, false, true, true),
    ("bi_nobias", 1, true, false, false, false),
    ("bi2_bf_states", 2, true, true, true, true),
    ("long", 1, false, false, true, true),
];

/// The PyTorch parameter names of layer and direction `k`.
fn param_names(k: usize, dirs: usize, bias: bool) -> Vec<String> {
    let suffix = format!("l{}{}", k / dirs, if k % dirs == 1 { "_reverse" } else { "" });
    let mut v = vec![format!("weight_ih_{suffix}"), format!("weight_hh_{suffix}")];
    if bias {
        v.extend([format!("bias_ih_{suffix}"), format!("bias_hh_{suffix}")]);
    }
    v
}

fn check_stack(kind: &str, run: impl Fn(&Tensor, Option<&Tensor>, Option<&Tensor>, &[RnnWeights], RnnConfig) -> RnnOutput) {
    let o = Oracle::load_file("rnn", "tools/oracle_rnn_ops.py");
    both_modes(|| {
        for (case, layers, bidirectional, batch_first, bias, states) in CASES {
            let name = format!("{kind}_{case}");
            let config = RnnConfig { layers, bidirectional, batch_first };
            let dirs = config.dirs();
            let mut leaves: Vec<(String, Tensor)> = vec![("x".into(), o.get(&format!("{name}_x")))];
            if states {
                leaves.push(("h0".into(), o.get(&format!("{name}_h0"))));
                if o.has(&format!("{name}_c0")) {
                    leaves.push(("c0".into(), o.get(&format!("{name}_c0"))));
                }
            }
            let mut flat = Vec::new();
            for k in 0..layers * dirs {
                for p in param_names(k, dirs, bias) {
                    let t = o.get(&format!("{name}_{p}"));
                    flat.push(t.clone());
                    leaves.push((p, t));
                }
            }
            let weights = RnnWeights::from_flat(&flat, bias);
            let find = |n: &str| leaves.iter().find(|(m, _)| m == n).map(|(_, t)| t);
            let out = run(&leaves[0].1, find("h0"), find("c0"), &weights, config);
            assert_close(&format!("{name}_y"), &out.y, &o.get(&format!("{name}_y")));
            assert_close(&format!("{name}_hn"), &out.h_n, &o.get(&format!("{name}_hn")));
            let (ry, rh) = (o.get(&format!("{name}_ry")).detach(), o.get(&format!("{name}_rh")).detach());
            let weighted = |t: &Tensor, r: &Tensor| crate::sum(&crate::mul(t, r).unwrap(), None, false).unwrap();
            let mut loss = crate::add(&weighted(&out.y, &ry), &weighted(&out.h_n, &rh)).unwrap();
            // The `lstm_cn_*` cases also weigh the final cell states.
            if o.has(&format!("{name}_cn")) {
                let c_n = out.c_n.as_ref().expect("an LSTM returns c_n");
                assert_close(&format!("{name}_cn"), c_n, &o.get(&format!("{name}_cn")));
                loss = crate::add(&loss, &weighted(c_n, &o.get(&format!("{name}_rc")).detach())).unwrap();
            }
            loss.backward().unwrap();
            for (n, t) in &leaves {
                let key = format!("{name}_g_{n}");
                let g = t.grad().unwrap_or_else(|| panic!("no gradient for {key}"));
                assert_close(&key, &g, &o.get(&key));
            }
        }
    });
}

#[test]
fn lstm_matches_pytorch() {
    check_stack("lstm", |x, h0, c0, w, cfg| crate::lstm(x, h0, c0, w, cfg).unwrap());
}

#[test]
fn lstm_final_cell_states_and_their_gradients_match_pytorch() {
    check_stack("lstm_cn", |x, h0, c0, w, cfg| crate::lstm(x, h0, c0, w, cfg).unwrap());
}

/// A sequence run in two chunks, the second starting from the first's `h_n` and `c_n`,
/// gives the states of one run over the whole sequence, bit for bit (every step computes
/// the same products and gate updates), and — with the states passed on undetached — the
/// same gradients up to the rounding of sums split at the chunk boundary.
#[test]
fn a_sequence_in_chunks_equals_one_run() {
    let (t, b, i, h) = (9, 2, 3, 4);
    let config = RnnConfig { layers: 2, bidirectional: false, batch_first: false };
    both_modes(|| {
        let x = leaf(&[t, b, i], 50, 1.0);
        let ws: Vec<RnnWeights> = (0..2)
            .map(|k| {
                let features = if k == 0 { i } else { h };
                RnnWeights::new(
                    leaf(&[4 * h, features], 51 + k, 0.4),
                    leaf(&[4 * h, h], 53 + k, 0.4),
                    leaf(&[4 * h], 55 + k, 0.2),
                    leaf(&[4 * h], 57 + k, 0.2),
                )
            })
            .collect();
        let params: Vec<&Tensor> = ws.iter().flat_map(|w| [&w.w_ih, &w.w_hh, w.b_ih.as_ref().unwrap(), w.b_hh.as_ref().unwrap()]).collect();
        let grads = || -> Vec<Vec<f32>> { params.iter().map(|p| p.grad().unwrap().to_vec()).collect() };
        let loss_of = |y: &Tensor, h_n: &Tensor, c_n: &Tensor| {
            let sq = |v: &Tensor| crate::sum(&crate::mul(v, v).unwrap(), None, false).unwrap();
            crate::add(&crate::add(&sq(y), &sq(h_n)).unwrap(), &sq(c_n)).unwrap()
        };

        let full = crate::lstm(&x, None, None, &ws, config).unwrap();
        loss_of(&full.y, &full.h_n, full.c_n.as_ref().unwrap()).backward().unwrap();
        let full_grads = grads();
        params.iter().for_each(|p| p.clear_grad());

        let first = crate::lstm(&crate::slice(&x, 0, 0, 4, 1).unwrap(), None, None, &ws, config).unwrap();
        let c1 = first.c_n.as_ref().unwrap();
        let second = crate::lstm(&crate::slice(&x, 0, 4, t as isize, 1).unwrap(), Some(&first.h_n), Some(c1), &ws, config).unwrap();
        let y = crate::concat(&[first.y.clone(), second.y.clone()], 0).unwrap();
        let bits = |v: &Tensor| v.to_vec().iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y), bits(&full.y), "states");
        assert_eq!(bits(&second.h_n), bits(&full.h_n), "h_n");
        assert_eq!(bits(second.c_n.as_ref().unwrap()), bits(full.c_n.as_ref().unwrap()), "c_n");

        loss_of(&y, &second.h_n, second.c_n.as_ref().unwrap()).backward().unwrap();
        for (k, (a, e)) in grads().iter().zip(&full_grads).enumerate() {
            let scale = e.iter().fold(0f32, |m, v| m.max(v.abs())).max(1.0);
            let worst = a.iter().zip(e).fold(0f32, |m, (a, e)| m.max((a - e).abs()));
            assert!(worst <= 1e-5 * scale, "parameter {k}: chunked gradient off by {worst} (scale {scale})");
        }
        params.iter().for_each(|p| p.clear_grad());
    });
}

#[test]
fn gru_matches_pytorch() {
    check_stack("gru", |x, h0, c0, w, cfg| {
        assert!(c0.is_none());
        crate::gru(x, h0, w, cfg).unwrap()
    });
}

fn leaf(shape: &[usize], seed: u64, scale: f32) -> Tensor {
    let t = Tensor::randn_with_seed(shape, seed).unwrap();
    t.update_f32("scale", |v| v.iter_mut().for_each(|x| *x *= scale)).unwrap();
    t.requires_grad().unwrap()
}

#[test]
fn long_sequences_run_forward_and_backward() {
    // T = 512: the backward loop is iterative, so neither the stack nor memory beyond
    // O(T) is at stake; gradients must be finite.
    let (t, b, i, h) = (512, 2, 3, 4);
    let x = leaf(&[t, b, i], 1, 1.0);
    let (wi, wh, bi, bh) = (leaf(&[4 * h, i], 2, 0.3), leaf(&[4 * h, h], 3, 0.3), leaf(&[4 * h], 4, 0.1), leaf(&[4 * h], 5, 0.1));
    let (h0, c0) = (leaf(&[b, h], 6, 0.5), leaf(&[b, h], 7, 0.5));
    for reverse in [false, true] {
        let y = crate::lstm_layer(&x, &wi, &wh, Some(&bi), Some(&bh), Some(&h0), Some(&c0), reverse, false).unwrap();
        assert_eq!(y.shape(), [t, b, h]);
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        for p in [&x, &wi, &wh, &bi, &bh, &h0, &c0] {
            assert!(p.grad().unwrap().to_vec().iter().all(|v| v.is_finite()));
            p.clear_grad();
        }
    }
    // A two-layer bidirectional stack of both kinds over the same length.
    let config = RnnConfig { layers: 2, bidirectional: true, batch_first: false };
    for gates in [4, 3] {
        let mut ws = Vec::new();
        for k in 0..4 {
            let features = if k < 2 { i } else { 2 * h };
            ws.push(RnnWeights::new(
                leaf(&[gates * h, features], 10 + k, 0.3),
                leaf(&[gates * h, h], 20 + k, 0.3),
                leaf(&[gates * h], 30 + k, 0.1),
                leaf(&[gates * h], 40 + k, 0.1),
            ));
        }
        let out = if gates == 4 { crate::lstm(&x, None, None, &ws, config) } else { crate::gru(&x, None, &ws, config) }.unwrap();
        assert_eq!(out.y.shape(), [t, b, 2 * h]);
        assert_eq!(out.h_n.shape(), [4, b, h]);
        crate::sum(&out.y, None, false).unwrap().backward().unwrap();
        assert!(x.grad().unwrap().to_vec().iter().all(|v| v.is_finite()));
        assert!(ws[0].w_hh.grad().is_some());
        x.clear_grad();
    }
}

#[test]
fn final_state_of_a_reverse_layer_is_step_zero() {
    let x = leaf(&[3, 2, 2], 1, 1.0);
    let w = RnnWeights::without_bias(leaf(&[6, 2], 2, 0.5), leaf(&[6, 2], 3, 0.5));
    let w2 = RnnWeights::without_bias(leaf(&[6, 2], 4, 0.5), leaf(&[6, 2], 5, 0.5));
    let out = crate::gru(&x, None, &[w.clone(), w2.clone()], RnnConfig { layers: 1, bidirectional: true, batch_first: false }).unwrap();
    let rev = crate::gru_layer(&x, &w2.w_ih, &w2.w_hh, None, None, None, true).unwrap();
    assert_eq!(crate::select(&out.h_n, 0, 1).unwrap().to_vec(), crate::select(&rev, 0, 0).unwrap().to_vec());
    let fwd = crate::gru_layer(&x, &w.w_ih, &w.w_hh, None, None, None, false).unwrap();
    assert_eq!(crate::select(&out.h_n, 0, 0).unwrap().to_vec(), crate::select(&fwd, 0, 2).unwrap().to_vec());
}

#[test]
fn lstm_pair_layer_has_the_bits_of_two_lstm_layers_at_any_thread_count() {
    use om_core::compute::{Compute, Mode};
    let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    // Odd sizes, one large enough for the team to split its products when they run on
    // it (the pair runs each direction's products on one thread), and a run in which only
    // some inputs need gradients (the others' products are skipped).
    let all = [true; 13];
    let some = [false, true, false, true, false, false, true, false, true, false, true, true, false];
    for ((t, b, i, h), wants) in [((5, 3, 4, 6), all), ((37, 9, 130, 40), all), ((1, 1, 1, 1), all), ((6, 5, 7, 3), some)] {
        let ins: Vec<Tensor> = (0..13)
            .map(|k| {
                let shape: &[usize] = match k {
                    0 => &[t, b, i],
                    1 | 7 => &[4 * h, i],
                    2 | 8 => &[4 * h, h],
                    3 | 4 | 9 | 10 => &[4 * h],
                    _ => &[b, h],
                };
                leaf(shape, 50 + k as u64, 0.4).detach()
            })
            .collect();
        // Values and the gradients of every input of `Σ out·c` that needs one.
        let run = |pair: bool| {
            let x: Vec<Tensor> =
                ins.iter().zip(wants).map(|(v, w)| if w { v.detach().requires_grad().unwrap() } else { v.detach() }).collect();
            let s = |k: usize| Some(&x[k]);
            let out = if pair {
                crate::lstm_pair_layer(&x[0], &x[1], &x[2], s(3), s(4), s(5), s(6), &x[7], &x[8], s(9), s(10), s(11), s(12)).unwrap()
            } else {
                let f = crate::lstm_layer(&x[0], &x[1], &x[2], s(3), s(4), s(5), s(6), false, true).unwrap();
                let r = crate::lstm_layer(&x[0], &x[7], &x[8], s(9), s(10), s(11), s(12), true, true).unwrap();
                crate::concat(&[f, r], 2).unwrap()
            };
            let c = Tensor::rand_uniform(out.shape(), -1.0, 1.0, 7).unwrap();
            crate::sum(&crate::mul(&out, &c).unwrap(), None, false).unwrap().backward().unwrap();
            let mut all = vec![bits(&out)];
            all.extend(x.iter().map(|v| v.grad().map(|g| bits(&g))).map(Option::unwrap_or_default));
            all
        };
        for mode in [Mode::Fast, Mode::Exact] {
            Compute::set_mode(mode);
            Compute::set_threads(1).unwrap();
            let want = run(false);
            for threads in [1, 2, 3] {
                Compute::set_threads(threads).unwrap();
                assert!(run(true) == want, "{mode:?} at {threads} threads, T, B, I, H = {t}, {b}, {i}, {h}");
            }
            // And the composition on the team (its products split among threads).
            Compute::set_threads(2).unwrap();
            assert!(run(false) == want, "{mode:?}: the composition at 2 threads");
        }
    }
    Compute::set_mode(Mode::Fast);
    Compute::set_threads(1).unwrap();
}
