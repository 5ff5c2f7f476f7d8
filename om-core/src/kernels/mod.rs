//! Kernels: the arithmetic behind the operators. Kernels take slices and explicit
//! [`Settings`](crate::compute::Settings); they never read global state, never record
//! autograd history, and take every buffer they need from the pool.

pub mod basic;
pub mod conv;
pub mod elementwise;
pub mod gemm;
pub mod math;
pub mod reduce;
