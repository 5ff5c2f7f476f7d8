//! After a real error, the module's own names (`NAME`, `Owned`, `Record`, `Grads`), the
//! wrapper and the method still exist, so the only error reported is the real one.
use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op(saved = [mean: owned, y])]
pub mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor) -> Result<(Tensor, Owned)> {
        let name: &str = NAME;
        let _ = name;
        Ok((x.clone(), Owned { mean: x.clone() }))
    }
    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        let _ = r.mean();
        Ok(())
    }
    fn cases() -> Vec<Case> {
        vec![Case::new("one", vec![Case::input(&[2], -1.0, 1.0, 1)], |x| super::ident_op(&x[0]))]
    }
}

fn main() {
    let x = Tensor::ones(&[2]).unwrap();
    let _ = ident_op(&x);
    use ident_op::Method as _;
    let _ = x.ident_op();
}
