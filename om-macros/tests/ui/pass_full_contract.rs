//! Every feature of the contract in one declaration: conditional and owned slots, `out`,
//! an optional input, attributes; plus a composition, and a private primitive behind a
//! hand-written `#[op_wrapper]` function; the registry shows their calls and rules, and
//! each is a `Tensor` method with the function's arguments.
use om_core::{Case, Result, Tensor};
use om_macros::op;

/// Scales `a` by `b`, plus an optional bias.
#[op(saved = [a if b, b if a, out, scale: owned], attrs = [factor: f32, axes: Vec<isize>])]
mod scaled {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor, bias: Option<&Tensor>, factor: f32, axes: Vec<isize>) -> Result<(Tensor, Owned)> {
        let _ = (b, bias, factor, axes);
        Ok((a.clone(), Owned { scale: a.clone() }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let _: &Tensor = r.out();
        let _: &Tensor = r.scale();
        let _: Result<&Tensor> = r.a();
        let _: f32 = r.factor;
        if d.needs_a() {
            d.a(g.clone());
        }
        if d.needs_bias() {
            d.bias(g.clone());
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![]
    }
}

/// Twice `scaled`.
#[op(composition)]
mod twice {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        scaled(&scaled(x, x, None, 1.0, vec![])?, x, Some(x), 2.0, vec![0])
    }

    fn cases() -> Vec<Case> {
        vec![]
    }
}

mod hidden {
    use super::*;

    /// Identity. Backward: `g`.
    ///
    /// A later paragraph (an example, say) is not part of the rule.
    #[op]
    pub mod checked_identity {
        use super::*;

        pub fn forward(x: &Tensor) -> Result<Tensor> {
            Ok(x.clone())
        }

        fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
            d.x(g.clone());
            Ok(())
        }

        fn cases() -> Vec<Case> {
            vec![]
        }
    }
}

/// Checks `x` first, then calls the private primitive.
#[om_macros::op_wrapper(hidden::checked_identity)]
pub fn checked_identity(x: &Tensor, strict: bool) -> Result<Tensor> {
    let _ = strict;
    hidden::checked_identity(x)
}

fn main() {
    let x = Tensor::ones(&[2]).unwrap();
    let _ = twice(&x).unwrap();
    let _ = checked_identity(&x, true).unwrap();
    let entries = om_core::registry::entries().unwrap();
    let entry = |name: &str| *entries.iter().find(|e| e.name == name).unwrap();
    let call = |name: &str| om_core::registry::signature(entry(name));
    assert_eq!(call("checked_identity"), "checked_identity(x: &Tensor, strict: bool)");
    assert_eq!(entry("checked_identity").summary, "`g`.");
    assert_eq!(
        call("scaled"),
        "scaled(a: &Tensor, b: &Tensor, bias: Option<&Tensor>, factor: f32, axes: Vec<isize>)"
    );
    assert_eq!(entry("scaled").saved, &["a if b", "b if a", "out", "scale (owned)"]);
    assert_eq!(call("twice"), "twice(x: &Tensor)");
    assert_eq!(entry("twice").summary, "");

    // The methods: the function's remaining arguments, the same result.
    use __checked_identity_method::Method as _;
    use scaled::Method as _;
    use twice::Method as _;
    assert_eq!(x.twice().unwrap().to_vec(), twice(&x).unwrap().to_vec());
    assert_eq!(x.scaled(&x, None, 1.0, vec![]).unwrap().to_vec(), vec![1.0, 1.0]);
    assert_eq!(x.checked_identity(true).unwrap().to_vec(), vec![1.0, 1.0]);
    assert!(om_core::registry::has_method(entry("scaled")) && om_core::registry::has_method(entry("checked_identity")));
}
