//! Validation: each rule of the `#[derive(Module)]` contract is one function here. Errors
//! are gathered (not first-only) and spanned at the offending field or option.

use super::ast::{Derive, Role};
use quote::ToTokens;
use syn::Error;

/// Runs every rule.
pub fn all(d: &Derive, errors: &mut Vec<Error>) {
    one_role_per_field(d, errors);
    tensor_fields_say_what_they_are(d, errors);
    tensor_roles_hold_tensors(d, errors);
    training_flag_is_bool(d, errors);
    renames_name_something(d, errors);
    names_are_unique(d, errors);
}

/// A field is one of param, buffer, skip, training, flatten (or, unmarked, a child).
fn one_role_per_field(d: &Derive, errors: &mut Vec<Error>) {
    for f in &d.fields {
        if let [(first, _), rest @ ..] = f.explicit.as_slice() {
            for (_, span) in rest {
                errors.push(Error::new(
                    *span,
                    format!(
                        "`{}` is already marked `{}`; a field is one of `param`, `buffer`, `skip`, `training` or `flatten`",
                        f.label(),
                        first.keyword()
                    ),
                ));
            }
        }
    }
}

/// An unmarked field whose type holds tensors is an error, not a guess: a forgotten
/// `buffer` would silently drop running statistics from the weights.
fn tensor_fields_say_what_they_are(d: &Derive, errors: &mut Vec<Error>) {
    for f in d.fields.iter().filter(|f| f.explicit.is_empty() && f.holds_tensors && !f.options_failed) {
        errors.push(Error::new(
            f.span,
            format!(
                "`{}` holds tensors; mark it `#[module(param)]` (trained), `#[module(buffer)]` (saved, not trained) or `#[module(skip)]` (neither)",
                f.label()
            ),
        ));
    }
}

/// `param` and `buffer` go on tensor fields, not on plain data.
fn tensor_roles_hold_tensors(d: &Derive, errors: &mut Vec<Error>) {
    for f in d.fields.iter().filter(|f| matches!(f.role, Role::Param | Role::Buffer) && f.plain_data) {
        errors.push(Error::new(
            f.span,
            format!(
                "`{}: {}` holds no tensor, so it cannot be a `{}`; `param` and `buffer` go on `Tensor`, `Option<Tensor>`, `Vec<Tensor>` or `[Tensor; N]` fields",
                f.label(),
                f.ty.to_token_stream(),
                f.role.keyword()
            ),
        ));
    }
}

/// `training` marks the `bool` that `set_training` sets.
fn training_flag_is_bool(d: &Derive, errors: &mut Vec<Error>) {
    for f in d.fields.iter().filter(|f| f.role == Role::Training) {
        let is_bool = matches!(&f.ty, syn::Type::Path(p) if p.path.is_ident("bool"));
        if !is_bool {
            errors.push(Error::new(
                f.span,
                format!("`#[module(training)]` marks the `bool` that `set_training` sets; `{}` is `{}`", f.label(), f.ty.to_token_stream()),
            ));
        }
    }
}

/// `name = ".."` renames a parameter, buffer or child, to a non-empty name without dots.
fn renames_name_something(d: &Derive, errors: &mut Vec<Error>) {
    for f in &d.fields {
        let Some((name, span)) = &f.rename else { continue };
        if !f.role.is_named() {
            errors
                .push(Error::new(*span, format!("`{}` is `{}`, so it has no name in the weights to rename", f.label(), f.role.keyword())));
        } else if name.is_empty() || name.contains('.') {
            errors.push(Error::new(
                *span,
                format!("`{name}` cannot name a field: names are non-empty and have no `.` (children add the dots)"),
            ));
        }
    }
}

/// Two fields may not give the same name to the weights.
fn names_are_unique(d: &Derive, errors: &mut Vec<Error>) {
    let mut seen: Vec<String> = Vec::new();
    for f in d.fields.iter().filter(|f| f.role.is_named()) {
        let name = f.name();
        if seen.contains(&name) {
            let span = f.rename.as_ref().map_or(f.span, |(_, s)| *s);
            errors.push(Error::new(
                span,
                format!("another field is already named `{name}` in the weights; rename one with `#[module(name = \"..\")]`"),
            ));
        }
        seen.push(name);
    }
}
