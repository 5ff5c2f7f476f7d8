//! Models as trees of named tensors: the [`Module`] trait (parameters, buffers,
//! training/evaluation mode), [`Forward`] for modules applied to one tensor (what a
//! `Sequential` chains), and [`Tensors`] for the fields that hold tensors directly.
//!
//! Names are PyTorch's state-dict names: a child's names are prefixed by the field that
//! holds it (`conv1.weight`), the elements of a `Vec` or array by their index
//! (`layers.0.weight`), an `Option` adds nothing (a `None` child has no names). Modules
//! are usually written with `#[derive(Module)]` (om-macros, re-exported as
//! `om_ops::nn::Module`), which implements the visits from the struct's fields; this
//! module also implements [`Module`] for `Box`, `Option`, `Vec` and arrays of modules.
//!
//! ```
//! use om_core::module::{Module, Tensors};
//! use om_core::Tensor;
//!
//! // What `#[derive(Module)]` writes for `struct Scale { #[module(param)] w: Tensor }`.
//! struct Scale {
//!     w: Tensor,
//! }
//! impl Module for Scale {
//!     fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
//!         self.w.visit_tensors("w", f);
//!     }
//! }
//! let layers = vec![Scale { w: Tensor::ones(&[2])? }, Scale { w: Tensor::ones(&[3])? }];
//! let names: Vec<String> = layers.parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["0.w", "1.w"]);
//! # Ok::<(), om_core::Error>(())
//! ```

use crate::{Result, Tensor};

/// A layer or model: its named trainable parameters and (non-trainable) buffers, in a
/// stable order, and its training flag. Optimizers take [`Module::parameter_tensors`];
/// weights files hold the parameters and the buffers under these names.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a module",
    label = "`#[derive(Module)]` treats this field as a child module",
    note = "derive or implement `Module` for it, or mark the field `#[module(skip)]` if it holds no parameters"
)]
pub trait Module {
    /// Calls `f` with the name and tensor of every trainable parameter, in a stable order.
    fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor));

    /// Calls `f` with the name and tensor of every buffer: state that is saved with the
    /// weights but not trained (batch-norm running statistics).
    fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        let _ = f;
    }

    /// Switches this module and its children between training (`true`, the default) and
    /// evaluation behaviour (batch norm uses its running statistics, dropout is off).
    fn set_training(&mut self, training: bool) {
        let _ = training;
    }

    /// The trainable parameters, named (`weight`, `conv1.bias`, ...) in a stable order.
    fn parameters(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit_parameters(&mut |n, t| out.push((n.to_string(), t.clone())));
        out
    }

    /// The buffers, named and ordered like [`Module::parameters`].
    fn buffers(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit_buffers(&mut |n, t| out.push((n.to_string(), t.clone())));
        out
    }

    /// The parameter tensors alone, in the order of [`Module::parameters`] (what an
    /// optimizer takes).
    fn parameter_tensors(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        self.visit_parameters(&mut |_, t| out.push(t.clone()));
        out
    }

    /// Training mode (`set_training(true)`, PyTorch's `module.train()`).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode (`set_training(false)`, PyTorch's `module.eval()`).
    fn eval(&mut self) {
        self.set_training(false);
    }
}

/// A module applied to one tensor, `y = m(x)`: the layers a `Sequential` chains.
/// Layers with several inputs or outputs (LSTM, attention) have inherent `forward`s.
pub trait Forward: Module {
    /// Applies the module to `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

/// A field that holds tensors directly (`#[module(param)]` / `#[module(buffer)]` fields):
/// a [`Tensor`] named after the field, an `Option<Tensor>` (nothing when `None`), a `Vec`
/// or array of tensors (`name.0`, `name.1`, ...).
#[diagnostic::on_unimplemented(
    message = "`{Self}` holds no tensors",
    label = "`#[module(param)]` and `#[module(buffer)]` go on tensor fields",
    note = "use them on `Tensor`, `Option<Tensor>`, `Vec<Tensor>` or `[Tensor; N]` fields; a child module needs no attribute"
)]
pub trait Tensors {
    /// Calls `f` with every tensor held, named from `name`.
    fn visit_tensors(&self, name: &str, f: &mut dyn FnMut(&str, &Tensor));
}

/// `prefix.name`, the name of a child's tensor.
pub fn join(prefix: &str, name: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + 1 + name.len());
    s.push_str(prefix);
    s.push('.');
    s.push_str(name);
    s
}

impl Tensors for Tensor {
    fn visit_tensors(&self, name: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        f(name, self);
    }
}

