//! `om_ops::nn` and `om_ops::optim`: initialisation, optimizer steps against the PyTorch
//! formulas evaluated here, and weights files (round trip and every kind of mismatch).

use om_core::{io, Result, Tensor};
use om_ops::nn::{
    self, BatchNorm2d, Conv2d, ConvTranspose2d, ConvTranspose2dOptions, Embedding, Forward, Gru, LayerNorm, Linear, Lstm, Module,
};
use om_ops::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use om_ops::{self as ops, RnnConfig};

/// Gives `p` the gradient `c` (backward of `Σ p·c`), replacing any previous one.
fn set_grad(p: &Tensor, c: &[f32]) -> Result<()> {
    p.clear_grad();
    let c = Tensor::from_slice(c, p.shape())?;
    ops::sum(&ops::mul(p, &c)?, None, false)?.backward()
}

fn leaf(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len()]).unwrap().requires_grad().unwrap()
}

#[test]
fn sgd_with_momentum_and_weight_decay_follows_pytorch() -> Result<()> {
    let (lr, mu, wd) = (0.1f32, 0.9f32, 0.01f32);
    let p0 = [1.0f32, -2.0, 0.5];
    let grads = [[0.5f32, 0.25, -1.0], [-0.5, 1.0, 2.0]];
    let p = leaf(&p0);
    let mut opt = SgdConfig::default().lr(lr).momentum(mu).weight_decay(wd).build(vec![p.clone()])?;
    // torch.optim.SGD: d = g + wd·p; b = d (first step) or μ·b + d; p = p − lr·b
    let (mut want, mut buf) = (p0.to_vec(), vec![0.0f32; 3]);
    for (step, g) in grads.iter().enumerate() {
        set_grad(&p, g)?;
        let version = p.version();
        opt.step()?;
        assert!(p.version() > version, "the update must bump the storage version");
        for k in 0..3 {
            let d = g[k] + wd * want[k];
            buf[k] = if step == 0 { d } else { mu * buf[k] + d };
            want[k] -= lr * buf[k];
        }
        assert_eq!(p.to_vec(), want, "step {}", step + 1);
    }
    Ok(())
}

#[test]
fn sgd_nesterov_and_dampening() -> Result<()> {
    let p = leaf(&[1.0, 2.0]);
    let mut opt = SgdConfig::default().lr(0.5).momentum(0.5).nesterov(true).build(vec![p.clone()])?;
    let g = [0.25f32, -0.75];
    set_grad(&p, &g)?;
    opt.step()?;
    // first step: b = g, d = g + μ·b
    let want: Vec<f32> = [1.0f32, 2.0].iter().zip(&g).map(|(p, g)| p - 0.5 * (g + 0.5 * g)).collect();
    assert_eq!(p.to_vec(), want);
    assert!(opt.set_config(opt.config().dampening(0.1)).is_err(), "Nesterov with dampening is rejected, as in PyTorch");
    assert_eq!(opt.config().dampening, 0.0, "a rejected config changes nothing");
    Ok(())
}

