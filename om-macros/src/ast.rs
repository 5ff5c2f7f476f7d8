//! The parsed form of an `#[op]` declaration. Nodes keep their syn tokens so every error
//! can point at the offending span.

use proc_macro2::Span;
use syn::{Ident, ItemFn, ItemMod, Type};

/// The arguments of `#[op(...)]`.
pub struct OpArgs {
    /// `saved = [..]`, with the span of the key.
    pub saved: Vec<SavedItem>,
    /// `attrs = [..]`.
    pub attrs: Vec<AttrItem>,
    /// `composition`, with its span.
    pub composition: Option<Span>,
    /// `crate = path`: the core crate's path (see `crate_path`).
    pub krate: Option<syn::Path>,
}

/// One saved slot: `x`, `x if y`, `out`, or `name: owned`.
pub struct SavedItem {
    pub name: Ident,
    pub cond: Option<Ident>,
    pub owned: bool,
}

/// One attribute: `name: Type`.
pub struct AttrItem {
    pub name: Ident,
    pub ty: Type,
}

/// The element type `T` of a slice attribute `&[T]` (taken by reference, stored in the
/// record as an inline list `InlineVec<T, INLINE_RANK>`, inline for short lists
/// such as shapes and axes), or `None` for an attribute stored as it is given.
pub fn slice_attr_elem(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Reference(r) if r.mutability.is_none() => match &*r.elem {
            Type::Slice(s) => Some(&s.elem),
            _ => None,
        },
        _ => None,
    }
}

/// The target `T` of a parameter typed `impl Into<T>`: the public call takes anything
/// convertible (`x.sum([1, 2], false)`, `x.reshape([8, -1])`), the record stores the
/// converted `T`, which is the attribute's declared type.
pub fn into_target(ty: &Type) -> Option<&Type> {
    let Type::ImplTrait(it) = ty else { return None };
    if it.bounds.len() != 1 {
        return None;
    }
    let syn::TypeParamBound::Trait(bound) = it.bounds.first()? else { return None };
    let last = bound.path.segments.last()?;
    if last.ident != "Into" {
        return None;
    }
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// How a forward parameter takes a tensor.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// `&Tensor`
    Required,
    /// `Option<&Tensor>`
    Optional,
    /// `&[Tensor]`: any number of inputs (the last tensor parameter).
    Many,
}

/// A tensor input of `forward`.
pub struct Input {
    pub name: Ident,
    pub kind: InputKind,
}

/// A non-tensor parameter of `forward` (an attribute).
pub struct Param {
    pub name: Ident,
    pub ty: Type,
}

/// The whole declaration.
pub struct Op {
    pub args: OpArgs,
    pub module: ItemMod,
    pub forward: Option<ItemFn>,
    pub backward: Option<ItemFn>,
    pub cases: Option<ItemFn>,
    pub inputs: Vec<Input>,
    pub params: Vec<Param>,
}

// ===== the checked form =====

/// A declaration that passed every rule of `validate`: everything expansion needs, with
/// nothing optional left to unwrap.
pub struct Checked {
    /// The operator's name (the module's).
    pub name: String,
    /// The module (its attributes, visibility and name) and the items of its body.
    pub module: ItemMod,
    pub items: Vec<syn::Item>,
    pub forward: ItemFn,
    pub inputs: Vec<Input>,
    pub kind: Kind,
    /// `<core>::__private`: the one path the expansion names the core crate's items by.
    pub core: proc_macro2::TokenStream,
}

/// What kind of operator the declaration is.
pub enum Kind {
    /// Has its own record and backward rule.
    Primitive { backward: Box<ItemFn>, saved: Vec<Slot>, attrs: Vec<AttrItem> },
    /// Built from other operators (no record).
    Composition,
}

/// A resolved saved slot.
pub struct Slot {
    pub name: Ident,
    pub source: SlotSource,
    /// The input (index and name) whose gradient needs this slot, for `x if y`.
    pub cond: Option<(usize, Ident)>,
}

/// Where a saved slot's tensor comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SlotSource {
    /// The tensor input of the same name; `optional` for an `Option<&Tensor>` one.
    Input { optional: bool },
    /// The output.
    Out,
    /// A tensor `forward` returns in `Owned`.
    Owned,
}

impl Slot {
    /// Whether the record holds it as an `Option` (conditional, or an optional input).
    pub fn is_option(&self) -> bool {
        self.cond.is_some() || self.source == SlotSource::Input { optional: true }
    }
}

impl Checked {
    /// Whether one input is a `&[Tensor]` (so the inputs are counted at run time).
    pub fn variadic(&self) -> bool {
        self.inputs.iter().any(|i| i.kind == InputKind::Many)
    }
}
