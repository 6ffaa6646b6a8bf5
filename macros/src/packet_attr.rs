//! The `#[packet(opcode = 0x0001)]` attribute of `#[derive(Packet)]`.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Lit, LitInt, Type};

/// The first opcode of the system range, reserved for the protocol's own
/// packets (`PING`, `PONG`, `DISCONNECT`, `HANDSHAKE`).
const SYSTEM_RANGE_START: u64 = 0xFF00;

/// The name of the attribute.
pub(crate) const ATTRIBUTE: &str = "packet";

/// An opcode as written by the user, checked to be an application opcode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opcode {
    /// The opcode, in `0x0000..=0xFEFF`.
    pub(crate) value: u16,
    /// Where the user wrote it.
    pub(crate) span: Span,
}

/// Whether `attr` is a `#[packet(...)]` attribute.
pub(crate) fn is_packet_attr(attr: &Attribute) -> bool {
    attr.path().is_ident(ATTRIBUTE)
}

/// Reads the opcode out of the `#[packet(...)]` attributes of a type.
///
/// Returns `Ok(None)` when there is no such attribute; several attributes
/// are read as one list of keys, and a key given twice is an error.
pub(crate) fn parse_opcode(attrs: &[Attribute]) -> syn::Result<Option<Opcode>> {
    let mut opcode = None;
    let mut seen_response = false;
    for attr in attrs.iter().filter(|attr| is_packet_attr(attr)) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("opcode") {
                if opcode.is_some() {
                    return Err(meta.error("duplicate key `opcode` in #[packet(...)]"));
                }
                let value: Expr = meta.value()?.parse()?;
                opcode = Some(check_opcode(&value)?);
                Ok(())
            } else if meta.path.is_ident("response") {
                // Read by `response`: a type.
                if seen_response {
                    return Err(meta.error("duplicate key `response` in #[packet(...)]"));
                }
                seen_response = true;
                let _: Type = meta.value()?.parse().map_err(|error| {
                    syn::Error::new(
                        error.span(),
                        "`response` is a type: the packet the handler answers with, \
                         or `()` for an acknowledgement, as in #[packet(opcode = 0x0001, response = Joined)]",
                    )
                })?;
                Ok(())
            } else if meta.path.is_ident("max_depth") {
                // Read by `max_depth`: a positive integer.
                let value: syn::LitInt = meta.value()?.parse()?;
                match value.base10_parse::<usize>() {
                    Ok(depth) if depth > 0 => Ok(()),
                    _ => Err(syn::Error::new(
                        value.span(),
                        "`max_depth` is a positive integer: #[packet(opcode = 0x0001, max_depth = 128)]",
                    )),
                }
            } else if meta.path.is_ident("compress") {
                // Read by `compress`: a bool literal.
                let _: syn::LitBool = meta.value()?.parse().map_err(|error| {
                    syn::Error::new(
                        error.span(),
                        "`compress` is `true` or `false`: #[packet(opcode = 0x0001, compress = false)]",
                    )
                })?;
                Ok(())
            } else if meta.path.is_ident("droppable")
                || meta.path.is_ident("unreliable")
                || meta.path.is_ident("evolving")
            {
                // Read by `has_flag`; a flag takes no value.
                if meta.input.peek(syn::Token![=]) {
                    let flag = quote::ToTokens::to_token_stream(&meta.path).to_string();
                    return Err(meta.error(format!(
                        "`{flag}` is a flag: write #[packet(opcode = 0x0001, {flag})]"
                    )));
                }
                Ok(())
            } else {
                let key = quote::ToTokens::to_token_stream(&meta.path).to_string();
                Err(meta.error(format!(
                    "unknown key `{}` in #[packet(...)]: the keys are `opcode`, `response`, \
                     `droppable`, `unreliable`, `compress`, `evolving` and `max_depth`, as in \
                     #[packet(opcode = 0x0001, response = Joined, droppable, max_depth = 128)]",
                    key.replace(' ', "")
                )))
            }
        })?;
    }
    Ok(opcode)
}

/// The `response = T` of the `#[packet(...)]` attributes, if given: the
/// type the packet's handler answers with (`()` for an acknowledgement).
pub(crate) fn response(attrs: &[Attribute]) -> Option<Type> {
    let mut response = None;
    for attr in attrs.iter().filter(|attr| is_packet_attr(attr)) {
        // Errors were reported by `parse_opcode`.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("response") {
                response = Some(meta.value()?.parse::<Type>()?);
            } else if meta.input.peek(syn::Token![=]) {
                let _: Expr = meta.value()?.parse()?;
            }
            Ok(())
        });
    }
    response
}

/// Whether the `#[packet(...)]` attributes carry the flag `flag`:
/// `droppable` (a push of this type may be dropped for a connection that
/// falls behind), `unreliable` (it goes by datagram when it can) or
/// `evolving` (it may gain optional fields at its end).
pub(crate) fn has_flag(attrs: &[Attribute], flag: &str) -> bool {
    let mut droppable = false;
    for attr in attrs.iter().filter(|attr| is_packet_attr(attr)) {
        // Errors were reported by `parse_opcode`.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(flag) {
                droppable = true;
            } else if meta.path.is_ident("response") {
                let _: Type = meta.value()?.parse()?;
            } else if meta.input.peek(syn::Token![=]) {
                let _: Expr = meta.value()?.parse()?;
            }
            Ok(())
        });
    }
    droppable
}

