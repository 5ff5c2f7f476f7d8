//! `om_ops::optim` against PyTorch 2.15.0 (`testdata/ops/optim.safetensors`, written by
//! `tools/oracle_optim.py`): five steps of each optimizer setting, the rate sequences of
//! the schedulers (bit for bit: the same `f64` formulas in the same order), gradient
//! clipping; and batch norm's `num_batches_tracked` in a PyTorch state dict.

use om_core::{io, Result, Tensor};
use om_ops::nn::{self, BatchNorm2d, Conv2d, Module};
use om_ops::optim::*;
use std::collections::BTreeMap;

fn data() -> BTreeMap<String, Tensor> {
    io::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ops/optim.safetensors")).expect("testdata/ops/optim.safetensors")
}

fn get<'a>(d: &'a BTreeMap<String, Tensor>, key: &str) -> &'a Tensor {
    d.get(key).unwrap_or_else(|| panic!("optim.safetensors has no `{key}`"))
}

/// Rows `k` of a stacked `[K, ...]` tensor, as values.
fn row(t: &Tensor, k: usize) -> Vec<f32> {
    let n = t.numel() / t.shape()[0];
    t.to_vec()[k * n..(k + 1) * n].to_vec()
}

fn assert_close(got: &[f32], want: &[f32], rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rtol * w.abs().max(1.0), "{what}[{i}]: {g} vs PyTorch {w}");
    }
}

/// The oracle's settings (tools/oracle_optim.py, `OPTIMIZERS`), each building our optimizer.
fn optimizer(case: &str, p: Tensor) -> Result<Box<dyn Optimizer>> {
    let p = vec![p];
    Ok(match case {
        "sgd" => Box::new(SgdConfig::default().lr(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01).build(p)?),
        "sgd_nesterov" => Box::new(SgdConfig::default().lr(0.05).momentum(0.8).nesterov(true).weight_decay(0.1).build(p)?),
        "adam" => Box::new(AdamConfig::default().lr(0.01).weight_decay(0.1).build(p)?),
        "adamw" => Box::new(AdamConfig::adamw().lr(0.02).betas((0.8, 0.9)).eps(1e-6).weight_decay(0.1).build(p)?),
        "rmsprop" => Box::new(RMSpropConfig::default().lr(0.01).build(p)?),
        "rmsprop_momentum" => Box::new(RMSpropConfig::default().lr(0.01).alpha(0.9).eps(1e-6).weight_decay(0.1).momentum(0.8).build(p)?),
        "rmsprop_centered" => Box::new(RMSpropConfig::default().lr(0.005).alpha(0.95).centered(true).momentum(0.5).build(p)?),
        "rmsprop_centered_plain" => Box::new(RMSpropConfig::default().lr(0.02).alpha(0.3).centered(true).weight_decay(0.05).build(p)?),
        "adagrad" => Box::new(AdagradConfig::default().lr(0.1).build(p)?),
        "adagrad_all" => {
            Box::new(AdagradConfig::default().lr(0.1).lr_decay(0.05).weight_decay(0.1).initial_accumulator_value(0.5).eps(1e-6).build(p)?)
        }
        other => panic!("unknown case {other}"),
    })
}

#[test]
fn optimizer_steps_match_pytorch() -> Result<()> {
    let d = data();
    let cases = [
        "sgd",
        "sgd_nesterov",
        "adam",
        "adamw",
        "rmsprop",
        "rmsprop_momentum",
        "rmsprop_centered",
        "rmsprop_centered_plain",
        "adagrad",
        "adagrad_all",
    ];
    for case in cases {
        let (p0, g, want) = (get(&d, &format!("{case}_p0")), get(&d, &format!("{case}_g")), get(&d, &format!("{case}_p")));
        let p = p0.detach().to_contiguous().requires_grad()?;
        let mut opt = optimizer(case, p.clone())?;
        for k in 0..g.shape()[0] {
            p.clear_grad();
            let gk = Tensor::from_vec(row(g, k), p.shape())?;
            om_ops::sum(&om_ops::mul(&p, &gk)?, None, false)?.backward()?;
            opt.step()?;
            // float32 rounding (PyTorch's kernels fuse or order some products differently)
            // compounds over the steps: measured at most 1.7e-7 after five steps
            assert_close(&p.to_vec(), &row(want, k), 1e-6, &format!("{case} step {}", k + 1));
        }
    }
    Ok(())
}

/// A rate sequence from its `CASE_hi` / `CASE_lo` halves of the `f64` bits.
fn rates(d: &BTreeMap<String, Tensor>, case: &str) -> Vec<f64> {
    let (hi, lo) = (get(d, &format!("{case}_hi")).to_vec_i32(), get(d, &format!("{case}_lo")).to_vec_i32());
    hi.iter().zip(&lo).map(|(&h, &l)| f64::from_bits(((h as u32 as u64) << 32) | l as u32 as u64)).collect()
}

