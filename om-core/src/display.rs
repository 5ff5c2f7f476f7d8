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
    values: &'a [f32],
    shape: &'a [usize],
    strides: crate::layout::Dims,
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

    fn collect(&mut self, dim: usize, base: usize, dtype: DType, int_valued: bool) {
        if dim == self.shape.len() {
            self.cells.push(format_value(self.values[base], dtype, int_valued));
            return;
        }
        for i in kept(self.shape[dim], self.elide).into_iter().flatten() {
            self.collect(dim + 1, base + i * self.strides[dim], dtype, int_valued);
        }
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.to_vec();
        let shape = self.shape();
        let int_valued = values.iter().all(|v| v.fract() == 0.0 && v.abs() < 1e8);
        let mut p = Printer {
            values: &values,
            shape,
            strides: crate::layout::contiguous_strides(shape),
            cells: Vec::new(),
            width: 0,
            elide: values.len() > ELIDE_ABOVE,
        };
        p.collect(0, 0, self.dtype(), int_valued);
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
    fn leaves_show_requires_grad() {
        let t = Tensor::from_vec(vec![0.5], &[1]).unwrap().requires_grad().unwrap();
        assert_eq!(t.to_string(), "tensor([0.5000], requires_grad=True)");
    }
}