impl Tensors for Option<Tensor> {
    fn visit_tensors(&self, name: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        if let Some(t) = self {
            f(name, t);
        }
    }
}

impl Tensors for [Tensor] {
    fn visit_tensors(&self, name: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        for (i, t) in self.iter().enumerate() {
            f(&join(name, &i.to_string()), t);
        }
    }
}

impl Tensors for Vec<Tensor> {
    fn visit_tensors(&self, name: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        self.as_slice().visit_tensors(name, f);
    }
}

impl<const N: usize> Tensors for [Tensor; N] {
    fn visit_tensors(&self, name: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        self.as_slice().visit_tensors(name, f);
    }
}

impl<M: Module + ?Sized> Module for Box<M> {
    fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        (**self).visit_parameters(f);
    }
    fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        (**self).visit_buffers(f);
    }
    fn set_training(&mut self, training: bool) {
        (**self).set_training(training);
    }
}

impl<M: Forward + ?Sized> Forward for Box<M> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }
}

/// A missing child has no names; a present one has its own (no index, no prefix).
impl<M: Module> Module for Option<M> {
    fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        if let Some(m) = self {
            m.visit_parameters(f);
        }
    }
    fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        if let Some(m) = self {
            m.visit_buffers(f);
        }
    }
    fn set_training(&mut self, training: bool) {
        if let Some(m) = self {
            m.set_training(training);
        }
    }
}

/// `Module::visit_parameters` or `Module::visit_buffers` of a child type.
type ChildVisit<M> = fn(&M, &mut dyn FnMut(&str, &Tensor));

/// Runs `visit` (the parameters' or the buffers' visit) on each child, its names
/// prefixed by its index.
fn visit_indexed<M>(children: &[M], f: &mut dyn FnMut(&str, &Tensor), visit: ChildVisit<M>) {
    for (i, m) in children.iter().enumerate() {
        let prefix = i.to_string();
        visit(m, &mut |n, t| f(&join(&prefix, n), t));
    }
}

/// The children are named by their index, as in PyTorch's `ModuleList` (`0.weight`).
impl<M: Module> Module for [M] {
    fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_indexed(self, f, M::visit_parameters);
    }
    fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_indexed(self, f, M::visit_buffers);
    }
    fn set_training(&mut self, training: bool) {
        self.iter_mut().for_each(|m| m.set_training(training));
    }
}

/// `Vec`s and arrays of modules are named like slices.
macro_rules! module_as_slice {
    ($($ty:ty $(, const $n:ident)?);*) => {$(
        impl<M: Module $(, const $n: usize)?> Module for $ty {
            fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
                self.as_slice().visit_parameters(f);
            }
            fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
                self.as_slice().visit_buffers(f);
            }
            fn set_training(&mut self, training: bool) {
                self.as_mut_slice().set_training(training);
            }
        }
    )*};
}

module_as_slice!(Vec<M>; [M; N], const N);

#[cfg(test)]
mod tests {
    use super::*;

    struct Leaf {
        w: Tensor,
        stat: Tensor,
        training: bool,
    }

    impl Module for Leaf {
        fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
            self.w.visit_tensors("w", f);
        }
        fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
            self.stat.visit_tensors("stat", f);
        }
        fn set_training(&mut self, training: bool) {
            self.training = training;
        }
    }

    fn leaf() -> Leaf {
        Leaf { w: Tensor::ones(&[1]).unwrap(), stat: Tensor::zeros(&[1]).unwrap(), training: true }
    }

    fn names(list: Vec<(String, Tensor)>) -> Vec<String> {
        list.into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn containers_name_children_by_index_and_skip_missing_ones() {
        let mut list: Vec<Option<Box<Leaf>>> = vec![Some(Box::new(leaf())), None, Some(Box::new(leaf()))];
        assert_eq!(names(list.parameters()), ["0.w", "2.w"]);
        assert_eq!(names(list.buffers()), ["0.stat", "2.stat"]);
        assert_eq!(list.parameter_tensors().len(), 2);
        list.eval();
        assert!(list.iter().flatten().all(|m| !m.training));
        list.train();
        assert!(list.iter().flatten().all(|m| m.training));
        let array = [leaf(), leaf()];
        assert_eq!(names(array.parameters()), ["0.w", "1.w"]);
        let tensors = vec![Tensor::ones(&[1]).unwrap(); 2];
        let mut seen = Vec::new();
        tensors.visit_tensors("p", &mut |n, _| seen.push(n.to_string()));
        assert_eq!(seen, ["p.0", "p.1"]);
    }
}
