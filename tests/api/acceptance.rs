//! A verbatim copy of `shared/api/acceptance.rs` (only rustfmt's layout differs), the
//! contract of the public API: this package's only dependency is `onemodel`.
//!
//! What a PyTorch user writes on day one, against the `onemodel` crate alone (no om-core,
//! om-ops or om-macros dependency). Copy it into the project as a test program; it must
//! compile and run to the end. Each block is one capability. Where Rust forces another
//! spelling of a call, keep the capability, change the spelling, and say so in the note.
use onemodel::prelude::*;

#[derive(Module)]
struct Net {
    conv: nn::Conv2d,
    pool: nn::MaxPool2d,
    drop: nn::Dropout,
    fc: nn::Linear,
}

impl Forward for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.pool.forward(&self.conv.forward(x)?.relu()?)?;
        self.fc.forward(&self.drop.forward(&h.flatten(1)?)?)
    }
}

// A custom operator declared in the user's crate through the facade, in the shape of
// docs/adding-an-op.md (forward, backward, gradient-check cases), composed of public ops.
/// softsign(x) = x / (1 + |x|). Backward: `g / (1 + |x|)²`.
#[onemodel::op(saved = [x])]
pub mod softsign {
    use onemodel::op_support::*; // whatever the macro's expansion and the cases need
    use onemodel::prelude::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        x.div(&x.abs()?.add_scalar(1.0)?)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let s = r.x().abs()?.add_scalar(1.0)?;
        d.x(g.div(&s.mul(&s)?)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![Case::new("contiguous", vec![Case::input(&[3, 4], -2.0, 2.0, 1)], |x| super::softsign(&x[0]))]
    }
}

fn main() -> Result<()> {
    manual_seed(0);

    // 1. Layers with PyTorch's defaults, a derived module, a training step.
    let net = Net {
        conv: nn::Conv2d::new(1, 4, 3)?, // stride 1, padding 0, bias
        pool: nn::MaxPool2d::new(2)?,    // stride = kernel
        drop: nn::Dropout::new(0.1)?,
        fc: nn::Linear::new(4 * 3 * 3, 10)?,
    };
    let x = Tensor::randn(&[8, 1, 8, 8])?;
    let y = Tensor::randint(0, 10, &[8])?;
    let mut opt = optim::SgdConfig::default().lr(0.1).build(net.parameters())?;
    let loss = ops::cross_entropy(&net.forward(&x)?, &y, None, Default::default())?;
    opt.zero_grad()?;
    loss.backward()?;
    opt.step()?;

    // 2. One axis convention for every reduction: one axis, several, or all (None).
    assert_eq!(x.sum(1, false)?.shape(), &[8, 8, 8]);
    assert_eq!(x.sum([2, 3], true)?.shape(), &[8, 1, 1, 1]);
    assert_eq!(x.sum(None, false)?.shape(), &[] as &[usize]);
    assert_eq!(x.mean([-2, -1], false)?.shape(), &[8, 1]);
    assert_eq!(x.amax([2, 3], false)?.shape(), &[8, 1]);
    assert_eq!(x.logsumexp([2, 3], false)?.shape(), &[8, 1]);
    assert_eq!(x.var([2, 3], false)?.shape(), &[8, 1]); // unbiased, as torch.var
    let (values, indices) = x.max_dim(3, false)?;
    assert_eq!((values.shape(), indices.shape()), (&[8, 1, 8][..], &[8, 1, 8][..]));
    assert_eq!(x.argmax(-1, false)?.shape(), &[8, 1, 8]);
    assert_eq!(x.softmax(-1)?.shape(), x.shape());

    // 3. Shapes: -1 and a shape read from another tensor both work.
    let r = x.reshape([8, -1])?;
    assert_eq!(r.shape(), &[8, 64]);
    assert_eq!(r.reshape(x.shape())?.shape(), x.shape());
    assert_eq!(x.flatten(1)?.unsqueeze(0)?.squeeze(0)?.shape(), &[8, 64]);

    // 4. Functional calls with PyTorch's defaults and named options, no positional flags.
    assert_eq!(ops::max_pool2d(&x, 2)?.shape(), &[8, 1, 4, 4]);
    let p = ops::max_pool2d(&x, ops::Pool2d::new(3).stride(2).padding(1).ceil_mode(true))?;
    assert_eq!(p.shape(), &[8, 1, 5, 5]);
    assert_eq!(ops::avg_pool2d(&x, 2)?.shape(), &[8, 1, 4, 4]);
    let w = Tensor::randn(&[4, 1, 3, 3])?;
    assert_eq!(ops::conv2d(&x, &w, None, ops::Conv2dOptions::default().padding(1))?.shape(), &[8, 4, 8, 8]);

    // 5. Every operator is also a method; scalars and optional bounds read naturally.
    let z = x.sin()?.clamp(-0.5, 0.5)?.exp()?.log()?.pow(2.0)?;
    assert_eq!(z.shape(), x.shape());
    let _ = x.clamp(None, 0.0)?;

    // 6. Losses: PyTorch's default reduction, and a shape mismatch is an error, not a broadcast.
    let a = Tensor::randn(&[8, 1])?;
    let b = Tensor::randn(&[8])?;
    assert!(ops::mse_loss(&a, &a, Default::default())?.shape().is_empty());
    assert!(ops::mse_loss(&a, &b, Default::default()).is_err());
    let _ = ops::binary_cross_entropy(&a.sigmoid()?, &a.sigmoid()?, Some(&a.abs()?), Reduction::Sum)?;

    // 7. Constructors a PyTorch user reaches for.
    assert_eq!(Tensor::arange(0.0, 1.0, 0.25)?.to_vec(), vec![0.0, 0.25, 0.5, 0.75]);
    assert_eq!(Tensor::linspace(0.0, 1.0, 5)?.shape(), &[5]);
    assert_eq!(Tensor::full(&[2, 2], 3.0)?.to_vec(), vec![3.0; 4]);
    assert_eq!(Tensor::eye(3)?.sum(None, false)?.item()?, 3.0);
    assert_eq!(Tensor::zeros_like(&x)?.shape(), x.shape());
    assert_eq!(Tensor::randperm(5)?.shape(), &[5]);

    // 8. The custom operator is registered and passes the library's gradient check.
    let s = softsign(&x)?;
    assert_eq!(s.shape(), x.shape());
    onemodel::gradcheck::check_op("softsign")?;

    println!("api acceptance: all blocks ran");
    Ok(())
}
