//! What a PyTorch user writes on day one, against the `onemodel` crate alone (this
//! package's only dependency): a derived module, a training step, and a custom operator
//! declared in the user's crate through the facade and gradient-checked by the library.
//! (The custom-operator part of `shared/api/acceptance.rs`; the rest of that program
//! joins it as the other parts of the public API land.)
use onemodel::prelude::*;

#[derive(Module)]
struct Net {
    conv: nn::Conv2d,
    drop: nn::Dropout,
    fc: nn::Linear,
}

impl Forward for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.conv.forward(x)?.relu()?;
        let n = h.shape()[0] as isize;
        self.fc.forward(&self.drop.forward(&h.reshape(&[n, -1][..])?)?)
    }
}

// A custom operator declared in the user's crate through the facade, in the shape of
// docs/adding-an-op.md (forward, backward, gradient-check cases), composed of public ops.
/// softsign(x) = x / (1 + |x|). Backward: `g / (1 + |x|)²`.
#[onemodel::op(saved = [x])]
pub mod softsign {
    use onemodel::op_support::*;
    use onemodel::prelude::*; // whatever the macro's expansion and the cases need

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
    let net = Net { conv: nn::Conv2d::new(1, 4, 3)?, drop: nn::Dropout::new(0.1)?, fc: nn::Linear::new(4 * 6 * 6, 10)? };
    let x = Tensor::randn(&[8, 1, 8, 8])?;
    let mut opt = optim::SgdConfig::default().lr(0.1).build(net.parameters())?;
    let loss = net.forward(&x)?.mul(&net.forward(&x)?)?.mean(None, false)?;
    opt.zero_grad()?;
    loss.backward()?;
    opt.step()?;
    assert_eq!(net.parameters().len(), 4, "conv.weight, conv.bias, fc.weight, fc.bias");

    // 8. The custom operator is registered, is a method, and passes the library's
    // gradient check (every case, fast and exact mode).
    let s = softsign(&x)?;
    assert_eq!(s.shape(), x.shape());
    use softsign::Method as _; // a user's operator is a method once its trait is in scope
    assert_eq!(x.softsign()?.to_vec(), s.to_vec());
    onemodel::gradcheck::check_op("softsign")?;
    assert!(onemodel::gradcheck::check_op("no_such_op").is_err());

    println!("api acceptance: all blocks ran");
    Ok(())
}
