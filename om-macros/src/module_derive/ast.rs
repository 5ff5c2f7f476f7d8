//! The parsed form of a `#[derive(Module)]` struct. Nodes keep their syn tokens and spans
//! so every error points at the offending field or option.

use proc_macro2::Span;
use syn::{Generics, Ident, Member, Path, Type};

/// What a field is to the module.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// A child module (the default): its names prefixed by the field's name.
    Child,
    /// A child module whose names are not prefixed (`#[module(flatten)]`).
    Flatten,
    /// Trainable tensors (`#[module(param)]`).
    Param,
    /// Saved, untrained tensors (`#[module(buffer)]`).
    Buffer,
    /// The `bool` that `set_training` sets (`#[module(training)]`).
    Training,
    /// Neither tensors nor a module (`#[module(skip)]`, or plain data such as `f32`).
    Skip,
}

impl Role {
    /// The option that selects the role, as written in `#[module(..)]`.
    pub fn keyword(self) -> &'static str {
        match self {
            Role::Child => "child",
            Role::Flatten => "flatten",
            Role::Param => "param",
            Role::Buffer => "buffer",
            Role::Training => "training",
            Role::Skip => "skip",
        }
    }

    /// Whether the field contributes names to the weights (and so needs a unique one).
    pub fn is_named(self) -> bool {
        matches!(self, Role::Child | Role::Param | Role::Buffer)
    }
}

/// One field of the struct.
pub struct Field {
    /// `self.name` or `self.0`.
    pub member: Member,
    /// The field's type.
    pub ty: Type,
    /// The span of the field (its name, or its type for tuple fields).
    pub span: Span,
    /// The roles given with `#[module(..)]`, each with the span of its keyword.
    pub explicit: Vec<(Role, Span)>,
    /// The role used: the one given, else [`Role::Skip`] for plain data, else
    /// [`Role::Child`].
    pub role: Role,
    /// `#[module(name = "..")]`, with the span of the string.
    pub rename: Option<(String, Span)>,
    /// Whether the type, read syntactically, holds tensors (`Tensor`, `Option<Tensor>`, ...).
    pub holds_tensors: bool,
    /// Whether the type, read syntactically, is plain data (`f32`, `usize`, `[usize; 2]`, ...).
    pub plain_data: bool,
    /// Whether its `#[module(..)]` options failed to parse (already reported; no further
    /// rule looks at the field).
    pub options_failed: bool,
}

impl Field {
    /// The field's name in the weights: the rename, else the field's name or index.
    pub fn name(&self) -> String {
        match (&self.rename, &self.member) {
            (Some((n, _)), _) => n.clone(),
            (None, Member::Named(i)) => i.to_string(),
            (None, Member::Unnamed(i)) => i.index.to_string(),
        }
    }

    /// The field as Rust code names it (for messages).
    pub fn label(&self) -> String {
        match &self.member {
            Member::Named(i) => i.to_string(),
            Member::Unnamed(i) => i.index.to_string(),
        }
    }
}

/// The whole derive input.
pub struct Derive {
    /// The struct's name.
    pub ident: Ident,
    /// Its generics (bounds are added per field type that uses a parameter).
    pub generics: Generics,
    /// The path of `om_core` (`#[module(crate = ..)]`, default `::om_core`).
    pub krate: Path,
    /// The fields, in declaration order (the order of the names).
    pub fields: Vec<Field>,
}
