//! Element types. Float32 carries values and gradients; Int32 carries indices, ids and
//! targets (what `cast` and the index-taking operators need). Int64 ids (PyTorch's
//! `torch.long`) are not a storage type: they enter through one checked narrowing cast,
//! `Tensor::from_vec_i64` (and `io::load` of `I64` tensors), which refuses values outside
//! `i32`; every index-taking operator then applies its usual range checks.

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// Two's-complement 32-bit integer.
    I32,
}

impl DType {
    /// `"f32"` or `"i32"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        4
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
