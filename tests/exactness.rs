//! Exact mode is bit-identical on every kernel path and thread count; fast mode is
//! identical across thread counts. A small model mixing every operator built so far is run
//! forward and backward under each setting and the bits of its output, of every gradient
//! and of the updated batch-norm running stats are hashed.

use om_core::compute::{Compute, KernelPath, Mode, Settings};
use om_core::{DType, Result, Tensor};
use om_ops as ops;

fn fnv(hash: &mut u64, values: &[f32]) {
    for v in values {
        for byte in v.to_bits().to_le_bytes() {
            *hash ^= byte as u64;
            *hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
}

fn leaf(shape: &[usize], seed: u64, scale: f32) -> Tensor {
    let t = Tensor::randn_with_seed(shape, seed).unwrap();
    t.update_f32("scale", |v| v.iter_mut().for_each(|x| *x *= scale)).unwrap();
    t.requires_grad().unwrap()
}

/// Forward and backward of the mixed model; returns the hash of the loss and all gradients.
fn step() -> Result<u64> {
    let x = leaf(&[64, 96], 1, 1.0);
    let w1 = leaf(&[96, 128], 2, 0.1);
    let b1 = leaf(&[128], 3, 0.1);
    let w2 = leaf(&[128, 80], 4, 0.1);
    let d = leaf(&[80], 5, 1.0);
    let h = ops::gelu(&ops::add(&ops::matmul(&x, &w1)?, &b1)?, ops::GeluForm::Erf)?;
    let h = ops::mul(&ops::tanh(&h)?, &ops::sigmoid(&ops::gelu(&h, ops::GeluForm::Tanh)?)?)?;
    let (ln_g, ln_b) = (leaf(&[128], 6, 1.0), leaf(&[128], 7, 0.1));
    let h = ops::layer_norm(&h, Some(&ln_g), Some(&ln_b), 1e-5)?;
    let y = ops::relu(&ops::sub(&ops::matmul(&h, &w2)?, &ops::neg(&d)?)?)?; // [64, 80]
    let y = ops::div(&y, &ops::add(&ops::expand(&ops::unsqueeze(&d, 0)?, [64, -1])?, &Tensor::full(&[1], 4.0)?)?)?;
    let y = ops::reshape(&ops::permute(&ops::reshape(&y, [8, 8, 80])?, [2, 0, 1])?, [80, 64])?;
    let y = ops::flip(&ops::slice(&y, 0, 1, 80, 3)?, [1])?;
    let y = ops::contiguous(&ops::transpose(&y, 0, 1)?)?;
    let sel = ops::select(&y, 0, -1)?;
    let y = ops::squeeze(&ops::mean(&y, Some(1), true)?, Some(1))?;
    let y = ops::cast(&y, DType::F32)?;
    // A small convolutional branch: grouped conv, max pooling, dilated depthwise conv with
    // asymmetric padding, average pooling, global average pooling.
    let img = leaf(&[2, 4, 12, 12], 6, 1.0);
    let cw1 = leaf(&[8, 2, 3, 3], 7, 0.3);
    let cb1 = leaf(&[8], 8, 0.1);
    let cw2 = leaf(&[8, 1, 3, 3], 9, 0.3);
    let f = ops::relu(&ops::conv2d(&img, &cw1, Some(&cb1), ops::Conv2dOptions::default().padding(1).groups(2))?)?;
    let f = ops::max_pool2d(&f, ops::Pool2d::new(3).stride(2).padding(1))?;
    let f = ops::conv2d(&f, &cw2, None, ops::Conv2dOptions::default().padding([1, 0, 1, 2]).dilation([2, 1]).groups(8))?;
    let f = ops::avg_pool2d(&f, ops::Pool2d::new(2).stride([2, 1]).padding([1, 0]).count_include_pad(false))?;
    let f = ops::global_avg_pool2d(&f)?;
    // A small decoder branch: grouped transposed conv with stride 2 and output padding,
    // then nearest, bilinear and align-corners resizes with non-integer ratios.
    let tw1 = leaf(&[4, 3, 3, 3], 11, 0.3);
    let tb1 = leaf(&[6], 12, 0.1);
    let tw2 = leaf(&[6, 8, 2, 2], 13, 0.3);
    let u = ops::relu(&ops::conv_transpose2d(
        &img,
        &tw1,
        Some(&tb1),
        ops::ConvTranspose2dOptions::default().stride(2).padding(1).output_padding(1).groups(2),
    )?)?; // [2, 6, 24, 24]
    let u = ops::resize2d(&u, ops::Interpolate::size([17, 13]).mode(ops::ResizeMode::Bilinear))?;
    let u = ops::conv_transpose2d(
        &u,
        &tw2,
        None,
        ops::ConvTranspose2dOptions::default().stride([1, 2]).padding([0, 1]).output_padding([0, 1]).dilation([2, 1]),
    )?;
    let u = ops::resize2d(&u, [11, 29])?;
    let u = ops::resize2d(&u, ops::Interpolate::size([7, 9]).mode(ops::ResizeMode::Bilinear).align_corners(true))?;
    let f = ops::add(&f, &ops::global_avg_pool2d(&u)?)?;
    // Embedding, batch norm (training, with running stats) and an NLL loss on the side.
    let table = leaf(&[10, 8], 8, 1.0);
    let ids = Tensor::from_vec_i32((0..64).map(|i| i * 7 % 10).collect(), &[4, 16])?;
    let e = ops::reshape(&ops::embedding(&table, &ids, Some(3))?, [4, 16, 2, 4])?;
    let (bn_g, bn_b) = (leaf(&[16], 9, 1.0), leaf(&[16], 10, 0.1));
    let (rm, rv) = (Tensor::zeros(&[16])?, Tensor::ones(&[16])?);
    let e = ops::batch_norm2d(&e, Some(&bn_g), Some(&bn_b), Some(&rm), Some(&rv), ops::BatchNormOptions::train())?;
    let targets = Tensor::from_vec_i32((0..16).map(|i| if i % 5 == 4 { -100 } else { i * 3 % 32 }).collect(), &[16])?;
    let nll = ops::nll_loss(&ops::reshape(&e, [16, 32])?, &targets, None, Default::default())?;
    let loss = ops::add(&ops::add(&ops::sum(&y, None, false)?, &ops::mean(&sel, None, false)?)?, &nll)?;
    let loss = ops::add(&loss, &ops::sum(&f, None, false)?)?;
    // A recurrent branch: a two-layer bidirectional batch-first LSTM with initial states
    // (its input projections and weight-gradient products are large enough for the GEMM to
    // use several threads) feeding a reverse GRU layer.
    let seq = leaf(&[4, 16, 64], 11, 1.0);
    let (hs, cs) = (leaf(&[4, 4, 32], 12, 0.5), leaf(&[4, 4, 32], 13, 0.5));
    let rnn_w: Vec<ops::RnnWeights> = (0..4u64)
        .map(|k| {
            ops::RnnWeights::new(
                leaf(&[128, 64], 20 + k, 0.2),
                leaf(&[128, 32], 30 + k, 0.2),
                leaf(&[128], 40 + k, 0.1),
                leaf(&[128], 50 + k, 0.1),
            )
        })
        .collect();
    let cfg = ops::RnnConfig { layers: 2, bidirectional: true, batch_first: true };
    let r = ops::lstm(&seq, Some(&hs), Some(&cs), &rnn_w, cfg)?;
    let (gw_ih, gw_hh, gb) = (leaf(&[9, 64], 60, 0.2), leaf(&[9, 3], 61, 0.3), leaf(&[9], 62, 0.1));
    let gy = ops::gru_layer(&ops::transpose(&r.y, 0, 1)?, &gw_ih, &gw_hh, None, Some(&gb), None, true)?;
    let loss = ops::add(&loss, &ops::add(&ops::mean(&gy, None, false)?, &ops::sum(&r.h_n, None, false)?)?)?;
    loss.backward()?;
    let mut hash = 0xCBF2_9CE4_8422_2325u64;
    fnv(&mut hash, &loss.to_vec());
    fnv(&mut hash, &rm.to_vec());
    fnv(&mut hash, &rv.to_vec());
    for p in [
        &x, &w1, &b1, &w2, &d, &ln_g, &ln_b, &table, &bn_g, &bn_b, &img, &cw1, &cb1, &cw2, &seq, &hs, &cs, &gw_ih, &gw_hh, &gb, &tw1, &tb1,
        &tw2,
    ] {
        fnv(&mut hash, &p.grad().expect("every parameter gets a gradient").to_vec());
    }
    for w in &rnn_w {
        for p in [&w.w_ih, &w.w_hh, w.b_ih.as_ref().unwrap(), w.b_hh.as_ref().unwrap()] {
            fnv(&mut hash, &p.grad().expect("every recurrent weight gets a gradient").to_vec());
        }
    }
    Ok(hash)
}

fn hash_with(mode: Mode, threads: usize, path: KernelPath) -> u64 {
    Compute::with(Settings { mode, threads, path }, || step().unwrap())
}

#[test]
fn exact_mode_is_identical_on_every_path_and_thread_count() {
    let reference = hash_with(Mode::Exact, 1, KernelPath::Scalar);
    for path in KernelPath::supported() {
        for threads in [1, 2, 3, 8] {
            assert_eq!(hash_with(Mode::Exact, threads, path), reference, "exact mode differs on {path} with {threads} threads");
        }
    }
}

#[test]
fn fast_mode_is_identical_across_thread_counts() {
    for path in KernelPath::supported() {
        let one = hash_with(Mode::Fast, 1, path);
        for threads in [2, 3, 8] {
            assert_eq!(hash_with(Mode::Fast, threads, path), one, "fast mode on {path} differs at {threads} threads");
        }
    }
}

#[test]
fn fast_and_exact_modes_really_differ_in_the_products() {
    // Guards the test above against a mode switch that does nothing.
    assert_ne!(hash_with(Mode::Fast, 1, KernelPath::best()), hash_with(Mode::Exact, 1, KernelPath::best()));
}
