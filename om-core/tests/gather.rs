//! Strided gathers (`to_contiguous`, `to_vec`) give the row-major values of the view for
//! every layout they special-case: contiguous rows, transposed matrices (tiled), and
//! general strides.

use om_core::Tensor;

fn expected(data: &[f32], shape: &[usize], strides: &[usize], offset: usize) -> Vec<f32> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut i| {
            let mut at = offset;
            for (&d, &s) in shape.iter().zip(strides).rev() {
                at += (i % d) * s;
                i /= d;
            }
            data[at]
        })
        .collect()
}

#[test]
fn gathers_match_the_definition() {
    let data: Vec<f32> = (0..4000).map(|v| v as f32 * 0.5 - 7.0).collect();
    let base = Tensor::from_vec(data.clone(), &[4000]).unwrap();
    let layouts: &[(&[usize], &[usize], usize)] = &[
        (&[37, 53], &[1, 37], 0),       // transposed [53, 37]
        (&[64, 40], &[1, 64], 3),       // transposed with an offset
        (&[9, 17], &[1, 200], 11),      // transposed with a row gap
        (&[2, 1], &[1, 2], 0),          // a size-1 column
        (&[8, 8], &[1, 8], 0),          // one AVX block exactly
        (&[5, 7, 9], &[63, 1, 7], 1),   // batch of transposes
        (&[6, 10], &[20, 2], 0),        // strided rows
        (&[3, 4, 5], &[100, 20, 1], 2), // contiguous rows with gaps
    ];
    for &(shape, strides, offset) in layouts {
        let view = base.as_strided(shape, strides, offset).unwrap();
        let want = expected(&data, shape, strides, offset);
        assert_eq!(view.to_contiguous().to_vec(), want, "to_contiguous of {shape:?} / {strides:?}");
        assert_eq!(view.to_vec(), want, "to_vec of {shape:?} / {strides:?}");
    }
}
