//! The `Encode` and `Decode` impls that `#[derive(Packet)]` and
//! `#[derive(Codec)]` share: section 3 of the wire contract.
//!
//! A struct is its fields in declaration order. An enum is a `u8` variant
//! index (the variant's position in declaration order) followed by that
//! variant's fields.
//!
//! Every call on a field goes through `<FieldTy as Encode>` or
//! `<FieldTy as Decode>` spanned at the field's type, so a type with no
//! encoding is reported by the traits' `#[diagnostic::on_unimplemented]`
//! message at the field that has it.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DataEnum, DeriveInput, Fields, Ident, Index, LitInt, LitStr, Member, Type};

use crate::crate_path::CratePath;
use crate::errors::Errors;
use crate::packet_attr::is_packet_attr;

/// The most variants an enum may have: its index is one byte.
const MAX_VARIANTS: usize = 256;

/// The `impl Encode` and `impl Decode` of `input`, for the derive named
/// `derive` (used in error messages). `evolving` is a packet's
/// `#[packet(opcode = …, evolving)]`: its trailing `#[packet(optional)]`
/// fields may be missing from a body (docs/PROTOCOL.md, "Evolving packets").
pub(crate) fn expand(
    input: &DeriveInput,
    proto: &CratePath,
    derive: &str,
    evolving: bool,
) -> syn::Result<TokenStream> {
    check_shape(input, derive, evolving)?;
    let locals = Locals::new();
    let (encode, encoded_len, min_len, decode) = match &input.data {
        Data::Struct(data) => (
            encode_struct(&data.fields, proto, &locals),
            encoded_len_struct(&data.fields, proto),
            sum_min_len(&data.fields, proto),
            decode_fields(quote!(Self), &data.fields, proto, &locals),
        ),
        Data::Enum(data) => (
            encode_enum(data, proto, &locals),
            encoded_len_enum(data, proto),
            quote!(1),
            decode_enum(input, data, proto, &locals),
        ),
        Data::Union(_) => unreachable!("check_shape refuses unions"),
    };
    let describe = describe(input, proto, evolving);
    let name = &input.ident;
    let p = proto.at(Span::call_site());
    let Locals { out, reader, .. } = &locals;
    // A struct with no field reads and writes nothing.
    let (out_param, reader_param) = match &input.data {
        Data::Struct(data) if data.fields.is_empty() => (quote!(_), quote!(_)),
        _ => (quote!(#out), quote!(#reader)),
    };
    Ok(quote! {
        #[automatically_derived]
        impl #p::Encode for #name {
            fn encode(&self, #out_param: &mut #p::BytesMut) {
                #encode
            }

            fn encoded_len(&self) -> usize {
                #encoded_len
            }
        }

        #[automatically_derived]
        impl #p::Decode for #name {
            const MIN_LEN: usize = #min_len;

            fn decode(
                #reader_param: &mut #p::Reader<'_>,
            ) -> ::core::result::Result<Self, #p::DecodeError> {
                #decode
            }

            #describe
        }
    })
}