/// Adam or AdamW on one parameter over `grads`, checked against the formulas in f64.
fn check_adam(decoupled: bool) -> Result<()> {
    let (lr, b1, b2, eps, wd) = (0.01f64, 0.9f64, 0.999f64, 1e-8f64, 0.1f64);
    let p0 = [1.0f32, -2.0, 0.5, 3.0];
    let grads = [[0.5f32, 0.25, -1.0, 0.0], [-0.5, 1.0, 2.0, 0.125], [0.1, -0.2, 0.3, -0.4]];
    let p = leaf(&p0);
    let config = if decoupled { AdamConfig::adamw() } else { AdamConfig::default() };
    let mut opt = config.lr(lr as f32).weight_decay(wd as f32).build(vec![p.clone()])?;
    let mut want: Vec<f64> = p0.iter().map(|&v| v as f64).collect();
    let (mut m, mut v) = (vec![0.0f64; 4], vec![0.0f64; 4]);
    for (t, g) in grads.iter().enumerate() {
        let t = (t + 1) as i32;
        set_grad(&p, g)?;
        opt.step()?;
        for k in 0..4 {
            let mut g = g[k] as f64;
            if decoupled {
                want[k] *= 1.0 - lr * wd;
            } else {
                g += wd * want[k];
            }
            m[k] = b1 * m[k] + (1.0 - b1) * g;
            v[k] = b2 * v[k] + (1.0 - b2) * g * g;
            let m_hat = m[k] / (1.0 - b1.powi(t));
            let v_hat = v[k] / (1.0 - b2.powi(t));
            want[k] -= lr * m_hat / (v_hat.sqrt() + eps);
        }
        for (k, (got, want)) in p.to_vec().iter().zip(&want).enumerate() {
            assert!((*got as f64 - want).abs() <= 1e-6 * want.abs().max(1.0), "step {t}, element {k}: {got} vs {want}");
        }
    }
    Ok(())
}

#[test]
fn adam_follows_pytorch_with_bias_correction_and_l2() -> Result<()> {
    check_adam(false)
}

#[test]
fn adamw_decouples_weight_decay() -> Result<()> {
    check_adam(true)
}

#[test]
fn the_first_adam_step_moves_every_coordinate_by_lr() -> Result<()> {
    // m̂ = g and v̂ = g² after one step, so the update is lr·g/(|g| + ε) ≈ lr·sign(g).
    let p = leaf(&[0.0, 0.0]);
    let mut opt = Adam::new(vec![p.clone()], 0.1)?;
    set_grad(&p, &[3.0, -1e-3])?;
    opt.step()?;
    let v = p.to_vec();
    assert!((v[0] + 0.1).abs() < 1e-6 && (v[1] - 0.1).abs() < 1e-4, "{v:?}");
    Ok(())
}

#[test]
fn parameters_without_a_gradient_are_skipped_and_zero_grad_zeroes() -> Result<()> {
    let (a, b) = (leaf(&[1.0, 2.0]), leaf(&[3.0]));
    let mut opt = Adam::new(vec![a.clone(), b.clone()], 0.1)?;
    set_grad(&a, &[1.0, 1.0])?;
    opt.step()?;
    assert_eq!(b.to_vec(), vec![3.0]);
    assert_ne!(a.to_vec(), vec![1.0, 2.0]);
    opt.zero_grad()?;
    assert_eq!(a.grad().map(|g| g.to_vec()), Some(vec![0.0, 0.0]));
    Ok(())
}

#[test]
fn bad_hyperparameters_are_errors() {
    let p = || vec![leaf(&[1.0])];
    assert!(Sgd::new(p(), -1.0).is_err());
    assert!(AdamConfig::default().lr(0.1).betas((1.0, 0.9)).build(p()).is_err());
    assert!(Adam::new(vec![Tensor::from_vec_i32(vec![1], &[1]).unwrap()], 0.1).is_err());
}

