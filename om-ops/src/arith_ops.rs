//! The registration that makes `&a + &b`, `&a - &b`, `&a * &b`, `&a / &b`, `-&a` and their
//! scalar forms (`&a * 2.0`, `1.0 - &a`, ..) call the operators of this crate (see
//! `om_core::arith`, which defines the operator traits on `Tensor`).

om_core::register_arith!(Arith { add: crate::add, sub: crate::sub, mul: crate::mul, div: crate::div, neg: crate::neg });

om_core::register_arith!(ScalarArith {
    add: crate::add_scalar,
    sub: crate::sub_scalar,
    rsub: crate::rsub_scalar,
    mul: crate::mul_scalar,
    div: crate::div_scalar,
    rdiv: crate::rdiv_scalar,
});

#[cfg(test)]
mod tests {
    use crate::methods::*;
    use om_core::Tensor;

    #[test]
    fn operators_record_like_the_named_functions() {
        let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap().requires_grad().unwrap();
        let b = Tensor::from_vec(vec![3.0, 5.0], &[2]).unwrap();
        let y = ((&a * &b).unwrap() - (-&a).unwrap()).unwrap();
        assert_eq!(y.grad_fn_name(), Some("sub"));
        crate::sum(&y, None, false).unwrap().backward().unwrap();
        // d/da (a·b + a) = b + 1
        assert_eq!(a.grad().unwrap().to_vec(), vec![4.0, 6.0]);
        assert!((&a / &Tensor::ones(&[3]).unwrap()).is_err());
        let z = ((&a + &a).unwrap() * &a).unwrap();
        assert_eq!(z.to_vec(), a.add(&a).unwrap().mul(&a).unwrap().to_vec());
    }
}