/// Checks that `value` is an integer literal naming an application opcode.
fn check_opcode(value: &Expr) -> syn::Result<Opcode> {
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = value
    else {
        return Err(syn::Error::new(
            value.span(),
            "the opcode must be an integer literal, such as 0x0001",
        ));
    };
    check_literal(lit)
}

fn check_literal(lit: &LitInt) -> syn::Result<Opcode> {
    if !matches!(lit.suffix(), "" | "u16") {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "the opcode is a u16: write it without a suffix or with `u16`, not `{}`",
                lit.suffix()
            ),
        ));
    }
    let value: u64 = lit.base10_parse().map_err(|_| too_large(lit))?;
    let value = u16::try_from(value).map_err(|_| too_large(lit))?;
    if u64::from(value) >= SYSTEM_RANGE_START {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "opcode 0x{value:04X} is in the system range 0xFF00..=0xFFFF reserved for system packets; \
                 application opcodes are 0x0000..=0xFEFF"
            ),
        ));
    }
    Ok(Opcode {
        value,
        span: lit.span(),
    })
}

fn too_large(lit: &LitInt) -> syn::Error {
    syn::Error::new(
        lit.span(),
        format!(
            "opcode {} does not fit in a u16; application opcodes are 0x0000..=0xFEFF",
            lit.token()
        ),
    )
}

/// The `max_depth = N` of the `#[packet(...)]` attributes, if given: how
/// many nested `Box` or `Vec` levels a body may hold.
pub(crate) fn max_depth(attrs: &[Attribute]) -> Option<syn::LitInt> {
    let mut depth = None;
    for attr in attrs.iter().filter(|attr| is_packet_attr(attr)) {
        // Errors were reported by `parse_opcode`.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("max_depth") {
                depth = Some(meta.value()?.parse::<syn::LitInt>()?);
            } else if meta.path.is_ident("response") {
                let _: Type = meta.value()?.parse()?;
            } else if meta.input.peek(syn::Token![=]) {
                let _: Expr = meta.value()?.parse()?;
            }
            Ok(())
        });
    }
    depth
}

/// The `compress = false` of the `#[packet(...)]` attributes: whether a
/// frame of this type may be sent compressed. `true` when not given.
pub(crate) fn compress(attrs: &[Attribute]) -> bool {
    let mut compress = true;
    for attr in attrs.iter().filter(|attr| is_packet_attr(attr)) {
        // Errors were reported by `parse_opcode`.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("compress") {
                compress = meta.value()?.parse::<syn::LitBool>()?.value;
            } else if meta.path.is_ident("response") {
                let _: Type = meta.value()?.parse()?;
            } else if meta.input.peek(syn::Token![=]) {
                let _: Expr = meta.value()?.parse()?;
            }
            Ok(())
        });
    }
    compress
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn opcode(attrs: &[Attribute]) -> Result<Option<u16>, String> {
        parse_opcode(attrs)
            .map(|found| found.map(|opcode| opcode.value))
            .map_err(|error| error.to_string())
    }

    #[test]
    fn reads_hex_and_decimal_opcodes() {
        assert_eq!(
            opcode(&[parse_quote!(#[packet(opcode = 0x0001)])]),
            Ok(Some(1))
        );
        assert_eq!(
            opcode(&[parse_quote!(#[packet(opcode = 300)])]),
            Ok(Some(300))
        );
        assert_eq!(
            opcode(&[parse_quote!(#[packet(opcode = 0xFEFFu16)])]),
            Ok(Some(0xFEFF))
        );
        assert_eq!(opcode(&[parse_quote!(#[derive(Debug)])]), Ok(None));
    }

    #[test]
    fn refuses_system_and_oversized_opcodes() {
        assert_eq!(
            opcode(&[parse_quote!(#[packet(opcode = 0xFF01)])]),
            Err("opcode 0xFF01 is in the system range 0xFF00..=0xFFFF reserved for system packets; \
                 application opcodes are 0x0000..=0xFEFF"
                .to_owned())
        );
        assert!(
            opcode(&[parse_quote!(#[packet(opcode = 0x10000)])])
                .unwrap_err()
                .starts_with("opcode 0x10000 does not fit in a u16")
        );
        assert!(
            opcode(&[parse_quote!(#[packet(opcode = 99999999999999999999999)])])
                .unwrap_err()
                .contains("does not fit in a u16")
        );
        assert!(
            opcode(&[parse_quote!(#[packet(opcode = 1u8)])])
                .unwrap_err()
                .contains("not `u8`")
        );
    }

    #[test]
    fn refuses_unknown_duplicate_and_non_literal_keys() {
        assert!(
            opcode(&[parse_quote!(#[packet(opcode = 1, name = "x")])])
                .unwrap_err()
                .starts_with("unknown key `name`")
        );
        assert_eq!(
            opcode(&[
                parse_quote!(#[packet(opcode = 1)]),
                parse_quote!(#[packet(opcode = 2)])
            ]),
            Err("duplicate key `opcode` in #[packet(...)]".to_owned())
        );
        assert_eq!(
            opcode(&[parse_quote!(#[packet(opcode = 1, response = A, response = ())])]),
            Err("duplicate key `response` in #[packet(...)]".to_owned())
        );
        assert!(
            opcode(&[parse_quote!(#[packet(opcode = 1, response = 3)])])
                .unwrap_err()
                .starts_with("`response` is a type")
        );
        assert!(
            opcode(&[parse_quote!(#[packet(opcode = OPCODE)])])
                .unwrap_err()
                .starts_with("the opcode must be an integer literal")
        );
    }
}
