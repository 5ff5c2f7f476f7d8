//! Optimizer updates run over chunks of each parameter on the thread team
//! (`optim::params::update_chunks`). A parameter of several chunks must be updated exactly
//! as the same values split into two parameters, whose chunks start at other offsets, at 1
//! and 2 threads, for every optimizer and the options that use each state buffer: a chunk
//! reading another chunk's gradient or state would move the bits.

use om_core::{Compute, Result, Tensor};
use om_ops::methods::*;
use om_ops::optim::*;

/// Elements of the parameter: three chunks of the update (32 Ki each), the last partial.
const N: usize = 70_001;
/// Where the split version cuts the values into two parameters.
const SPLIT: usize = 1_000;

type Make = fn(Vec<Tensor>) -> Result<Box<dyn Optimizer>>;

/// The parameter values after three steps of `make`'s optimizer, with gradients
/// `(step + 1)·c` for seeded `c`, as one parameter or split in two, at `threads` threads.
fn train(make: Make, split: bool, threads: usize) -> Result<Vec<u32>> {
    Compute::set_threads(threads)?;
    let (values, coefs) = (Tensor::randn_with_seed([N], 1)?.to_vec(), Tensor::randn_with_seed([N], 2)?.to_vec());
    let cuts: &[(usize, usize)] = if split { &[(0, SPLIT), (SPLIT, N)] } else { &[(0, N)] };
    let params =
        cuts.iter().map(|&(a, b)| Tensor::from_vec(values[a..b].to_vec(), [b - a])?.requires_grad()).collect::<Result<Vec<_>>>()?;
    let mut opt = make(params.clone())?;
    for step in 0..3 {
        opt.zero_grad()?;
        let mut loss = Tensor::zeros([1])?;
        for (p, &(a, b)) in params.iter().zip(cuts) {
            let c = Tensor::from_vec(coefs[a..b].iter().map(|c| c * (step + 1) as f32).collect(), [b - a])?;
            loss = loss.add(&p.mul(&c)?.sum(None, false)?)?;
        }
        loss.backward()?;
        opt.step()?;
    }
    Ok(params.iter().flat_map(|p| p.to_vec()).map(f32::to_bits).collect())
}

#[test]
fn a_parameter_of_several_chunks_updates_as_its_parts_do_at_any_thread_count() -> Result<()> {
    let cases: [(&str, Make); 8] = [
        ("sgd", |p| Ok(Box::new(SgdConfig::default().lr(0.1).build(p)?))),
        ("sgd momentum", |p| Ok(Box::new(SgdConfig::default().lr(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01).build(p)?))),
        ("sgd nesterov", |p| Ok(Box::new(SgdConfig::default().lr(0.1).momentum(0.9).nesterov(true).build(p)?))),
        ("adam", |p| Ok(Box::new(AdamConfig::default().lr(0.01).weight_decay(0.01).build(p)?))),
        ("adamw", |p| Ok(Box::new(AdamConfig::adamw().lr(0.01).build(p)?))),
        ("rmsprop", |p| Ok(Box::new(RMSpropConfig::default().lr(0.01).build(p)?))),
        ("rmsprop centered momentum", |p| {
            Ok(Box::new(RMSpropConfig::default().lr(0.01).momentum(0.9).centered(true).weight_decay(0.01).build(p)?))
        }),
        ("adagrad", |p| Ok(Box::new(AdagradConfig::default().lr(0.1).lr_decay(0.01).weight_decay(0.01).build(p)?))),
    ];
    for (name, make) in cases {
        let reference = train(make, true, 1)?;
        let start = Tensor::randn_with_seed([N], 1)?.to_vec();
        assert!(reference.iter().zip(&start).all(|(&r, &s)| r != s.to_bits()), "{name}: some values did not move");
        for (split, threads) in [(false, 1), (false, 2), (true, 2)] {
            assert!(
                train(make, split, threads)? == reference,
                "{name}: split {split}, {threads} thread(s) differ from the split run at 1 thread"
            );
        }
    }
    Compute::set_threads(1)
}