/// Our scheduler's rates over as many epochs as PyTorch's sequence, from an SGD at `base`.
fn run(base: f32, n: usize, make: impl FnOnce(&mut dyn Optimizer) -> Result<Box<dyn LrScheduler>>) -> Result<(Vec<f64>, Vec<f32>)> {
    let mut opt = Sgd::new(vec![Tensor::zeros(&[1])?.requires_grad()?], base)?;
    let mut s = make(&mut opt)?;
    let (mut got, mut set) = (vec![s.lr()], vec![opt.lr()]);
    for e in 1..n {
        s.step(&mut opt)?;
        assert_eq!(s.last_epoch(), e);
        got.push(s.lr());
        set.push(opt.lr());
    }
    Ok((got, set))
}

#[test]
fn scheduler_rates_match_pytorch_bit_for_bit() -> Result<()> {
    let d = data();
    type Make = Box<dyn FnOnce(&mut dyn Optimizer) -> Result<Box<dyn LrScheduler>>>;
    let one = |max_lr: f64, total: usize, o: OneCycleOptions| -> Make {
        Box::new(move |opt| Ok(Box::new(OneCycleLR::new(opt, max_lr, total, o)?)))
    };
    let cases: Vec<(&str, f32, Make)> = vec![
        ("step", 0.5, Box::new(|o| Ok(Box::new(StepLR::new(o, 3, 0.1)?)))),
        ("multistep", 0.25, Box::new(|o| Ok(Box::new(MultiStepLR::new(o, &[2, 5, 5, 8], 0.3)?)))),
        ("exponential", 0.125, Box::new(|o| Ok(Box::new(ExponentialLR::new(o, 0.9)?)))),
        ("cosine", 0.5, Box::new(|o| Ok(Box::new(CosineAnnealingLR::new(o, 10, 0.001)?)))),
        ("cosine_to_zero", 0.0625, Box::new(|o| Ok(Box::new(CosineAnnealingLR::new(o, 12, 0.0)?)))),
        ("linear", 0.5, Box::new(|o| Ok(Box::new(LinearLR::new(o, 0.25, 1.0, 4)?)))),
        ("linear_down", 0.25, Box::new(|o| Ok(Box::new(LinearLR::new(o, 1.0 / 3.0, 0.5, 5)?)))),
        ("onecycle", 1.0, one(0.1, 20, OneCycleOptions::default())),
        ("onecycle_linear", 1.0, one(0.05, 17, OneCycleOptions { pct_start: 0.25, anneal: Anneal::Linear, ..Default::default() })),
        (
            "onecycle_three",
            1.0,
            one(0.2, 30, OneCycleOptions { three_phase: true, div_factor: 10.0, final_div_factor: 100.0, ..Default::default() }),
        ),
        (
            "onecycle_three_linear",
            1.0,
            one(0.3, 24, OneCycleOptions { pct_start: 0.4, three_phase: true, anneal: Anneal::Linear, ..Default::default() }),
        ),
        (
            "sequential_warmup_cosine",
            0.5,
            Box::new(|o| {
                let warm: Box<dyn LrScheduler> = Box::new(LinearLR::new(o, 0.25, 1.0, 4)?);
                let cosine = Box::new(CosineAnnealingLR::new(o, 8, 0.01)?);
                Ok(Box::new(SequentialLR::new(o, vec![warm, cosine], &[4])?))
            }),
        ),
        (
            "sequential_three",
            0.25,
            Box::new(|o| {
                let step: Box<dyn LrScheduler> = Box::new(StepLR::new(o, 2, 0.5)?);
                let exp = Box::new(ExponentialLR::new(o, 0.9)?);
                let multi = Box::new(MultiStepLR::new(o, &[1, 3], 0.1)?);
                Ok(Box::new(SequentialLR::new(o, vec![step, exp, multi], &[5, 11])?))
            }),
        ),
        (
            "sequential_same_milestone",
            0.125,
            Box::new(|o| {
                let exp: Box<dyn LrScheduler> = Box::new(ExponentialLR::new(o, 0.5)?);
                let linear = Box::new(LinearLR::new(o, 0.5, 1.0, 2)?);
                let step = Box::new(StepLR::new(o, 3, 0.1)?);
                Ok(Box::new(SequentialLR::new(o, vec![exp, linear, step], &[3, 3])?))
            }),
        ),
    ];
    for (case, base, make) in cases {
        let want = rates(&d, case);
        let (got, set) = run(base, want.len(), make)?;
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{case}: {got:?}\n vs PyTorch {want:?}");
        assert_eq!(set, want.iter().map(|&r| r as f32).collect::<Vec<_>>(), "{case}: the optimizer gets each rate rounded to f32");
    }
    Ok(())
}

