//! Optimizer state files (`om_ops::optim::{save, load}`): a run stopped after N steps,
//! saved (weights and optimizer state), reloaded into fresh objects and continued gives the
//! same bits as the run that never stopped, for every optimizer (and with a schedule and
//! clipping, the schedule rebuilt and advanced); bad files are errors that
//! name the file and leave the optimizer as it was.

use om_core::{io, Result, Tensor};
use om_ops::nn::{self, Forward, Linear, Module};
use om_ops::optim::{self, *};
use om_ops::TensorOps;
use std::path::PathBuf;

#[derive(Module)]
struct Mlp {
    a: Linear,
    b: Linear,
}

impl Mlp {
    fn new(seed: u64) -> Mlp {
        Mlp { a: Linear::with_seed(4, 6, true, seed).unwrap(), b: Linear::with_seed(6, 3, true, seed + 100).unwrap() }
    }

    fn loss(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.b.forward(&self.a.forward(x)?.tanh()?)?;
        y.mul(&y)?.sum(None, false)
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("om-optim-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Named tensors (a state dict).
type Named = Vec<(String, Tensor)>;

type Make = fn(Vec<(String, Tensor)>) -> Result<Box<dyn Optimizer>>;

/// Every optimizer, in settings that use every state buffer.
const OPTIMIZERS: [(&str, Make); 6] = [
    ("sgd", |p| Ok(Box::new(SgdConfig::default().lr(0.05).momentum(0.9).nesterov(true).build(p)?))),
    ("adam", |p| Ok(Box::new(AdamConfig::default().lr(0.01).weight_decay(0.01).build(p)?))),
    ("adamw", |p| Ok(Box::new(Adam::adamw(p, 0.01)?))),
    ("rmsprop", |p| Ok(Box::new(RMSpropConfig::default().lr(0.01).momentum(0.5).centered(true).build(p)?))),
    ("adagrad", |p| Ok(Box::new(AdagradConfig::default().lr(0.1).lr_decay(0.01).initial_accumulator_value(0.1).build(p)?))),
    ("sgd_plain", |p| Ok(Box::new(Sgd::new(p, 0.05)?))),
];

fn train(model: &Mlp, opt: &mut dyn Optimizer, steps: std::ops::Range<usize>) -> Result<()> {
    for k in steps {
        let x = Tensor::rand_uniform(&[5, 4], -1.0, 1.0, k as u64)?;
        opt.zero_grad()?;
        model.loss(&x)?.backward()?;
        opt.step()?;
        // a schedule that changes the rate, so the saved rate matters
        opt.set_lr(opt.lr() * 0.9);
    }
    Ok(())
}

fn bits(list: &[(String, Tensor)]) -> Vec<(String, Vec<u32>)> {
    list.iter()
        .map(|(n, t)| {
            let v = if t.dtype() == om_core::DType::F32 {
                t.to_vec().iter().map(|v| v.to_bits()).collect()
            } else {
                t.to_vec_i32().iter().map(|&v| v as u32).collect()
            };
            (n.clone(), v)
        })
        .collect()
}

#[test]
fn a_resumed_run_is_bit_identical_to_an_uninterrupted_one() -> Result<()> {
    const N: usize = 4;
    for (name, make) in OPTIMIZERS {
        let whole = Mlp::new(1);
        let mut opt = make(whole.parameters())?;
        train(&whole, opt.as_mut(), 0..2 * N)?;

        let first = Mlp::new(1);
        let mut opt1 = make(first.parameters())?;
        train(&first, opt1.as_mut(), 0..N)?;
        let (weights, state) = (tmp(&format!("{name}_weights.safetensors")), tmp(&format!("{name}_state.safetensors")));
        nn::save(&first, &weights)?;
        optim::save(opt1.as_ref(), &state)?;

        let resumed = Mlp::new(2);
        let mut opt2 = make(resumed.parameters())?;
        nn::load(&resumed, &weights)?;
        optim::load(opt2.as_mut(), &state)?;
        assert_eq!(bits(&opt2.state_dict()?), bits(&opt1.state_dict()?), "{name}: the reloaded state");
        train(&resumed, opt2.as_mut(), N..2 * N)?;

        assert_eq!(bits(&nn::state(&resumed)), bits(&nn::state(&whole)), "{name}: the resumed run's weights");
        assert_eq!(bits(&opt2.state_dict()?), bits(&opt.state_dict()?), "{name}: the resumed run's optimizer state");
    }
    Ok(())
}

#[test]
fn state_files_use_the_parameter_names_and_pytorch_keys() -> Result<()> {
    let m = Mlp::new(1);
    let mut opt = Adam::new(m.parameters(), 0.01)?;
    m.loss(&Tensor::ones(&[2, 4])?)?.backward()?;
    opt.step()?;
    let path = tmp("keys.safetensors");
    optim::save(&opt, &path)?;
    let keys: Vec<String> = io::load(&path)?.into_keys().collect();
    let mut want = vec!["hyper.betas", "hyper.decoupled", "hyper.eps", "hyper.lr", "hyper.weight_decay"];
    for p in ["a.bias", "a.weight", "b.bias", "b.weight"] {
        for slot in ["exp_avg", "exp_avg_sq", "step"] {
            want.push(Box::leak(format!("{p}.{slot}").into_boxed_str()));
        }
    }
    want.sort();
    assert_eq!(keys, want);
    Ok(())
}

#[test]
fn bad_state_files_are_errors_naming_the_file_that_change_nothing() -> Result<()> {
    let m = Mlp::new(1);
    let mut adam = Adam::new(m.parameters(), 0.01)?;
    train(&m, &mut adam, 0..2)?;
    let good = adam.state_dict()?;
    let write = |name: &str, list: &[(String, Tensor)]| -> PathBuf {
        let path = tmp(name);
        io::save(&path, list.iter().map(|(n, t)| (n.as_str(), t))).unwrap();
        path
    };
    let edited = |f: &dyn Fn(&mut Named)| {
        let mut l = good.clone();
        f(&mut l);
        l
    };
    let set = |key: &'static str, t: Tensor| {
        move |l: &mut Vec<(String, Tensor)>| l.iter_mut().filter(|(n, _)| n == key).for_each(|(_, v)| *v = t.clone())
    };
    let garbage = tmp("garbage.safetensors");
    std::fs::write(&garbage, b"not a safetensors file").unwrap();
    let sgd_file = tmp("sgd_state.safetensors");
    let mut sgd = SgdConfig::default().lr(0.1).momentum(0.9).build(m.parameters())?;
    train(&m, &mut sgd, 0..1)?;
    optim::save(&sgd, &sgd_file)?;
    let cases: Vec<(&str, PathBuf, &str)> = vec![
        ("missing file", tmp("does-not-exist.safetensors"), "does-not-exist"),
        ("garbage", garbage, "not valid safetensors"),
        ("another optimizer's", sgd_file, "hyper.betas"),
        (
            "missing buffer",
            write("missing.safetensors", &edited(&|l| l.retain(|(n, _)| n != "b.weight.exp_avg_sq"))),
            "b.weight.exp_avg_sq",
        ),
        ("buffer without step", write("nostep.safetensors", &edited(&|l| l.retain(|(n, _)| n != "a.bias.step"))), "a.bias.step"),
        (
            "extra",
            write("extra.safetensors", &edited(&|l| l.push(("c.weight.exp_avg".into(), Tensor::zeros(&[1]).unwrap())))),
            "c.weight.exp_avg",
        ),
        ("shape", write("shape.safetensors", &edited(&set("a.weight.exp_avg", Tensor::zeros(&[4, 6])?))), "a.weight.exp_avg"),
        ("step dtype", write("step.safetensors", &edited(&set("a.weight.step", Tensor::scalar(2.0)))), "a.weight.step"),
        ("lr out of range", write("lr.safetensors", &edited(&set("hyper.lr", Tensor::from_vec(vec![-1.0], &[])?))), "lr must be"),
        (
            "betas out of range",
            write("betas.safetensors", &edited(&set("hyper.betas", Tensor::from_vec(vec![0.9, 1.0], &[2])?))),
            "betas.1",
        ),
        ("flag", write("flag.safetensors", &edited(&set("hyper.decoupled", Tensor::from_vec_i32(vec![7], &[])?))), "hyper.decoupled"),
    ];
    let before = bits(&adam.state_dict()?);
    for (what, path, needle) in cases {
        let e = optim::load(&mut adam, &path).expect_err(what).to_string();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(e.contains(&file), "{what}: `{e}` should name the file {file}");
        assert!(e.contains(needle), "{what}: `{e}` should say `{needle}`");
        assert_eq!(bits(&adam.state_dict()?), before, "{what}: the optimizer must be unchanged");
    }
    Ok(())
}

#[test]
fn every_hyper_parameter_is_checked_with_pytorch_ranges() {
    let p = || vec![Tensor::ones(&[2]).unwrap().requires_grad().unwrap()];
    let errs = [
        SgdConfig::default().lr(-0.1).build(p()).err(),
        SgdConfig::default().lr(f32::NAN).build(p()).err(),
        SgdConfig::default().momentum(-0.9).build(p()).err(),
        SgdConfig::default().weight_decay(-1.0).build(p()).err(),
        SgdConfig::default().nesterov(true).build(p()).err(),
        AdamConfig::default().betas((0.9, 1.0)).build(p()).err(),
        AdamConfig::default().betas((-0.1, 0.9)).build(p()).err(),
        AdamConfig::default().eps(-1e-8).build(p()).err(),
        AdamConfig::adamw().weight_decay(f32::INFINITY).build(p()).err(),
        RMSpropConfig::default().alpha(-0.5).build(p()).err(),
        RMSpropConfig::default().eps(-1.0).build(p()).err(),
        RMSpropConfig::default().momentum(-0.1).build(p()).err(),
        AdagradConfig::default().lr_decay(-0.1).build(p()).err(),
        AdagradConfig::default().initial_accumulator_value(-0.1).build(p()).err(),
        AdagradConfig::default().eps(-1.0).build(p()).err(),
    ];
    let want = [
        "Sgd: lr must be a finite number ≥ 0, got -0.1",
        "Sgd: lr must be a finite number ≥ 0, got NaN",
        "Sgd: momentum must be a finite number ≥ 0, got -0.9",
        "Sgd: weight_decay must be a finite number ≥ 0, got -1",
        "Sgd: Nesterov momentum needs a momentum and zero dampening",
        "Adam: betas.1 must be in [0, 1), got 1",
        "Adam: betas.0 must be in [0, 1), got -0.1",
        "Adam: eps must be a finite number ≥ 0, got -0.00000001",
        "Adam: weight_decay must be a finite number ≥ 0, got inf",
        "RMSprop: alpha must be a finite number ≥ 0, got -0.5",
        "RMSprop: eps must be a finite number ≥ 0, got -1",
        "RMSprop: momentum must be a finite number ≥ 0, got -0.1",
        "Adagrad: lr_decay must be a finite number ≥ 0, got -0.1",
        "Adagrad: initial_accumulator_value must be a finite number ≥ 0, got -0.1",
        "Adagrad: eps must be a finite number ≥ 0, got -1",
    ];
    for (e, want) in errs.into_iter().zip(want) {
        let e = e.map(|e| e.to_string());
        assert!(e.as_deref().is_some_and(|e| e.contains(want)), "{e:?} should say `{want}`");
    }
    // PyTorch's defaults pass, lr 0 included (PyTorch accepts it)
    assert!(SgdConfig::default().lr(0.0).build(p()).is_ok());
    assert!(
        AdamConfig::default().build(p()).is_ok()
            && RMSpropConfig::default().build(p()).is_ok()
            && AdagradConfig::default().build(p()).is_ok()
    );
    assert_eq!(AdagradConfig::default().eps, 1e-10);
    assert_eq!(RMSpropConfig::default().alpha, 0.99);
}

#[test]
fn a_rejected_config_leaves_the_optimizer_as_it_was() -> Result<()> {
    let m = Mlp::new(1);
    let mut opt = RMSprop::new(m.parameters(), 0.01)?;
    let before = *opt.config();
    assert!(opt.set_config(before.alpha(f32::NAN)).is_err());
    assert_eq!(*opt.config(), before);
    // a config that needs a new buffer gets it on the next step
    opt.set_config(before.centered(true).momentum(0.9))?;
    train(&m, &mut opt, 0..2)?;
    let keys: Vec<String> = opt.state_dict()?.into_iter().map(|(n, _)| n).filter(|n| n.starts_with("a.bias.")).collect();
    assert_eq!(keys, ["a.bias.step", "a.bias.square_avg", "a.bias.momentum_buffer", "a.bias.grad_avg"]);
    Ok(())
}

/// Steps `k` of a run with a per-step schedule.
fn train_scheduled(model: &Mlp, opt: &mut dyn Optimizer, schedule: &mut dyn LrScheduler, steps: std::ops::Range<usize>) -> Result<()> {
    for k in steps {
        let x = Tensor::rand_uniform(&[5, 4], -1.0, 1.0, k as u64)?;
        opt.zero_grad()?;
        model.loss(&x)?.backward()?;
        clip_grad_norm(opt.params(), 1.0, 2.0, true)?;
        opt.step()?;
        schedule.step(opt)?;
    }
    Ok(())
}

#[test]
fn a_run_with_a_schedule_resumes_by_rebuilding_and_advancing_the_schedule() -> Result<()> {
    const N: usize = 5;
    let one_cycle = |opt: &mut dyn Optimizer| OneCycleLR::new(opt, 0.05, 2 * N, OneCycleOptions::default());
    let whole = Mlp::new(1);
    let mut opt = AdamConfig::adamw().build(whole.parameters())?;
    let mut schedule = one_cycle(&mut opt)?;
    train_scheduled(&whole, &mut opt, &mut schedule, 0..2 * N)?;

    let first = Mlp::new(1);
    let mut opt1 = AdamConfig::adamw().build(first.parameters())?;
    let mut schedule1 = one_cycle(&mut opt1)?;
    train_scheduled(&first, &mut opt1, &mut schedule1, 0..N)?;
    let (weights, state) = (tmp("scheduled_weights.safetensors"), tmp("scheduled_state.safetensors"));
    nn::save(&first, &weights)?;
    optim::save(&opt1, &state)?;

    let resumed = Mlp::new(2);
    let mut opt2 = AdamConfig::adamw().build(resumed.parameters())?;
    let mut schedule2 = one_cycle(&mut opt2)?;
    for _ in 0..N {
        schedule2.advance()?;
    }
    nn::load(&resumed, &weights)?;
    optim::load(&mut opt2, &state)?;
    assert_eq!(opt2.lr(), schedule2.lr() as f32, "the saved rate is the schedule's");
    train_scheduled(&resumed, &mut opt2, &mut schedule2, N..2 * N)?;
    assert_eq!(bits(&nn::state(&resumed)), bits(&nn::state(&whole)));
    assert_eq!(bits(&opt2.state_dict()?), bits(&opt.state_dict()?));
    Ok(())
}
