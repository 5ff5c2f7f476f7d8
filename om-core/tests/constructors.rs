//! The constructors a PyTorch user reaches for: `arange`, `linspace`, `eye`, the `*_like`
//! family, `randint` and `randperm`. Expected values come from the definitions (PyTorch's
//! length and fill formulas, written out here in `f64`/`f32` as the docs state them), and
//! every draw is reproducible under `rng::manual_seed`.

use om_core::{rng, DType, Error, Tensor};

/// The message of an argument error, checking that it names `op`.
fn argument_error(r: om_core::Result<Tensor>, op: &str) -> String {
    match r {
        Err(e @ Error::Argument { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(op), "{msg} does not name {op}");
            msg
        }
        Err(e) => panic!("expected an argument error of {op}, got {e:?}"),
        Ok(t) => panic!("expected an argument error of {op}, got {t:?}"),
    }
}

#[test]
fn arange_has_pytorchs_length_and_values() {
    for (start, end, step) in
        [(0.0f64, 1.0, 0.25), (0.0, 1.0, 0.1), (1.0, 2.5, 0.5), (-3.0, 4.0, 0.7), (3.0, 0.0, -1.5), (2.0, -2.0, -0.3), (5.0, 5.0, 1.0)]
    {
        let t = Tensor::arange(start, end, step).unwrap();
        let len = ((end - start) / step).ceil() as usize;
        assert_eq!(t.shape(), &[len], "arange({start}, {end}, {step})");
        let want: Vec<f32> = (0..len).map(|i| (start + step * i as f64) as f32).collect();
        assert_eq!(t.to_vec(), want, "arange({start}, {end}, {step})");
        assert_eq!(t.dtype(), DType::F32);
    }
    assert_eq!(Tensor::arange(0.0, 1.0, 0.25).unwrap().to_vec(), vec![0.0, 0.25, 0.5, 0.75]);
    // Integers and f32 convert as f64 does.
    assert_eq!(Tensor::arange(0, 4, 1).unwrap().to_vec(), vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!(Tensor::arange(0.5f32, 2.0f32, 0.5f32).unwrap().to_vec(), vec![0.5, 1.0, 1.5]);
}

#[test]
fn arange_refuses_a_zero_step_a_wrong_sign_and_overflow() {
    assert!(argument_error(Tensor::arange(0.0, 1.0, 0.0), "arange").contains("nonzero"));
    assert!(argument_error(Tensor::arange(0.0, 1.0, -0.5), "arange").contains("sign"));
    assert!(argument_error(Tensor::arange(1.0, 0.0, 0.5), "arange").contains("sign"));
    argument_error(Tensor::arange(0.0, f64::INFINITY, 1.0), "arange");
    argument_error(Tensor::arange(f64::NAN, 1.0, 1.0), "arange");
    argument_error(Tensor::arange(0.0, 1.0, f64::NAN), "arange");
    argument_error(Tensor::arange(0.0, 1e300, 1e-300), "arange");
    // A length that fits usize but not memory is refused too, without a panic.
    assert!(Tensor::arange(0.0, 1e18, 1.0).is_err());
}

#[test]
fn linspace_fills_from_both_ends() {
    for (start, end, steps) in [(0.0f32, 1.0f32, 5usize), (-1.0, 1.0, 101), (0.1, 0.7, 7), (3.0, -2.0, 10), (2.0, 2.0, 4)] {
        let t = Tensor::linspace(start, end, steps).unwrap();
        assert_eq!(t.shape(), &[steps]);
        let step = (end - start) / (steps - 1) as f32;
        let want: Vec<f32> =
            (0..steps).map(|i| if i < steps / 2 { start + step * i as f32 } else { end - step * (steps - 1 - i) as f32 }).collect();
        let v = t.to_vec();
        assert_eq!(v, want, "linspace({start}, {end}, {steps})");
        assert_eq!((v[0], v[steps - 1]), (start, end));
    }
    assert_eq!(Tensor::linspace(0.0, 1.0, 5).unwrap().to_vec(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    assert_eq!(Tensor::linspace(4.0, 9.0, 1).unwrap().to_vec(), vec![4.0]);
    assert_eq!(Tensor::linspace(4.0, 9.0, 0).unwrap().shape(), &[0]);
    assert!(Tensor::linspace(0.0, 1.0, usize::MAX).is_err());
}

#[test]
fn eye_and_the_like_family() {
    let e = Tensor::eye(3).unwrap();
    assert_eq!(e.shape(), &[3, 3]);
    assert_eq!(e.to_vec(), vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(Tensor::eye_rect(3, 2).unwrap().to_vec(), vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(Tensor::eye_rect(2, 4).unwrap().to_vec(), vec![1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(Tensor::eye(0).unwrap().shape(), &[0, 0]);
    assert!(Tensor::eye(usize::MAX).is_err());

    let x = Tensor::randn_with_seed(&[2, 3], 1).unwrap();
    let t = x.as_strided([3, 2], [1, 3], 0).unwrap();
    for like in [&x, &t] {
        assert_eq!(Tensor::zeros_like(like).unwrap().to_vec(), vec![0.0; 6]);
        assert_eq!(Tensor::ones_like(like).unwrap().to_vec(), vec![1.0; 6]);
        assert_eq!(Tensor::full_like(like, -2.5).unwrap().to_vec(), vec![-2.5; 6]);
        assert_eq!(Tensor::zeros_like(like).unwrap().shape(), like.shape());
    }
    let ids = Tensor::from_vec_i32(vec![1, 2], &[2]).unwrap();
    let z = Tensor::zeros_like(&ids).unwrap();
    assert_eq!((z.dtype(), z.to_vec_i32()), (DType::I32, vec![0, 0]));
    assert_eq!(Tensor::full_like(&ids, 2.7).unwrap().to_vec_i32(), vec![2, 2]);
    assert!(matches!(Tensor::randn_like(&ids), Err(Error::DType { op: "randn_like", .. })));
    assert!(matches!(Tensor::rand_like(&ids), Err(Error::DType { op: "rand_like", .. })));
}

#[test]
fn random_constructors_draw_from_the_default_stream() {
    let x = Tensor::zeros(&[4, 5]).unwrap();
    let draw = || {
        (
            Tensor::randn_like(&x).unwrap().to_vec(),
            Tensor::rand_like(&x).unwrap().to_vec(),
            Tensor::randint(-3, 4, &[50]).unwrap().to_vec_i32(),
            Tensor::randperm(20).unwrap().to_vec_i32(),
        )
    };
    rng::manual_seed(42);
    let a = draw();
    let b = draw();
    rng::manual_seed(42);
    assert_eq!(draw(), a);
    assert_ne!(a, b, "two draws in turn differ");
    assert_eq!(a.0.len(), 20);
    assert!(a.1.iter().all(|v| (0.0..1.0).contains(v)));
    // The same values as the shape-taking constructors and the seeded variants.
    rng::manual_seed(7);
    let (n, u) = (Tensor::randn_like(&x).unwrap().to_vec(), Tensor::rand_like(&x).unwrap().to_vec());
    rng::manual_seed(7);
    assert_eq!((Tensor::randn(&[4, 5]).unwrap().to_vec(), Tensor::rand(&[4, 5]).unwrap().to_vec()), (n, u));
    rng::manual_seed(7);
    let seed = rng::next_seed();
    rng::manual_seed(7);
    assert_eq!(Tensor::randint(0, 10, &[9]).unwrap().to_vec_i32(), Tensor::randint_with_seed(0, 10, &[9], seed).unwrap().to_vec_i32());
    rng::manual_seed(7);
    assert_eq!(Tensor::randperm(9).unwrap().to_vec_i32(), Tensor::randperm_with_seed(9, seed).unwrap().to_vec_i32());
}

#[test]
fn randint_stays_in_range_and_reaches_every_value() {
    for (low, high) in [(0, 10), (-5, -2), (7, 8), (i32::MIN, i32::MAX)] {
        let t = Tensor::randint_with_seed(low, high, &[4000], 3).unwrap();
        assert_eq!((t.dtype(), t.shape()), (DType::I32, &[4000][..]));
        let v = t.to_vec_i32();
        assert!(v.iter().all(|&k| low <= k && k < high), "randint({low}, {high})");
        if (high as i64 - low as i64) <= 10 {
            assert!((low..high).all(|k| v.contains(&k)), "randint({low}, {high}) misses a value");
        }
    }
    assert_eq!(Tensor::randint(0, 3, &[2, 0]).unwrap().shape(), &[2, 0]);
    assert!(argument_error(Tensor::randint(3, 3, &[1]), "randint").contains("from=3"));
    argument_error(Tensor::randint_with_seed(5, -5, &[1], 0), "randint");
    assert!(Tensor::randint(0, 2, &[usize::MAX, 2]).is_err());
}

#[test]
fn randperm_is_a_permutation() {
    for n in [0, 1, 2, 7, 1000] {
        for seed in 0..5 {
            let p = Tensor::randperm_with_seed(n, seed).unwrap();
            assert_eq!((p.dtype(), p.shape()), (DType::I32, &[n][..]));
            let mut v = p.to_vec_i32();
            v.sort_unstable();
            assert_eq!(v, (0..n as i32).collect::<Vec<_>>(), "randperm({n}) with seed {seed}");
        }
    }
    // Shuffled, not the identity.
    assert_ne!(Tensor::randperm_with_seed(1000, 1).unwrap().to_vec_i32(), (0..1000).collect::<Vec<_>>());
    argument_error(Tensor::randperm(i32::MAX as usize + 2), "randperm");
}