#[test]
fn initialisation_follows_pytorch_and_the_seed() -> Result<()> {
    let fc = Linear::with_seed(50, 40, true, 1)?;
    let bound = 1.0 / 50f32.sqrt();
    let w = fc.weight.to_vec();
    assert!(w.iter().all(|v| v.abs() <= bound));
    assert!(w.iter().any(|v| v.abs() > 0.9 * bound), "the range U(−1/√in, 1/√in) is used");
    assert!(fc.bias.as_ref().unwrap().to_vec().iter().all(|v| v.abs() <= bound));
    assert_eq!(Linear::with_seed(50, 40, true, 1)?.weight.to_vec(), w, "same seed, same weights");
    assert_ne!(Linear::with_seed(50, 40, true, 2)?.weight.to_vec(), w);

    let conv = Conv2d::new(3, 4, 5)?;
    assert_eq!(conv.weight.shape(), &[4, 3, 5, 5]);
    let bound = 1.0 / 75f32.sqrt();
    assert!(conv.weight.to_vec().iter().all(|v| v.abs() <= bound));

    let up = ConvTranspose2d::with_options(4, 6, 2, ConvTranspose2dOptions::default().stride(2))?;
    assert_eq!(up.weight.shape(), &[4, 6, 2, 2]);
    let bound = 1.0 / 24f32.sqrt();
    assert!(up.weight.to_vec().iter().all(|v| v.abs() <= bound));
    assert!(up.weight.to_vec().iter().any(|v| v.abs() > 0.9 * bound), "fan_in = out·kH·kW, as PyTorch computes it");
    assert_eq!(up.forward(&Tensor::ones(&[1, 4, 3, 3])?)?.shape(), &[1, 6, 6, 6]);

    let bn = BatchNorm2d::new(3)?;
    assert_eq!((bn.weight.to_vec(), bn.bias.to_vec()), (vec![1.0; 3], vec![0.0; 3]));
    assert_eq!((bn.running_mean.to_vec(), bn.running_var.to_vec()), (vec![0.0; 3], vec![1.0; 3]));
    assert!(bn.weight.needs_grad() && !bn.running_mean.needs_grad());

    let emb = Embedding::new(5, 3, Some(2))?;
    assert_eq!(&emb.weight.to_vec()[6..9], &[0.0; 3], "the padding row starts at zero");
    let ln = LayerNorm::new(6)?;
    assert_eq!(ln.forward(&Tensor::ones(&[2, 6])?)?.to_vec(), vec![0.0; 12]);
    Ok(())
}

#[test]
fn batch_norm_updates_running_stats_in_training_only() -> Result<()> {
    let mut bn = BatchNorm2d::new(2)?;
    let x = Tensor::randn_with_seed(&[4, 2, 3, 3], 5)?;
    bn.forward(&x)?;
    let rm = bn.running_mean.to_vec();
    assert!(rm.iter().all(|v| *v != 0.0));
    bn.set_training(false);
    let y = bn.forward(&x)?;
    assert_eq!(bn.running_mean.to_vec(), rm, "evaluation leaves the running stats alone");
    assert_eq!(y.shape(), x.shape());
    Ok(())
}

#[test]
fn recurrent_modules_use_pytorch_names_and_shapes() -> Result<()> {
    let lstm = Lstm::new(5, 7, RnnConfig { layers: 2, bidirectional: true, batch_first: false })?;
    let p = lstm.parameters();
    let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[..5], &["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse"]);
    assert_eq!(p.len(), 16);
    assert_eq!(p[8].1.shape(), &[28, 14], "layer 1 reads both directions");
    let out = lstm.forward(&Tensor::randn_with_seed(&[3, 2, 5], 1)?, None, None)?;
    assert_eq!(out.y.shape(), &[3, 2, 14]);
    let gru = Gru::new(5, 4, RnnConfig::new(1))?;
    assert_eq!(gru.parameters()[0].1.shape(), &[12, 5]);
    assert_eq!(gru.forward(&Tensor::randn_with_seed(&[3, 2, 5], 1)?, None)?.h_n.shape(), &[1, 2, 4]);
    Ok(())
}

#[derive(Module)]
struct Small {
    fc: Linear,
    bn: BatchNorm2d,
}

