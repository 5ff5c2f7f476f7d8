//! Reading and writing named tensors as safetensors files (the format PyTorch's
//! `safetensors` package writes): weights files, and the oracle data in `testdata/`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::path::Path;

const OP: &str = "safetensors";

/// Parses safetensors bytes into named tensors (`F32` and `I32`; `I64` ids are narrowed to
/// `i32` with a range check, `F64` values rounded to `f32`, `U8` values widened to `i32`).
pub fn from_bytes(bytes: &[u8]) -> Result<BTreeMap<String, Tensor>> {
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| Error::argument(OP, format!("invalid safetensors data: {e}")))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let shape = view.shape().to_vec();
        let data = view.data();
        let t = match view.dtype() {
            safetensors::Dtype::F32 => {
                let v: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                Tensor::from_vec(v, &shape)?
            }
            safetensors::Dtype::F64 => {
                let v: Vec<f32> = data.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).collect();
                Tensor::from_vec(v, &shape)?
            }
            safetensors::Dtype::I32 => {
                let v: Vec<i32> = data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                Tensor::from_vec_i32(v, &shape)?
            }
            safetensors::Dtype::U8 => Tensor::from_vec_i32(data.iter().map(|&b| b as i32).collect(), &shape)?,
            safetensors::Dtype::I64 => {
                let v: Vec<i32> = data
                    .chunks_exact(8)
                    .map(|c| {
                        let x = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                        i32::try_from(x).map_err(|_| Error::argument(OP, format!("`{name}`: value {x} does not fit i32")))
                    })
                    .collect::<Result<_>>()?;
                Tensor::from_vec_i32(v, &shape)?
            }
            other => return Err(Error::argument(OP, format!("`{name}` has unsupported dtype {other:?}"))),
        };
        out.insert(name, t);
    }
    Ok(out)
}

/// Reads a safetensors file.
pub fn load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::argument(OP, format!("cannot read {}: {e}", path.display())))?;
    from_bytes(&bytes)
}

/// Serialises named tensors (in name order) to safetensors bytes.
pub fn to_bytes<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<Vec<u8>> {
    let mut owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in tensors {
        let (dtype, data) = match t.dtype() {
            DType::F32 => (safetensors::Dtype::F32, t.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect()),
            DType::I32 => (safetensors::Dtype::I32, t.to_vec_i32().iter().flat_map(|v| v.to_le_bytes()).collect()),
        };
        owned.push((name.to_string(), dtype, t.shape().to_vec(), data));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, data)| {
            safetensors::tensor::TensorView::new(*d, s.clone(), data)
                .map(|v| (n.clone(), v))
                .map_err(|e| Error::argument(OP, format!("`{n}`: {e}")))
        })
        .collect::<Result<_>>()?;
    safetensors::serialize(views, &None).map_err(|e| Error::argument(OP, format!("cannot serialise: {e}")))
}

/// Writes named tensors to a safetensors file.
pub fn save<'a>(path: impl AsRef<Path>, tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_bytes(tensors)?;
    std::fs::write(path, bytes).map_err(|e| Error::argument(OP, format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_names_shapes_dtypes_and_bits() {
        let a = Tensor::from_vec(vec![1.5, -0.0, f32::INFINITY, 3.25e-39], &[2, 2]).unwrap();
        let b = Tensor::from_vec_i32(vec![7, -8, 9], &[3]).unwrap();
        let bytes = to_bytes([("a", &a), ("b", &b)]).unwrap();
        let back = from_bytes(&bytes).unwrap();
        assert_eq!(back["a"].shape(), &[2, 2]);
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back["a"]), bits(&a));
        assert_eq!(back["b"].dtype(), DType::I32);
        assert_eq!(back["b"].to_vec_i32(), vec![7, -8, 9]);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(from_bytes(b"not a safetensors file").is_err());
    }
}
