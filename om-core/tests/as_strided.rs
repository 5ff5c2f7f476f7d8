//! `Tensor::as_strided`: a view is accepted exactly when every element it reads lies in
//! the storage (PyTorch's bound: `offset + Σ (size − 1)·stride < storage length`, nothing
//! to check for an empty view), and every refusal is an `Error::Shape` naming
//! `as_strided` — never a panic, even where the bound overflows.

use om_core::{Error, Tensor};

/// The message of a refused view, checking that it is a shape error of `as_strided`.
fn refusal(t: &Tensor, shape: &[usize], strides: &[usize], offset: usize) -> String {
    match t.as_strided(shape, strides, offset) {
        Err(e @ Error::Shape { op: "as_strided", .. }) => e.to_string(),
        Err(e) => panic!("{shape:?} / {strides:?} @ {offset}: expected a shape error of as_strided, got {e:?}"),
        Ok(v) => panic!("{shape:?} / {strides:?} @ {offset}: expected a refusal, got {v:?}"),
    }
}

#[test]
fn views_inside_the_storage_read_the_strided_elements() {
    let x = Tensor::arange(0, 12, 1).unwrap();
    // The last element exactly at the end of the storage.
    let v = x.as_strided([3, 2], [4, 1], 2).unwrap();
    assert_eq!(v.to_vec(), vec![2.0, 3.0, 6.0, 7.0, 10.0, 11.0]);
    assert_eq!((v.shape(), v.strides(), v.offset()), (&[3, 2][..], &[4, 1][..], 2));
    assert!(v.shares_storage(&x) && v.is_leaf() && !v.needs_grad());
    // Zero strides repeat an element; a 0-d view reads one element.
    assert_eq!(x.as_strided([2, 3], [0, 0], 11).unwrap().to_vec(), vec![11.0; 6]);
    assert_eq!(x.as_strided([], [], 11).unwrap().item().unwrap(), 11.0);
    // A view of a view is bounded by the storage, not by the view it is taken from.
    let head = x.as_strided([2], [1], 0).unwrap();
    assert_eq!(head.as_strided([2], [5], 1).unwrap().to_vec(), vec![1.0, 6.0]);
    // `i32` storage too.
    let ids = Tensor::from_vec_i32(vec![5, 6, 7], &[3]).unwrap();
    assert_eq!(ids.as_strided([2], [2], 0).unwrap().to_vec_i32(), vec![5, 7]);
}

#[test]
fn a_view_with_no_elements_accepts_any_offset() {
    let x = Tensor::arange(0, 4, 1).unwrap();
    for offset in [0, 4, 1000, usize::MAX] {
        let v = x.as_strided([0, 3], [usize::MAX, usize::MAX], offset).unwrap();
        assert_eq!((v.shape(), v.numel()), (&[0, 3][..], 0));
        assert!(v.to_vec().is_empty() && v.to_contiguous().to_vec().is_empty());
    }
}

#[test]
fn a_view_reading_past_the_end_is_refused() {
    let x = Tensor::arange(0, 12, 1).unwrap();
    let msg = refusal(&x, &[3, 2], &[4, 1], 3);
    assert!(msg.contains("storage element 12") && msg.contains("storage of 12 elements"), "{msg}");
    refusal(&x, &[13], &[1], 0);
    refusal(&x, &[], &[], 12);
    refusal(&x, &[2, 1], &[12, 1], 0);
    // A view cannot reach past its storage through a view taken from it.
    let head = x.as_strided([2], [1], 0).unwrap();
    refusal(&head, &[2], &[11], 1);
}

#[test]
fn mismatched_lengths_are_refused() {
    let x = Tensor::arange(0, 12, 1).unwrap();
    let msg = refusal(&x, &[3, 4], &[4], 0);
    assert!(msg.contains("2 dimensions") && msg.contains("1"), "{msg}");
    refusal(&x, &[], &[1], 0);
}

#[test]
fn overflowing_bounds_are_refused_not_wrapped() {
    let x = Tensor::arange(0, 12, 1).unwrap();
    // The element count overflows.
    refusal(&x, &[usize::MAX, 2], &[0, 0], 0);
    // (size − 1)·stride overflows, and wrapping would land inside the storage.
    refusal(&x, &[3], &[usize::MAX / 2 + 1], 0);
    // offset + extent overflows.
    refusal(&x, &[2], &[1], usize::MAX);
    refusal(&x, &[2, 2], &[usize::MAX / 2, usize::MAX / 2], 2);
}
