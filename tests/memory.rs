//! The third promise: after warm-up, a training step (zero the gradients, forward, loss,
//! backward, optimizer update) obtains every tensor buffer from the pool — the pool's
//! native allocation count and outstanding bytes do not change. One test per binary,
//! since the pool is process-wide.

use om_core::{pool, Result, Tensor};
use om_ops as ops;
use om_ops::nn::{BatchNorm2d, Conv2d, Conv2dOptions, Forward, Linear, Module};
use om_ops::optim::{Adam, Optimizer};

#[derive(Module)]
struct Net {
    conv: Conv2d,
    bn: BatchNorm2d,
    fc: Linear,
}

#[test]
fn a_warm_training_step_allocates_no_tensor_memory() -> Result<()> {
    let net = Net {
        conv: Conv2d::with_seed(1, 8, [3, 3], Conv2dOptions::default().padding(1), 1)?,
        bn: BatchNorm2d::new(8)?,
        fc: Linear::with_seed(8 * 4 * 4, 10, true, 2)?,
    };
    let mut opt = Adam::new(net.parameter_tensors(), 1e-3)?;
    let x = Tensor::randn_with_seed(&[16, 1, 8, 8], 3)?;
    let targets = Tensor::from_vec_i32((0..16).map(|i| i % 10).collect(), &[16])?;
    let step = |opt: &mut Adam| -> Result<()> {
        opt.zero_grad()?;
        let h = ops::relu(&net.bn.forward(&net.conv.forward(&x)?)?)?;
        let h = ops::max_pool2d(&h, 2)?;
        let logits = net.fc.forward(&ops::reshape(&h, [16, -1])?)?;
        ops::cross_entropy(&logits, &targets, None, Default::default())?.backward()?;
        opt.step()
    };
    for _ in 0..3 {
        step(&mut opt)?;
    }
    let before = pool::stats();
    for _ in 0..5 {
        step(&mut opt)?;
    }
    let after = pool::stats();
    assert_eq!(after.native_allocations, before.native_allocations, "a warm step allocated new buffers: {before:?} -> {after:?}");
    assert_eq!(after.outstanding_bytes, before.outstanding_bytes, "a warm step leaked buffers: {before:?} -> {after:?}");
    Ok(())
}