impl Small {
    fn new(seed: u64) -> Small {
        Small { fc: Linear::with_seed(3, 2, true, seed).unwrap(), bn: BatchNorm2d::new(2).unwrap() }
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("om-nn-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn snapshot(m: &impl Module) -> Vec<(String, Vec<u32>)> {
    nn::state(m).into_iter().map(|(n, t)| (n, t.to_vec().iter().map(|v| v.to_bits()).collect())).collect()
}

#[test]
fn weights_files_round_trip_parameters_and_buffers() -> Result<()> {
    let a = Small::new(1);
    a.bn.running_var.fill_(2.5)?;
    let path = tmp("round_trip.safetensors");
    nn::save(&a, &path)?;
    let names: Vec<String> = io::load(&path)?.into_keys().collect();
    assert_eq!(names, ["bn.bias", "bn.running_mean", "bn.running_var", "bn.weight", "fc.bias", "fc.weight"]);
    let b = Small::new(2);
    assert_ne!(snapshot(&a), snapshot(&b));
    nn::load(&b, &path)?;
    assert_eq!(snapshot(&a), snapshot(&b));
    assert!(b.fc.weight.needs_grad(), "loading keeps the parameters trainable");
    Ok(())
}

#[test]
fn weights_file_mismatches_are_errors_that_change_nothing() -> Result<()> {
    let a = Small::new(1);
    let good = nn::state(&a);
    let write = |name: &str, list: &[(String, Tensor)]| -> std::path::PathBuf {
        let path = tmp(name);
        io::save(&path, list.iter().map(|(n, t)| (n.as_str(), t))).unwrap();
        path
    };
    let replace = |name: &str, t: Tensor| -> Vec<(String, Tensor)> {
        good.iter().map(|(n, old)| (n.clone(), if n == name { t.clone() } else { old.clone() })).collect()
    };
    let mut missing = good.clone();
    missing.retain(|(n, _)| n != "bn.running_var");
    let mut extra = good.clone();
    extra.push(("fc.extra".to_string(), Tensor::zeros(&[1])?));
    let mut renamed = good.clone();
    renamed[0].0 = "fc.weights".to_string();
    let cases = [
        ("missing", write("missing.safetensors", &missing), "bn.running_var"),
        ("unexpected", write("extra.safetensors", &extra), "fc.extra"),
        ("renamed", write("renamed.safetensors", &renamed), "fc.weight"),
        ("shape", write("shape.safetensors", &replace("fc.weight", Tensor::zeros(&[3, 2])?)), "fc.weight"),
        ("dtype", write("dtype.safetensors", &replace("bn.bias", Tensor::from_vec_i32(vec![0, 0], &[2])?)), "bn.bias"),
    ];
    let b = Small::new(2);
    let before = snapshot(&b);
    for (what, path, name) in cases {
        let err = nn::load(&b, &path).expect_err(what).to_string();
        assert!(err.contains(name), "{what}: `{err}` should name `{name}`");
        assert_eq!(snapshot(&b), before, "{what}: the module must be unchanged");
    }
    assert!(nn::load(&b, tmp("does-not-exist.safetensors")).is_err());
    Ok(())
}

#[test]
fn manual_seed_makes_constructors_reproducible_and_successive_layers_differ() -> Result<()> {
    let build = || -> Result<(Linear, Conv2d, Lstm, Tensor)> {
        Ok((Linear::new(6, 5)?, Conv2d::new(2, 3, 3)?, Lstm::new(4, 3, RnnConfig::new(1))?, Tensor::randn(&[7])?))
    };
    om_core::rng::manual_seed(42);
    let (fc, conv, lstm, x) = build()?;
    om_core::Compute::set_threads(2)?;
    om_core::rng::manual_seed(42);
    let (fc2, conv2, lstm2, x2) = build()?;
    om_core::Compute::set_threads(1)?;
    assert_eq!(snapshot(&fc), snapshot(&fc2), "same seed, same layer, whatever the thread count");
    assert_eq!(snapshot(&conv), snapshot(&conv2));
    assert_eq!(snapshot(&lstm), snapshot(&lstm2));
    assert_eq!(x.to_vec(), x2.to_vec());
    let (a, b) = (Linear::new(6, 5)?, Linear::new(6, 5)?);
    assert_ne!(a.weight.to_vec(), b.weight.to_vec(), "two layers built in turn differ");
    om_core::rng::manual_seed(43);
    assert_ne!(Linear::new(6, 5)?.weight.to_vec(), fc.weight.to_vec(), "another seed, other weights");
    // A thread that has not drawn yet starts from the last seed set.
    om_core::rng::manual_seed(42);
    let other = std::thread::spawn(|| Linear::new(6, 5).map(|l| l.weight.to_vec())).join().unwrap()?;
    assert_eq!(other, fc.weight.to_vec());
    // Explicit seeds ignore the stream; the stream-drawn layer keeps torch.nn's range.
    om_core::rng::manual_seed(1);
    let fixed = Linear::with_seed(6, 5, true, 9)?.weight.to_vec();
    om_core::rng::manual_seed(2);
    assert_eq!(Linear::with_seed(6, 5, true, 9)?.weight.to_vec(), fixed);
    let bound = 1.0 / 6f32.sqrt();
    assert!(fc.weight.to_vec().iter().chain(&fc.bias.as_ref().unwrap().to_vec()).all(|v| v.abs() <= bound));
    Ok(())
}

#[test]
fn the_models_keep_their_weight_names() -> Result<()> {
    let net = om_models::DigitNet::new([4, 8], 0)?;
    let names: Vec<String> = nn::state(&net).into_iter().map(|(n, _)| n).collect();
    let mut want: Vec<String> =
        ["conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    want.extend(["fc.weight", "fc.bias", "bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"].map(String::from));
    assert_eq!(names, want);
    let ocr = om_models::Crnn::new(0)?;
    let names: Vec<String> = ocr.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(&names[8..13], ["rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0", "rnn.weight_ih_l0_reverse"]);
    assert_eq!(&names[16..], ["fc.weight", "fc.bias"]);
    // Saved and reloaded into a model from another seed, in evaluation mode: same outputs.
    let path = tmp("digits.safetensors");
    nn::save(&net, &path)?;
    let mut back = om_models::DigitNet::new([4, 8], 5)?;
    nn::load(&back, &path)?;
    let mut net = net;
    net.eval();
    back.eval();
    let x = Tensor::randn_with_seed(&[3, 1, 8, 8], 1)?;
    assert_eq!(net.forward(&x)?.to_vec(), back.forward(&x)?.to_vec());
    Ok(())
}

/// The layers of a PyTorch user's first conv net (`nn.Conv2d(1, 4, 3)`, `nn.MaxPool2d(2)`,
/// `nn.AvgPool2d`): PyTorch's defaults, a derived module whose pooling layers hold no
/// parameters, and a training step through them.
#[test]
fn pooling_layers_in_a_derived_module() -> Result<()> {
    use om_ops::nn::{AvgPool2d, MaxPool2d};
    #[derive(Module)]
    struct Net {
        conv: Conv2d,
        pool: MaxPool2d,
        avg: AvgPool2d,
        fc: Linear,
    }
    let net = Net {
        conv: Conv2d::with_seed(1, 4, 3, Default::default(), 3)?,
        pool: MaxPool2d::new(2)?,
        avg: AvgPool2d::new(ops::Pool2d::new(3).stride(1).padding(1).count_include_pad(false))?,
        fc: Linear::with_seed(4 * 3 * 3, 10, true, 4)?,
    };
    let names: Vec<String> = net.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["conv.weight", "conv.bias", "fc.weight", "fc.bias"]);
    let x = Tensor::randn_with_seed(&[8, 1, 8, 8], 5)?;
    let h = net.avg.forward(&net.pool.forward(&ops::relu(&net.conv.forward(&x)?)?)?)?;
    assert_eq!(h.shape(), &[8, 4, 3, 3]);
    // The layers are the functions with their options.
    let c = ops::relu(&net.conv.forward(&x)?)?;
    assert_eq!(net.pool.forward(&c)?.to_vec(), ops::max_pool2d(&c, 2)?.to_vec());
    let logits = net.fc.forward(&ops::reshape(&h, [8, 36])?)?;
    let loss = ops::sum(&logits, None, false)?;
    loss.backward()?;
    assert!(net.conv.weight.grad().is_some() && net.fc.weight.grad().is_some());
    Ok(())
}
