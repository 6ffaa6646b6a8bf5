//! `#[derive(Packet)]` and `#[derive(Codec)]`.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{DeriveInput, LitInt, LitStr};

use crate::codec::{self, type_name};
use crate::crate_path::CratePath;
use crate::errors::Errors;
use crate::packet_attr::{self, Opcode, is_packet_attr};

/// `impl Encode`, `impl Decode` and `impl Packet` for a type with
/// `#[packet(opcode = ...)]`.
///
/// When only the opcode is wrong, the codec impls and a `Packet` impl with
/// opcode 0 are still emitted next to the error, so the one mistake does not
/// cascade into "not a Ternio packet" errors wherever the type is used.
pub(crate) fn derive_packet(input: &DeriveInput) -> TokenStream {
    let proto = CratePath::protocol();
    let mut errors = Errors::default();
    let opcode = match packet_attr::parse_opcode(&input.attrs) {
        Ok(Some(opcode)) => Some(opcode),
        Ok(None) => {
            errors.push(missing_opcode(input));
            None
        }
        Err(error) => {
            errors.push(error);
            None
        }
    };
    let evolving = packet_attr::has_flag(&input.attrs, "evolving");
    let codec = match codec::expand(input, &proto, "Packet", evolving) {
        Ok(codec) => codec,
        Err(error) => {
            errors.push(error);
            return errors.into_compile_errors();
        }
    };
    let flags = Flags {
        droppable: packet_attr::has_flag(&input.attrs, "droppable"),
        unreliable: packet_attr::has_flag(&input.attrs, "unreliable"),
        compress: packet_attr::compress(&input.attrs),
        evolving,
    };
    let max_depth = packet_attr::max_depth(&input.attrs);
    let response = packet_attr::response(&input.attrs);
    let packet = packet_impl(input, &proto, opcode, flags, max_depth, response.as_ref());
    let request = response
        .as_ref()
        .map(|response| request_impl(input, &proto, response));
    let errors = errors.into_compile_errors();
    quote!(#errors #codec #packet #request)
}

/// `impl Encode` and `impl Decode` for a nested type with no opcode.
///
/// `#[packet(...)]` on such a type is an error: it would set an opcode that
/// nothing reads.
pub(crate) fn derive_codec(input: &DeriveInput) -> TokenStream {
    let mut errors = Errors::default();
    for attr in input.attrs.iter().filter(|attr| is_packet_attr(attr)) {
        errors.push(syn::Error::new_spanned(
            attr,
            "#[derive(Codec)] gives a type an encoding but no opcode, so it takes no #[packet(...)]: \
             derive Packet instead for a type sent on its own, or remove this attribute",
        ));
    }
    let codec = errors.check(codec::expand(input, &CratePath::protocol(), "Codec", false));
    let errors = errors.into_compile_errors();
    quote!(#errors #codec)
}

fn missing_opcode(input: &DeriveInput) -> syn::Error {
    syn::Error::new(
        input.ident.span(),
        format!(
            "missing #[packet(opcode = 0x....)] on `{name}`\n\
             help: add an application opcode (0x0000..=0xFEFF) below the derive, \
             such as #[packet(opcode = 0x0001)]; \
             for a type nested in packets that is never sent on its own, derive Codec instead",
            name = type_name(&input.ident)
        ),
    )
}

/// The flags of `#[packet(...)]`.
struct Flags {
    droppable: bool,
    unreliable: bool,
    compress: bool,
    evolving: bool,
}

fn packet_impl(
    input: &DeriveInput,
    proto: &CratePath,
    opcode: Option<Opcode>,
    Flags {
        droppable,
        unreliable,
        compress,
        evolving,
    }: Flags,
    max_depth: Option<syn::LitInt>,
    response: Option<&syn::Type>,
) -> TokenStream {
    let p = proto.at(Span::call_site());
    let ident = &input.ident;
    let name = LitStr::new(&type_name(ident), ident.span());
    let opcode = match opcode {
        Some(Opcode { value, span }) => LitInt::new(&format!("{value:#06x}"), span),
        None => LitInt::new("0", Span::call_site()),
    };
    let max_depth = max_depth.map(|depth| quote!(const MAX_DEPTH: usize = #depth;));
    // Through `Request`: a `response` that is not a `Response` is then
    // reported once, at the `impl Request`.
    let describe_response = response.map(|_| {
        quote! {
            fn describe_response(
                schema: &mut #p::schema::SchemaBuilder,
            ) -> ::core::option::Option<#p::schema::ResponseRef> {
                ::core::option::Option::Some(
                    <Self as #p::Request>::describe_declared_response(schema),
                )
            }
        }
    });
    quote! {
        #[automatically_derived]
        impl #p::Packet for #ident {
            const OPCODE: u16 = #opcode;
            const NAME: &'static str = #name;
            const DROPPABLE: bool = #droppable;
            const UNRELIABLE: bool = #unreliable;
            const COMPRESS: bool = #compress;
            const EVOLVING: bool = #evolving;
            #max_depth
            #describe_response
        }
    }
}

/// `impl Request` for a packet with `response = T`. The bound
/// `T: Response` is checked by the compiler at `T`, as written.
fn request_impl(input: &DeriveInput, proto: &CratePath, response: &syn::Type) -> TokenStream {
    let p = proto.at(Span::call_site());
    let ident = &input.ident;
    quote! {
        #[automatically_derived]
        impl #p::Request for #ident {
            type Response = #response;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn packets_get_their_opcode_and_name() {
        let out = derive_packet(&parse_quote! {
            #[packet(opcode = 0x2A)]
            struct r#Join { room: String }
        })
        .to_string();
        assert!(out.contains("const OPCODE : u16 = 0x002a ;"), "{out}");
        assert!(
            out.contains("const NAME : & 'static str = \"Join\" ;"),
            "{out}"
        );
        assert!(!out.contains("compile_error"), "{out}");
        assert!(!out.contains("Request"), "{out}");
    }

    #[test]
    fn a_declared_response_implements_request() {
        let out = derive_packet(&parse_quote! {
            #[packet(opcode = 0x10, response = crate::Sum)]
            struct Add { a: i32 }
        })
        .to_string();
        assert!(
            out.contains(
                "impl :: ternio_protocol :: Request for Add { type Response = crate :: Sum ; }"
            ),
            "{out}"
        );
        let out = derive_packet(&parse_quote! {
            #[packet(opcode = 0x11, droppable)]
            #[packet(response = ())]
            struct Leave;
        })
        .to_string();
        assert!(out.contains("type Response = () ;"), "{out}");
        assert!(out.contains("const DROPPABLE : bool = true ;"), "{out}");
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn a_missing_opcode_still_yields_the_impls() {
        let out = derive_packet(&parse_quote!(
            struct Join;
        ))
        .to_string();
        assert!(
            out.contains("missing #[packet(opcode = 0x....)] on `Join`"),
            "{out}"
        );
        assert!(out.contains("Encode for Join"), "{out}");
        assert!(out.contains("const OPCODE : u16 = 0 ;"), "{out}");
    }

    #[test]
    fn codec_refuses_an_opcode() {
        let out = derive_codec(&parse_quote! {
            #[packet(opcode = 1)]
            struct Point { x: i32 }
        })
        .to_string();
        assert!(out.contains("takes no #[packet(...)]"), "{out}");
        assert!(!out.contains("Packet for"), "{out}");
    }
}