/// `fn describe`: the type's definition for the schema (docs/SCHEMA.md),
/// its fields in wire order.
fn describe(input: &DeriveInput, proto: &CratePath, evolving: bool) -> TokenStream {
    let p = proto.at(Span::call_site());
    let name = LitStr::new(&type_name(&input.ident), input.ident.span());
    let schema = Ident::new("schema", Span::mixed_site());
    let def = match &input.data {
        Data::Struct(data) => {
            let fields = describe_fields(&data.fields, proto, &schema);
            quote!(#p::schema::TypeDef::Struct { fields: #fields, evolving: #evolving })
        }
        Data::Enum(data) => {
            let variants = data.variants.iter().map(|variant| {
                let variant_name = LitStr::new(&type_name(&variant.ident), variant.ident.span());
                let fields = describe_fields(&variant.fields, proto, &schema);
                quote!(#p::schema::Variant { name: #variant_name, fields: #fields })
            });
            quote! {
                #p::schema::TypeDef::Enum {
                    variants: ::std::vec![#(#variants),*],
                }
            }
        }
        Data::Union(_) => unreachable!("check_shape refuses unions"),
    };
    quote! {
        fn describe(#schema: &mut #p::schema::SchemaBuilder) -> #p::schema::TypeRef {
            if #schema.begin(#name, ::core::concat!(::core::module_path!(), "::", #name)) {
                let def = #def;
                #schema.define(#name, def);
            }
            #p::schema::TypeRef::Named(#name)
        }
    }
}

/// `vec![Field { .. }, ..]`: the fields' names and types in wire order.
fn describe_fields(fields: &Fields, proto: &CratePath, schema: &Ident) -> TokenStream {
    let p = proto.at(Span::call_site());
    let fields = fields.iter().enumerate().map(|(i, field)| {
        let name = match &field.ident {
            Some(ident) => LitStr::new(&type_name(ident), ident.span()),
            None => LitStr::new(&i.to_string(), field.ty.span()),
        };
        let ty = &field.ty;
        let span = ty.span();
        let pf = proto.at(span);
        let describe = quote_spanned!(span=> <#ty as #pf::Decode>::describe);
        let optional = is_optional(field);
        quote!(#p::schema::Field { name: #name, ty: #describe(#schema), optional: #optional })
    });
    quote!(::std::vec![#(#fields),*])
}

/// Names of the generated code's local variables. They are hygienic
/// (`Span::mixed_site`), so a field named `out` or `reader` cannot clash.
struct Locals {
    out: Ident,
    reader: Ident,
    index: Ident,
}

impl Locals {
    fn new() -> Self {
        let local = |name| Ident::new(name, Span::mixed_site());
        Self {
            out: local("out"),
            reader: local("reader"),
            index: local("index"),
        }
    }

    /// The binding of the `i`th field of an enum variant.
    fn field(i: usize) -> Ident {
        format_ident!("field{}", i, span = Span::mixed_site())
    }
}

/// Refuses what has no encoding: generic types, unions, enums with no
/// variant, too many variants or explicit discriminants, and `#[packet]` on
/// anything but the type.
fn check_shape(input: &DeriveInput, derive: &str, evolving: bool) -> syn::Result<()> {
    let mut errors = Errors::default();
    if !input.generics.params.is_empty() || input.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &input.generics,
            format!(
                "#[derive({derive})] does not support generic types: \
                 a packet's encoding must be known without type parameters; \
                 use concrete field types"
            ),
        ));
    }
    match &input.data {
        Data::Struct(data) => check_struct_fields(&data.fields, derive, evolving, &mut errors),
        Data::Enum(data) => {
            if evolving {
                errors.push(syn::Error::new(
                    input.ident.span(),
                    "`evolving` is for struct packets: a packet gains optional fields at its \
                     end, and an enum's variants cannot; make this packet a struct, or remove \
                     `evolving`",
                ));
            }
            check_enum(input, data, derive, &mut errors)
        }
        Data::Union(data) => errors.push(syn::Error::new(
            data.union_token.span,
            format!("#[derive({derive})] does not support unions: use a struct or an enum"),
        )),
    }
    errors.finish()
}

fn check_enum(input: &DeriveInput, data: &DataEnum, derive: &str, errors: &mut Errors) {
    if data.variants.is_empty() {
        errors.push(syn::Error::new(
            input.ident.span(),
            format!(
                "#[derive({derive})] needs at least one variant: \
                 an enum with no variants has no value to encode"
            ),
        ));
    }
    for (position, variant) in data.variants.iter().enumerate() {
        if let Some((eq, discriminant)) = &variant.discriminant {
            errors.push(syn::Error::new_spanned(
                quote!(#eq #discriminant),
                format!(
                    "explicit discriminants are not supported by #[derive({derive})]: \
                     a variant's index on the wire is its position in declaration order \
                     (this is variant {position}); remove `= ...`"
                ),
            ));
        }
        for attr in variant.attrs.iter().filter(|attr| is_packet_attr(attr)) {
            errors.push(misplaced_packet_attr(attr));
        }
        check_field_attrs(&variant.fields, errors);
    }
    if let Some(variant) = data.variants.iter().nth(MAX_VARIANTS) {
        errors.push(syn::Error::new(
            variant.ident.span(),
            format!(
                "#[derive({derive})] supports at most {MAX_VARIANTS} variants, \
                 as the variant index is one byte; this is variant {}",
                MAX_VARIANTS + 1
            ),
        ));
    }
}

fn check_field_attrs(fields: &Fields, errors: &mut Errors) {
    for attr in fields.iter().flat_map(|field| &field.attrs) {
        if is_packet_attr(attr) {
            errors.push(misplaced_packet_attr(attr));
        }
    }
}

/// The fields of a struct: `#[packet(optional)]` only in an evolving
/// packet, and only on trailing fields; no other `#[packet(...)]`.
fn check_struct_fields(fields: &Fields, derive: &str, evolving: bool, errors: &mut Errors) {
    let mut first_optional: Option<String> = None;
    for (i, field) in fields.iter().enumerate() {
        let name = field
            .ident
            .as_ref()
            .map_or_else(|| i.to_string(), type_name);
        let mut optional = false;
        for attr in field.attrs.iter().filter(|attr| is_packet_attr(attr)) {
            if is_optional_attr(attr) {
                optional = true;
                if derive != "Packet" || !evolving {
                    errors.push(syn::Error::new_spanned(
                        attr,
                        "#[packet(optional)] is for the trailing fields of an evolving packet: \
                         add `evolving` to the type's #[packet(opcode = …, evolving)]",
                    ));
                }
            } else {
                errors.push(misplaced_packet_attr(attr));
            }
        }
        match (&first_optional, optional) {
            (None, true) => first_optional = Some(name),
            (Some(before), false) if evolving => errors.push(syn::Error::new(
                field.ty.span(),
                format!(
                    "field `{name}` follows the optional field `{before}` but is not optional: \
                     optional fields of an evolving packet come last (a body may end before \
                     them); move it before `{before}` or mark it #[packet(optional)]"
                ),
            )),
            _ => {}
        }
    }
}

/// Whether `attr` is exactly `#[packet(optional)]`.
fn is_optional_attr(attr: &syn::Attribute) -> bool {
    let mut only_optional = false;
    let parsed = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("optional") && !meta.input.peek(syn::Token![=]) {
            only_optional = true;
            Ok(())
        } else {
            Err(meta.error("not optional"))
        }
    });
    parsed.is_ok() && only_optional
}

/// Whether the field carries `#[packet(optional)]` (checked by
/// [`check_struct_fields`]).
fn is_optional(field: &syn::Field) -> bool {
    field
        .attrs
        .iter()
        .any(|attr| is_packet_attr(attr) && is_optional_attr(attr))
}

fn misplaced_packet_attr(attr: &syn::Attribute) -> syn::Error {
    syn::Error::new_spanned(
        attr,
        "#[packet(...)] goes on the type itself, not on a field or a variant",
    )
}

/// `<Ty as Encode>::encode`, spanned at the field's type.
fn encode_fn(ty: &Type, proto: &CratePath) -> TokenStream {
    let span = ty.span();
    let p = proto.at(span);
    quote_spanned!(span=> <#ty as #p::Encode>::encode)
}

/// `<Ty as Encode>::encoded_len`, spanned at the field's type.
fn encoded_len_fn(ty: &Type, proto: &CratePath) -> TokenStream {
    let span = ty.span();
    let p = proto.at(span);
    quote_spanned!(span=> <#ty as #p::Encode>::encoded_len)
}

/// `<Ty as Decode>::decode`, spanned at the field's type.
fn decode_fn(ty: &Type, proto: &CratePath) -> TokenStream {
    let span = ty.span();
    let p = proto.at(span);
    quote_spanned!(span=> <#ty as #p::Decode>::decode)
}

/// `a + b + c`, or `0` for no term.
fn sum(terms: impl IntoIterator<Item = TokenStream>) -> TokenStream {
    let mut terms = terms.into_iter();
    match terms.next() {
        None => quote!(0),
        Some(first) => quote!(#first #(+ #terms)*),
    }
}

fn members(fields: &Fields) -> impl Iterator<Item = (Member, &Type)> {
    fields.iter().enumerate().map(|(i, field)| {
        let member = match &field.ident {
            Some(ident) => Member::Named(ident.clone()),
            None => Member::Unnamed(Index {
                index: i as u32,
                span: field.ty.span(),
            }),
        };
        (member, &field.ty)
    })
}

fn encode_struct(fields: &Fields, proto: &CratePath, locals: &Locals) -> TokenStream {
    let out = &locals.out;
    let calls = members(fields).map(|(member, ty)| {
        let encode = encode_fn(ty, proto);
        quote!(#encode(&self.#member, #out);)
    });
    quote!(#(#calls)*)
}

fn encoded_len_struct(fields: &Fields, proto: &CratePath) -> TokenStream {
    sum(members(fields).map(|(member, ty)| {
        let encoded_len = encoded_len_fn(ty, proto);
        quote!(#encoded_len(&self.#member))
    }))
}

fn sum_min_len(fields: &Fields, proto: &CratePath) -> TokenStream {
    // Optional fields count too: a body may end before them only at the
    // top level, and `MIN_LEN` bounds how many elements a count may claim
    // (with 0, three bytes could claim 65,536 defaulted elements).
    sum(fields.iter().map(|field| {
        let span = field.ty.span();
        let ty = &field.ty;
        let p = proto.at(span);
        quote_spanned!(span=> <#ty as #p::Decode>::MIN_LEN)
    }))
}

/// `Ok(path { a: decode(reader)?, .. })`, `Ok(path(decode(reader)?, ..))` or
/// `Ok(path)`: decodes the fields in declaration order.
fn decode_fields(
    path: TokenStream,
    fields: &Fields,
    proto: &CratePath,
    locals: &Locals,
) -> TokenStream {
    let reader = &locals.reader;
    let values = fields.iter().map(|field| {
        let decode = decode_fn(&field.ty, proto);
        let value = if is_optional(field) {
            // A body from an older peer ends before this field.
            let span = field.ty.span();
            let ty = &field.ty;
            let p = proto.at(span);
            let default = quote_spanned!(span=> <#ty as ::core::default::Default>::default());
            quote! {
                if #p::Reader::remaining(#reader) == 0 {
                    #default
                } else {
                    #decode(#reader)?
                }
            }
        } else {
            quote!(#decode(#reader)?)
        };
        match &field.ident {
            Some(ident) => quote!(#ident: #value),
            None => value,
        }
    });
    let value = match fields {
        Fields::Named(_) => quote!(#path { #(#values),* }),
        Fields::Unnamed(_) => quote!(#path ( #(#values),* )),
        Fields::Unit => path,
    };
    quote!(::core::result::Result::Ok(#value))
}

/// The pattern `Self::V { a: field0, .. }` / `Self::V(field0, ..)` / `Self::V`
/// that binds a variant's fields by reference.
fn variant_pattern(variant: &syn::Variant) -> TokenStream {
    let ident = &variant.ident;
    let bindings = (0..variant.fields.len()).map(Locals::field);
    match &variant.fields {
        Fields::Named(fields) => {
            let names = fields.named.iter().map(|field| &field.ident);
            quote!(Self::#ident { #(#names: #bindings),* })
        }
        Fields::Unnamed(_) => quote!(Self::#ident ( #(#bindings),* )),
        Fields::Unit => quote!(Self::#ident),
    }
}

fn variant_index(position: usize) -> LitInt {
    LitInt::new(&format!("{position}u8"), Span::call_site())
}

fn encode_enum(data: &DataEnum, proto: &CratePath, locals: &Locals) -> TokenStream {
    let out = &locals.out;
    let p = proto.at(Span::call_site());
    let arms = data.variants.iter().enumerate().map(|(position, variant)| {
        let pattern = variant_pattern(variant);
        let index = variant_index(position);
        let calls = variant.fields.iter().enumerate().map(|(i, field)| {
            let encode = encode_fn(&field.ty, proto);
            let binding = Locals::field(i);
            quote!(#encode(#binding, #out);)
        });
        quote! {
            #pattern => {
                <u8 as #p::Encode>::encode(&#index, #out);
                #(#calls)*
            }
        }
    });
    quote! {
        match self {
            #(#arms)*
        }
    }
}

fn encoded_len_enum(data: &DataEnum, proto: &CratePath) -> TokenStream {
    let arms = data.variants.iter().map(|variant| {
        let pattern = variant_pattern(variant);
        let len = sum(variant.fields.iter().enumerate().map(|(i, field)| {
            let encoded_len = encoded_len_fn(&field.ty, proto);
            let binding = Locals::field(i);
            quote!(#encoded_len(#binding))
        }));
        quote!(#pattern => #len,)
    });
    quote! {
        1 + match self {
            #(#arms)*
        }
    }
}

fn decode_enum(
    input: &DeriveInput,
    data: &DataEnum,
    proto: &CratePath,
    locals: &Locals,
) -> TokenStream {
    let Locals { reader, index, .. } = locals;
    let p = proto.at(Span::call_site());
    let type_name = LitStr::new(&type_name(&input.ident), input.ident.span());
    let arms = data.variants.iter().enumerate().map(|(position, variant)| {
        let ident = &variant.ident;
        let value = decode_fields(quote!(Self::#ident), &variant.fields, proto, locals);
        let position = variant_index(position);
        quote!(#position => #value,)
    });
    // With 256 variants every index is taken and the fallback arm is dead.
    let allow =
        (data.variants.len() >= MAX_VARIANTS).then(|| quote!(#[allow(unreachable_patterns)]));
    quote! {
        let #index = <u8 as #p::Decode>::decode(#reader)?;
        match #index {
            #(#arms)*
            #allow
            _ => ::core::result::Result::Err(#p::DecodeError::InvalidVariant {
                index: #index,
                type_name: #type_name,
            }),
        }
    }
}

/// The type's name as users spell it, without `r#`.
pub(crate) fn type_name(ident: &Ident) -> String {
    syn::ext::IdentExt::unraw(ident).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn expand_str(input: DeriveInput) -> Result<String, String> {
        let proto = CratePath::framework();
        expand(&input, &proto, "Codec", false)
            .map(|tokens| tokens.to_string())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn struct_fields_are_encoded_in_order() {
        let out = expand_str(parse_quote! {
            struct Join { room: String, seat: u8 }
        })
        .unwrap();
        let room = out.find("& self . room").unwrap();
        let seat = out.find("& self . seat").unwrap();
        assert!(room < seat, "{out}");
        assert!(
            out.contains("const MIN_LEN : usize = < String as :: ternio :: Decode > :: MIN_LEN + < u8 as :: ternio :: Decode > :: MIN_LEN"),
            "{out}"
        );
    }

    #[test]
    fn unit_structs_take_no_bytes() {
        let out = expand_str(parse_quote!(
            struct Tick;
        ))
        .unwrap();
        assert!(out.contains("const MIN_LEN : usize = 0"), "{out}");
        assert!(
            out.contains("fn encoded_len (& self) -> usize { 0 }"),
            "{out}"
        );
        assert!(out.contains("Ok (Self)"), "{out}");
    }

    #[test]
    fn enums_lead_with_the_variant_index() {
        let out = expand_str(parse_quote! {
            enum Shape { Dot, Circle(f32), Rect { w: f32, h: f32 } }
        })
        .unwrap();
        assert!(out.contains("const MIN_LEN : usize = 1"), "{out}");
        assert!(
            out.contains("2u8 => :: core :: result :: Result :: Ok (Self :: Rect"),
            "{out}"
        );
        assert!(out.contains("type_name : \"Shape\""), "{out}");
        assert!(!out.contains("unreachable_patterns"), "{out}");
    }

    #[test]
    fn refuses_shapes_with_no_encoding() {
        let generic = expand_str(parse_quote!(
            struct Wrap<T> {
                inner: T,
            }
        ))
        .unwrap_err();
        assert!(
            generic.contains("does not support generic types"),
            "{generic}"
        );
        let empty = expand_str(parse_quote!(
            enum Never {}
        ))
        .unwrap_err();
        assert!(empty.contains("needs at least one variant"), "{empty}");
        let discriminant = expand_str(parse_quote!(
            enum E {
                A,
                B = 5,
            }
        ))
        .unwrap_err();
        assert!(discriminant.contains("this is variant 1"), "{discriminant}");
        let union = expand_str(parse_quote!(union U { a: u8 })).unwrap_err();
        assert!(union.contains("does not support unions"), "{union}");
        let on_field = expand_str(parse_quote!(
            struct S {
                #[packet(opcode = 1)]
                a: u8,
            }
        ))
        .unwrap_err();
        assert!(on_field.contains("goes on the type itself"), "{on_field}");
    }

    #[test]
    fn enums_have_at_most_256_variants() {
        let variants = (0..MAX_VARIANTS).map(|i| format_ident!("V{i}"));
        let full: DeriveInput = parse_quote!(enum Full { #(#variants),* });
        let out = expand_str(full).unwrap();
        assert!(out.contains("unreachable_patterns"), "{out}");
        let variants = (0..=MAX_VARIANTS).map(|i| format_ident!("V{i}"));
        let over: DeriveInput = parse_quote!(enum Over { #(#variants),* });
        let error = expand_str(over).unwrap_err();
        assert!(error.contains("at most 256 variants"), "{error}");
        assert!(error.contains("this is variant 257"), "{error}");
    }
}
