//! `om train`: an interim demo until the digits trainer lands — a two-layer perceptron
//! learns to separate two interleaved spirals (generated deterministically from the seed)
//! with full-batch gradient descent, printing loss and accuracy per epoch.

use onemodel::core::rng::Rng;
use onemodel::{ops, Compute, Error, Mode, Result, Tensor};
use std::time::Instant;

/// Command-line options of `om train`.
pub struct Options {
    epochs: usize,
    seed: u64,
    threads: usize,
    mode: Mode,
}

impl Options {
    /// Parses `--epochs N --seed S --threads T --mode fast|exact`.
    pub fn parse(args: &[String]) -> Result<Options> {
        let mut o = Options { epochs: 300, seed: 7, threads: 1, mode: Mode::Fast };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value =
                |name: &str| -> Result<&String> { it.next().ok_or_else(|| Error::argument("train", format!("{name} needs a value"))) };
            let bad = |name: &str, v: &str| Error::argument("train", format!("invalid value `{v}` for {name}"));
            match flag.as_str() {
                "--epochs" => {
                    let v = value("--epochs")?;
                    o.epochs = v.parse().map_err(|_| bad("--epochs", v))?;
                }
                "--seed" => {
                    let v = value("--seed")?;
                    o.seed = v.parse().map_err(|_| bad("--seed", v))?;
                }
                "--threads" => {
                    let v = value("--threads")?;
                    o.threads = v.parse().map_err(|_| bad("--threads", v))?;
                }
                "--mode" => {
                    let v = value("--mode")?;
                    o.mode = Mode::parse(v).ok_or_else(|| bad("--mode", v))?;
                }
                other => return Err(Error::argument("train", format!("unknown option `{other}`"))),
            }
        }
        Ok(o)
    }
}

/// Two interleaved spirals: `n` points per class, features `[2n, 2]`, labels `[2n, 1]`.
fn spirals(n: usize, seed: u64) -> Result<(Tensor, Tensor)> {
    let mut rng = Rng::new(seed);
    let mut x = Vec::with_capacity(4 * n);
    let mut y = Vec::with_capacity(2 * n);
    for class in 0..2 {
        for i in 0..n {
            let r = i as f32 / n as f32 * 2.5 + 0.2;
            let t = i as f32 / n as f32 * 2.8 * std::f32::consts::PI + class as f32 * std::f32::consts::PI;
            x.push(r * t.cos() + 0.05 * rng.normal());
            x.push(r * t.sin() + 0.05 * rng.normal());
            y.push(class as f32);
        }
    }
    Ok((Tensor::from_vec(x, &[2 * n, 2])?, Tensor::from_vec(y, &[2 * n, 1])?))
}

fn param(shape: &[usize], scale: f32, seed: u64) -> Result<Tensor> {
    let t = Tensor::randn(shape, seed)?;
    t.update_f32("init", |v| v.iter_mut().for_each(|x| *x *= scale))?;
    t.requires_grad()
}

/// Trains and prints the figures.
pub fn run(o: &Options) -> Result<()> {
    Compute::set_threads(o.threads)?;
    Compute::set_mode(o.mode);
    let (x, y) = spirals(200, o.seed)?;
    let hidden = 64;
    let w1 = param(&[2, hidden], 1.0, o.seed + 1)?;
    let b1 = param(&[hidden], 0.0, o.seed + 2)?;
    let w2 = param(&[hidden, hidden], (2.0 / hidden as f32).sqrt(), o.seed + 3)?;
    let b2 = param(&[hidden], 0.0, o.seed + 4)?;
    let w3 = param(&[hidden, 1], (1.0 / hidden as f32).sqrt(), o.seed + 5)?;
    let params = [&w1, &b1, &w2, &b2, &w3];
    let lr = 0.5f32;
    println!(
        "om train: spiral demo, {} points, MLP 2-{hidden}-{hidden}-1, {} epochs, mode {}, {} thread(s)",
        x.shape()[0],
        o.epochs,
        o.mode,
        o.threads
    );
    let start = Instant::now();
    let mut last = (0.0, 0.0);
    for epoch in 1..=o.epochs {
        let h1 = ops::tanh(&ops::add(&ops::matmul(&x, &w1)?, &b1)?)?;
        let h2 = ops::relu(&ops::add(&ops::matmul(&h1, &w2)?, &b2)?)?;
        let p = ops::sigmoid(&ops::matmul(&h2, &w3)?)?;
        let diff = ops::sub(&p, &y)?;
        let loss = ops::mean(&ops::mul(&diff, &diff)?, None, false)?;
        for w in params {
            w.zero_grad()?;
        }
        loss.backward()?;
        for w in params {
            if let Some(g) = w.grad() {
                g.with_f32(|gv| w.update_f32("sgd", |v| v.iter_mut().zip(gv).for_each(|(v, g)| *v -= lr * g)))?;
            }
        }
        let acc = p.with_f32(|pv| y.with_f32(|yv| pv.iter().zip(yv).filter(|(p, y)| (**p > 0.5) == (**y > 0.5)).count())) as f64
            / y.numel() as f64;
        last = (loss.item()?, acc);
        if epoch == 1 || epoch % 50 == 0 || epoch == o.epochs {
            println!("epoch {epoch:>4}  loss {:.6}  accuracy {:.1}%", last.0, 100.0 * acc);
        }
    }
    println!(
        "final loss {:.6} (bits {:08x}), accuracy {:.1}%, {:.2} s",
        last.0,
        last.0.to_bits(),
        100.0 * last.1,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
