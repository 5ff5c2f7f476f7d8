//! `Display` for tensors, in PyTorch's style: nested brackets, values aligned to a common
//! width, and only the first and last three entries of any dimension longer than six
//! printed once the tensor has more than 1,000 elements.

use crate::dtype::DType;
use crate::tensor::Tensor;
use std::fmt;

/// Elements above which long dimensions are elided.
const ELIDE_ABOVE: usize = 1000;
/// Entries kept at each end of an elided dimension.
const EDGE: usize = 3;

fn format_value(v: f32, dtype: DType, int_valued: bool) -> String {
    match dtype {
        DType::I32 => format!("{}", v as i64),
        DType::F32 if int_valued => format!("{v:.0}."),
        DType::F32 => {
            let a = v.abs();
            if v.is_finite() && a != 0.0 && !(1e-4..1e8).contains(&a) {
                format!("{v:.4e}")
            } else {
                format!("{v:.4}")
            }
        }
    }
}

/// Indices kept along a dimension of size `n`.
fn kept(n: usize, elide: bool) -> Vec<Option<usize>> {
    if elide && n > 2 * EDGE {
        (0..EDGE).map(Some).chain(std::iter::once(None)).chain((n - EDGE..n).map(Some)).collect()
    } else {
        (0..n).map(Some).collect()
    }
}

struct Printer<'a> {
    shape: &'a [usize],
    cells: Vec<String>,
    width: usize,
    elide: bool,
}

impl Printer<'_> {
    fn write(&self, out: &mut String, dim: usize, indent: usize, cell: &mut usize) {
        if dim == self.shape.len() {
            out.push_str(&format!("{:>w$}", self.cells[*cell], w = self.width));
            *cell += 1;
            return;
        }
        out.push('[');
        let idx = kept(self.shape[dim], self.elide);
        let last = dim + 1 == self.shape.len();
        for (j, i) in idx.iter().enumerate() {
            if j > 0 {
                out.push(',');
                if last {
                    out.push(' ');
                } else {
                    out.push_str(&"\n".repeat(self.shape.len() - dim - 1));
                    out.push_str(&" ".repeat(indent + 1));
                }
            }
            match i {
                Some(_) => self.write(out, dim + 1, indent + 1, cell),
                None => out.push_str("..."),
            }
        }
        out.push(']');
    }
}

/// The storage offsets of the printed elements (the kept indices of each dimension), in
/// row-major order: at most `(2·EDGE)^rank` of them when elided, never the whole tensor.
fn printed_offsets(shape: &[usize], strides: &[usize], offset: usize, elide: bool, out: &mut Vec<usize>) {
    fn walk(shape: &[usize], strides: &[usize], dim: usize, base: usize, elide: bool, out: &mut Vec<usize>) {
        if dim == shape.len() {
            out.push(base);
            return;
        }
        for i in kept(shape[dim], elide).into_iter().flatten() {
            walk(shape, strides, dim + 1, base + i * strides[dim], elide, out);
        }
    }
    if !shape.contains(&0) {
        walk(shape, strides, 0, offset, elide, out);
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = self.shape();
        // Only the printed elements are read (through the strides), so an expanded view far
        // larger than memory prints its summary as PyTorch does.
        let elide = self.numel() > ELIDE_ABOVE;
        let mut offsets = Vec::new();
        printed_offsets(shape, self.strides(), self.offset(), elide, &mut offsets);
        let values: Vec<f32> = {
            let storage = self.0.storage.read();
            match self.dtype() {
                DType::F32 => offsets.iter().map(|&o| storage.f32()[o]).collect(),
                DType::I32 => offsets.iter().map(|&o| storage.i32()[o] as f32).collect(),
            }
        };
        let int_valued = values.iter().all(|v| v.fract() == 0.0 && v.abs() < 1e8);
        let cells = values.iter().map(|&v| format_value(v, self.dtype(), int_valued)).collect();
        let mut p = Printer { shape, cells, width: 0, elide };
        p.width = p.cells.iter().map(String::len).max().unwrap_or(0);
        let mut body = String::new();
        p.write(&mut body, 0, "tensor(".len(), &mut 0);
        write!(f, "tensor({body}")?;
        if self.dtype() != DType::F32 {
            write!(f, ", dtype={}", self.dtype())?;
        }
        if let Some(name) = self.grad_fn_name() {
            write!(f, ", grad_fn={name}")?;
        } else if self.needs_grad() {
            write!(f, ", requires_grad=True")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_tensors_print_every_value_aligned() {
        let t = Tensor::from_vec(vec![1.5, -2.0, 3.25, 40.0], &[2, 2]).unwrap();
        assert_eq!(t.to_string(), "tensor([[ 1.5000, -2.0000],\n        [ 3.2500, 40.0000]])");
        let i = Tensor::from_vec_i32(vec![1, 2, 3], &[3]).unwrap();
        assert_eq!(i.to_string(), "tensor([1, 2, 3], dtype=i32)");
        assert_eq!(Tensor::scalar(2.0).to_string(), "tensor(2.)");
    }

    #[test]
    fn large_tensors_are_elided() {
        let t = Tensor::arange(0, 2000, 1).unwrap();
        assert_eq!(t.to_string(), "tensor([   0.,    1.,    2., ..., 1997., 1998., 1999.])");
    }

    #[test]
    fn huge_expanded_views_print_a_summary_without_materialising() {
        let big = 1usize << 30;
        let t = Tensor::ones(&[1, 1]).unwrap().as_strided([big, big], [0, 0], 0).unwrap();
        let s = t.to_string();
        assert!(s.starts_with("tensor([[1., 1., 1.,  ..., 1., 1., 1.],") || s.starts_with("tensor([[1., 1., 1., ..., 1., 1., 1.],"), "{s}");
        assert!(s.contains("...,\n"), "{s}");
        // A transposed view prints its own order.
        let x = Tensor::arange(0, 6, 1).unwrap().as_strided([3, 2], [1, 3], 0).unwrap();
        assert_eq!(x.to_string(), "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])");
    }

    #[test]
    fn leaves_show_requires_grad() {
        let t = Tensor::from_vec(vec![0.5], &[1]).unwrap().requires_grad().unwrap();
        assert_eq!(t.to_string(), "tensor([0.5000], requires_grad=True)");
    }
}