#[test]
fn one_cycle_refuses_steps_past_its_total() -> Result<()> {
    let mut opt = Sgd::new(vec![Tensor::zeros(&[1])?.requires_grad()?], 1.0)?;
    let mut s = OneCycleLR::new(&mut opt, 0.1, 3, OneCycleOptions::default())?;
    for _ in 0..3 {
        s.step(&mut opt)?;
    }
    let lr = opt.lr();
    let e = s.step(&mut opt).unwrap_err().to_string();
    assert!(e.contains("OneCycleLR") && e.contains("3 total steps"), "{e}");
    assert_eq!((opt.lr(), s.last_epoch()), (lr, 3), "a refused step changes nothing");
    Ok(())
}

/// Three parameters given the oracle's gradients.
fn clip_params(d: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>> {
    (0..3)
        .map(|i| {
            let g = get(d, &format!("clip_g{i}"));
            let p = Tensor::zeros(g.shape())?.requires_grad()?;
            om_ops::sum(&om_ops::mul(&p, g)?, None, false)?.backward()?;
            Ok(p)
        })
        .collect()
}

#[test]
fn clip_grad_norm_and_value_match_pytorch() -> Result<()> {
    let d = data();
    for (case, max_norm, norm_type) in
        [("norm2", 1.0, 2.0), ("norm_inf", 0.5, f32::INFINITY), ("norm1", 2.0, 1.0), ("norm2_below", 100.0, 2.0)]
    {
        let ps = clip_params(&d)?;
        let total = clip_grad_norm(&ps, max_norm, norm_type, true)?;
        let want = get(&d, &format!("{case}_norm")).to_vec()[0];
        // ours accumulates in f64, PyTorch in f32
        assert_close(&[total], &[want], 1e-6, &format!("{case} total norm"));
        for (i, p) in ps.iter().enumerate() {
            let g = p.grad().expect("gradient").to_vec();
            assert_close(&g, &get(&d, &format!("{case}_g{i}")).to_vec(), 1e-6, &format!("{case} gradient {i}"));
        }
    }
    let ps = clip_params(&d)?;
    clip_grad_value(&ps, 0.3)?;
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(p.grad().expect("gradient").to_vec(), get(&d, &format!("value_g{i}")).to_vec(), "clip_grad_value gradient {i}");
    }
    Ok(())
}

#[test]
fn a_nonfinite_norm_is_an_error_when_asked_and_changes_nothing() -> Result<()> {
    let p = Tensor::zeros(&[3])?.requires_grad()?;
    om_ops::sum(&om_ops::mul(&p, &Tensor::from_vec(vec![1.0, f32::INFINITY, 2.0], &[3])?)?, None, false)?.backward()?;
    let ps = std::slice::from_ref(&p);
    let e = clip_grad_norm(ps, 1.0, 2.0, true).unwrap_err().to_string();
    assert!(e.contains("clip_grad_norm") && e.contains("inf"), "{e}");
    assert_eq!(p.grad().unwrap().to_vec(), [1.0, f32::INFINITY, 2.0]);
    assert!(clip_grad_norm(ps, 1.0, 0.0, false).is_err(), "norm_type 0");
    assert!(clip_grad_norm(ps, -1.0, 2.0, false).is_err(), "negative max_norm");
    assert!(clip_grad_value(ps, f32::NAN).is_err(), "NaN clip value");
    assert_eq!(clip_grad_norm(&[], 1.0, 2.0, true)?, 0.0, "no gradients: norm 0");
    Ok(())
}

#[test]
fn a_pytorch_state_dict_with_num_batches_tracked_loads() -> Result<()> {
    // torch.nn.Sequential(Conv2d(2, 3, 1), BatchNorm2d(3)): keys `0.*` and `1.*`
    #[derive(Module)]
    struct Net {
        #[module(name = "0")]
        conv: Conv2d,
        #[module(name = "1")]
        bn: BatchNorm2d,
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/ops/batchnorm_state.safetensors");
    let file = io::load(path)?;
    assert_eq!(file["1.num_batches_tracked"].to_vec_i32(), [2], "PyTorch counted two batches");
    let net = Net { conv: Conv2d::new(2, 3, 1)?, bn: BatchNorm2d::new(3)? };
    nn::load(&net, path)?;
    for (name, t) in nn::state(&net) {
        assert_eq!(t.to_vec(), file[&name].to_vec(), "{name}");
    }
    // a counter that is not an integer scalar is refused, naming it
    let bad = Tensor::from_vec(vec![2.0], &[1])?;
    let mut tensors: Vec<(String, Tensor)> = file.into_iter().collect();
    tensors.iter_mut().filter(|(n, _)| n == "1.num_batches_tracked").for_each(|(_, t)| *t = bad.clone());
    let bad_path = std::env::temp_dir().join(format!("om-optim-bn-{}.safetensors", std::process::id()));
    io::save(&bad_path, tensors.iter().map(|(n, t)| (n.as_str(), t)))?;
    let e = nn::load(&net, &bad_path).unwrap_err().to_string();
    std::fs::remove_file(&bad_path).ok();
    assert!(e.contains("1.num_batches_tracked"), "{e}");
    Ok(())
}
