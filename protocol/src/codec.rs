//! The field encoding of section 3: fixed-width little-endian integers,
//! `bool`, LEB128 varint lengths, strings, byte strings, vectors, options and
//! arrays. Packet structs and enums get theirs from `#[derive(Packet)]`
//! (or `#[derive(Codec)]` for a nested type with no opcode).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::schema::{SchemaBuilder, TypeRef};

/// The most bytes a varint length may take.
pub const MAX_VARINT_LEN: usize = 5;

/// The most elements a `Vec` of a type that encodes to zero bytes may hold.
///
/// Every other vector is bounded by the body itself (each element takes at
/// least one byte); this bound keeps a vector of zero-sized elements from
/// turning a tiny frame into billions of iterations.
pub const MAX_ZERO_SIZED_ELEMENTS: usize = 1 << 16;

/// A value with a section-3 encoding that can be written into a body.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no Ternio field encoding",
    label = "this type cannot be a packet field",
    note = "fields may be integers, f32, f64, bool, String, Bytes, Vec<T>, Option<T>, [T; N], or a type with #[derive(Packet)] or #[derive(Codec)]"
)]
pub trait Encode {
    /// Appends the encoding of `self` to `out`.
    fn encode(&self, out: &mut BytesMut);

    /// The exact number of bytes [`encode`](Self::encode) writes.
    fn encoded_len(&self) -> usize;

    /// Appends the elements of a slice one after the other; byte types
    /// override it to copy the slice at once.
    #[doc(hidden)]
    fn encode_slice(items: &[Self], out: &mut BytesMut)
    where
        Self: Sized,
    {
        for item in items {
            item.encode(out);
        }
    }
}

/// A value with a section-3 encoding that can be read from a body.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no Ternio field decoding",
    label = "this type cannot be a packet field",
    note = "fields may be integers, f32, f64, bool, String, Bytes, Vec<T>, Option<T>, [T; N], or a type with #[derive(Packet)] or #[derive(Codec)]"
)]
pub trait Decode: Sized {
    /// The fewest bytes any value of this type encodes to; lets a decoder
    /// reject an impossible element count before reading or allocating.
    const MIN_LEN: usize;

    /// Reads one value from the front of `reader`.
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// Describes the type for the schema (docs/SCHEMA.md), adding the
    /// structs and enums it uses to `schema`. The derives generate it; a
    /// hand-written encoding is [`TypeRef::Opaque`]
    /// unless it says more.
    fn describe(schema: &mut crate::schema::SchemaBuilder) -> crate::schema::TypeRef {
        let _ = schema;
        crate::schema::TypeRef::Opaque(std::any::type_name::<Self>())
    }

    /// Reads `count` values into a vector; byte types override it to take
    /// the slice at once.
    #[doc(hidden)]
    fn decode_vec(reader: &mut Reader<'_>, count: usize) -> Result<Vec<Self>, DecodeError> {
        let mut items = Vec::with_capacity(count.min(reader.remaining()));
        for _ in 0..count {
            items.push(Self::decode(reader)?);
        }
        Ok(items)
    }

    /// Reads `N` values into an array; byte types override it to copy the
    /// slice at once.
    #[doc(hidden)]
    fn decode_array<const N: usize>(reader: &mut Reader<'_>) -> Result<[Self; N], DecodeError> {
        let mut error = None;
        let items: [Option<Self>; N] = std::array::from_fn(|_| {
            if error.is_some() {
                return None;
            }
            Self::decode(reader).map_err(|e| error = Some(e)).ok()
        });
        match error {
            Some(error) => Err(error),
            None => Ok(items.map(|item| item.expect("every element decoded"))),
        }
    }

    /// Decodes a whole body: the value and nothing after it, at most
    /// [`DEFAULT_MAX_DEPTH`] levels deep.
    fn decode_body(body: &Bytes) -> Result<Self, DecodeError> {
        Self::decode_body_within(body, DEFAULT_MAX_DEPTH)
    }

    /// Decodes a whole body, at most `max_depth` nested `Box` or `Vec`
    /// levels deep ([`Reader::nested`]).
    fn decode_body_within(body: &Bytes, max_depth: usize) -> Result<Self, DecodeError> {
        let mut reader = Reader::with_max_depth(body, max_depth);
        let value = Self::decode(&mut reader)?;
        reader.finish()?;
        Ok(value)
    }
}

/// A cursor over a frame body. [`Bytes`] fields are read as views of the
/// body, so decoding them copies nothing.
#[derive(Debug)]
pub struct Reader<'a> {
    body: &'a Bytes,
    pos: usize,
    /// Where the value ends: the body's length, or the end of one item of
    /// a batch ([`within`](Self::within)).
    end: usize,
    depth: usize,
    max_depth: usize,
}

/// How many nested `Box` or `Vec` levels a body may hold unless its packet
/// type says otherwise (`#[packet(max_depth = N)]`): recursive types
/// (`enum Node { End, More(Box<Node>) }`) would otherwise let a peer make
/// the decoder recurse until the stack overflows.
pub const DEFAULT_MAX_DEPTH: usize = 64;

impl<'a> Reader<'a> {
    /// A reader at the start of `body`, with the default depth limit.
    pub const fn new(body: &'a Bytes) -> Self {
        Self::with_max_depth(body, DEFAULT_MAX_DEPTH)
    }

    /// A reader of `body[range]` only (one item of a batch, without a view
    /// of its own), at most `max_depth` levels deep; [`Bytes`] fields are
    /// views of `body`.
    ///
    /// # Panics
    ///
    /// When `range` is not within `body`.
    #[inline]
    pub fn within(body: &'a Bytes, range: std::ops::Range<usize>, max_depth: usize) -> Self {
        assert!(
            range.start <= range.end && range.end <= body.len(),
            "a range within the body"
        );
        Self {
            body,
            pos: range.start,
            end: range.end,
            depth: 0,
            max_depth,
        }
    }

    /// A reader at the start of `body` that refuses values more than
    /// `max_depth` nested `Box` or `Vec` levels deep.
    pub const fn with_max_depth(body: &'a Bytes, max_depth: usize) -> Self {
        Self {
            body,
            pos: 0,
            end: body.len(),
            depth: 0,
            max_depth,
        }
    }

    /// Runs `decode` one level deeper: [`DecodeError::TooDeep`] past the
    /// reader's limit. `Box` and `Vec` decode through it, so every cycle of
    /// a recursive type is counted.
    pub fn nested<T>(
        &mut self,
        decode: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        if self.depth >= self.max_depth {
            return Err(DecodeError::TooDeep(self.max_depth));
        }
        self.depth += 1;
        let value = decode(self);
        self.depth -= 1;
        value
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.end - self.pos
    }

    /// Succeeds when every byte was read; otherwise [`DecodeError::TrailingBytes`].
    #[inline]
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    /// The next `n` bytes as a slice.
    #[inline]
    pub fn read_slice(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.remaining();
        if n > remaining {
            return Err(DecodeError::UnexpectedEnd {
                needed: n - remaining,
            });
        }
        let body: &'a Bytes = self.body;
        let slice = &body[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// The next `n` bytes as a view of the body (no copy).
    pub fn read_bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        let start = self.pos;
        self.read_slice(n)?;
        Ok(self.body.slice(start..start + n))
    }

    /// The rest of the body as a view (no copy).
    pub fn read_rest(&mut self) -> Bytes {
        let rest = self.body.slice(self.pos..self.end);
        self.pos = self.end;
        rest
    }

    /// The next `N` bytes as an array.
    #[inline]
    pub fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let slice = self.read_slice(N)?;
        let mut array = [0; N];
        array.copy_from_slice(slice);
        Ok(array)
    }

    /// A varint (unsigned LEB128, at most 5 bytes, at most `u32::MAX`).
    #[inline]
    pub fn read_varint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..MAX_VARINT_LEN {
            let byte = self.read_array::<1>()?[0];
            value |= u64::from(byte & 0x7F) << (7 * i);
            if byte & 0x80 == 0 {
                return u32::try_from(value).map_err(|_| DecodeError::InvalidVarint);
            }
        }
        Err(DecodeError::InvalidVarint)
    }

    /// A varint length of a byte string, checked against the bytes left.
    pub fn read_len(&mut self) -> Result<usize, DecodeError> {
        let len = self.read_varint()? as usize;
        let remaining = self.remaining();
        if len > remaining {
            return Err(DecodeError::LengthTooLarge { len, remaining });
        }
        Ok(len)
    }

    /// A varint element count of a vector of `T`, checked against the bytes
    /// left (each element needs at least `T::MIN_LEN` of them).
    pub fn read_count<T: Decode>(&mut self) -> Result<usize, DecodeError> {
        let count = self.read_varint()? as usize;
        let remaining = self.remaining();
        let fits = match T::MIN_LEN {
            0 => count <= MAX_ZERO_SIZED_ELEMENTS,
            min => count <= remaining / min,
        };
        if !fits {
            return Err(DecodeError::LengthTooLarge {
                len: count,
                remaining,
            });
        }
        Ok(count)
    }
}

/// The number of bytes the varint of `value` takes.
pub const fn varint_len(value: u32) -> usize {
    match value {
        0..=0x7F => 1,
        0x80..=0x3FFF => 2,
        0x4000..=0x1F_FFFF => 3,
        0x20_0000..=0x0FFF_FFFF => 4,
        _ => 5,
    }
}

/// Appends `value` as a varint.
pub fn put_varint(out: &mut BytesMut, value: u32) {
    write_varint(out, value);
}

/// Writes `value` as a varint into `out` (a buffer, or a slice that has
/// room for it).
#[inline]
pub(crate) fn write_varint(out: &mut impl BufMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Appends a length or count as a varint.
///
/// # Panics
///
/// When `len` exceeds `u32::MAX`: no frame can carry such a value.
pub fn put_len(out: &mut BytesMut, len: usize) {
    put_varint(out, len_u32(len));
}

/// The varint size of a length or count.
pub fn len_varint_len(len: usize) -> usize {
    varint_len(len_u32(len))
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).expect("a length above u32::MAX cannot be encoded")
}

macro_rules! fixed_width {
    ($($ty:ty => $put:ident),* $(,)?) => {$(
        impl Encode for $ty {
            #[inline]
            fn encode(&self, out: &mut BytesMut) {
                out.$put(*self);
            }
            #[inline]
            fn encoded_len(&self) -> usize {
                std::mem::size_of::<$ty>()
            }
        }

        impl Decode for $ty {
            const MIN_LEN: usize = std::mem::size_of::<$ty>();
            fn describe(_: &mut SchemaBuilder) -> TypeRef {
                TypeRef::Builtin(stringify!($ty))
            }
            #[inline]
            fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(<$ty>::from_le_bytes(reader.read_array()?))
            }
        }
    )*};
}

fixed_width! {
    i8 => put_i8,
    u16 => put_u16_le,
    i16 => put_i16_le,
    u32 => put_u32_le,
    i32 => put_i32_le,
    u64 => put_u64_le,
    i64 => put_i64_le,
    f32 => put_f32_le,
    f64 => put_f64_le,
}

impl Encode for u8 {
    #[inline]
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(*self);
    }
    #[inline]
    fn encoded_len(&self) -> usize {
        1
    }
    #[inline]
    fn encode_slice(items: &[Self], out: &mut BytesMut) {
        out.put_slice(items);
    }
}

impl Decode for u8 {
    const MIN_LEN: usize = 1;
    fn describe(_: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Builtin("u8")
    }
    #[inline]
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(reader.read_array::<1>()?[0])
    }
    fn decode_vec(reader: &mut Reader<'_>, count: usize) -> Result<Vec<Self>, DecodeError> {
        Ok(reader.read_slice(count)?.to_vec())
    }
    fn decode_array<const N: usize>(reader: &mut Reader<'_>) -> Result<[Self; N], DecodeError> {
        reader.read_array()
    }
}

impl Encode for bool {
    #[inline]
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(u8::from(*self));
    }
    #[inline]
    fn encoded_len(&self) -> usize {
        1
    }
}

impl Decode for bool {
    const MIN_LEN: usize = 1;
    fn describe(_: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Builtin("bool")
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match u8::decode(reader)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(DecodeError::InvalidBool(other)),
        }
    }
}

impl Encode for () {
    fn encode(&self, _out: &mut BytesMut) {}
    fn encoded_len(&self) -> usize {
        0
    }
}

impl Decode for () {
    const MIN_LEN: usize = 0;
    fn describe(_: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Builtin("unit")
    }
    fn decode(_reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(())
    }
}

impl Encode for str {
    fn encode(&self, out: &mut BytesMut) {
        put_len(out, self.len());
        out.put_slice(self.as_bytes());
    }
    fn encoded_len(&self) -> usize {
        len_varint_len(self.len()) + self.len()
    }
}

impl Encode for String {
    fn encode(&self, out: &mut BytesMut) {
        self.as_str().encode(out);
    }
    fn encoded_len(&self) -> usize {
        self.as_str().encoded_len()
    }
}

impl Decode for String {
    const MIN_LEN: usize = 1;
    fn describe(_: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Builtin("string")
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = reader.read_len()?;
        let bytes = reader.read_slice(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::InvalidUtf8)
    }
}

impl Encode for Bytes {
    fn encode(&self, out: &mut BytesMut) {
        put_len(out, self.len());
        out.put_slice(self);
    }
    fn encoded_len(&self) -> usize {
        len_varint_len(self.len()) + self.len()
    }
}

impl Decode for Bytes {
    const MIN_LEN: usize = 1;
    fn describe(_: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Builtin("bytes")
    }
    /// Reads a view of the body: no copy.
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = reader.read_len()?;
        reader.read_bytes(len)
    }
}

impl<T: Encode> Encode for [T] {
    fn encode(&self, out: &mut BytesMut) {
        put_len(out, self.len());
        T::encode_slice(self, out);
    }
    fn encoded_len(&self) -> usize {
        len_varint_len(self.len()) + self.iter().map(Encode::encoded_len).sum::<usize>()
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, out: &mut BytesMut) {
        self.as_slice().encode(out);
    }
    fn encoded_len(&self) -> usize {
        self.as_slice().encoded_len()
    }
}

impl<T: Decode> Decode for Vec<T> {
    const MIN_LEN: usize = 1;
    fn describe(schema: &mut SchemaBuilder) -> TypeRef {
        TypeRef::List(Box::new(T::describe(schema)))
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = reader.read_count::<T>()?;
        reader.nested(|reader| T::decode_vec(reader, count))
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            None => out.put_u8(0),
            Some(value) => {
                out.put_u8(1);
                value.encode(out);
            }
        }
    }
    fn encoded_len(&self) -> usize {
        1 + self.as_ref().map_or(0, Encode::encoded_len)
    }
}

impl<T: Decode> Decode for Option<T> {
    const MIN_LEN: usize = 1;
    fn describe(schema: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Optional(Box::new(T::describe(schema)))
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match u8::decode(reader)? {
            0 => Ok(None),
            1 => T::decode(reader).map(Some),
            other => Err(DecodeError::InvalidOptionTag(other)),
        }
    }
}

impl<T: Encode, const N: usize> Encode for [T; N] {
    #[inline]
    fn encode(&self, out: &mut BytesMut) {
        T::encode_slice(self, out);
    }
    #[inline]
    fn encoded_len(&self) -> usize {
        self.iter().map(Encode::encoded_len).sum()
    }
}

impl<T: Decode, const N: usize> Decode for [T; N] {
    const MIN_LEN: usize = T::MIN_LEN * N;
    fn describe(schema: &mut SchemaBuilder) -> TypeRef {
        TypeRef::Array(Box::new(T::describe(schema)), N)
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        T::decode_array(reader)
    }
}

impl<T: Encode + ?Sized> Encode for Box<T> {
    fn encode(&self, out: &mut BytesMut) {
        (**self).encode(out);
    }
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
}

impl<T: Decode> Decode for Box<T> {
    const MIN_LEN: usize = T::MIN_LEN;
    fn describe(schema: &mut SchemaBuilder) -> TypeRef {
        T::describe(schema)
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader.nested(T::decode).map(Box::new)
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, out: &mut BytesMut) {
        (**self).encode(out);
    }
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded<T: Encode + ?Sized>(value: &T) -> Vec<u8> {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(out.len(), value.encoded_len());
        out.to_vec()
    }

    #[test]
    fn varints_follow_leb128() {
        assert_eq!(encoded(&Bytes::from_static(&[])), [0]);
        let mut out = BytesMut::new();
        put_varint(&mut out, 300);
        assert_eq!(&out[..], [0xAC, 0x02]);
        out.clear();
        put_varint(&mut out, u32::MAX);
        assert_eq!(&out[..], [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
        let body = Bytes::from_static(&[0xFF, 0xFF, 0xFF, 0xFF, 0x1F]);
        assert_eq!(
            Reader::new(&body).read_varint(),
            Err(DecodeError::InvalidVarint)
        );
        let body = Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]);
        assert_eq!(
            Reader::new(&body).read_varint(),
            Err(DecodeError::InvalidVarint)
        );
    }

    #[test]
    fn scalars_are_little_endian() {
        assert_eq!(encoded(&0x0102_0304u32), [4, 3, 2, 1]);
        assert_eq!(encoded(&-2i16), [0xFE, 0xFF]);
        assert_eq!(encoded(&1.0f32), [0, 0, 0x80, 0x3F]);
        assert_eq!(encoded(&true), [1]);
        assert_eq!(encoded("hé"), [3, b'h', 0xC3, 0xA9]);
        assert_eq!(encoded(&Some(7u8)), [1, 7]);
        assert_eq!(encoded(&[1u16, 2]), [1, 0, 2, 0]);
        assert_eq!(encoded(&vec![1u16, 2]), [2, 1, 0, 2, 0]);
    }

    #[test]
    fn invalid_values_are_rejected() {
        let body = Bytes::from_static(&[2]);
        assert_eq!(bool::decode_body(&body), Err(DecodeError::InvalidBool(2)));
        assert_eq!(
            Option::<u8>::decode_body(&body),
            Err(DecodeError::InvalidOptionTag(2))
        );
        let body = Bytes::from_static(&[2, 0xC3, 0x28]);
        assert_eq!(String::decode_body(&body), Err(DecodeError::InvalidUtf8));
        let body = Bytes::from_static(&[1, 1, 9]);
        assert_eq!(u16::decode_body(&body), Err(DecodeError::TrailingBytes(1)));
        // A count that cannot fit is refused before any element is read.
        let body = Bytes::from_static(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 2]);
        assert!(matches!(
            Vec::<u32>::decode_body(&body),
            Err(DecodeError::LengthTooLarge { .. })
        ));
        assert!(matches!(
            Vec::<()>::decode_body(&body),
            Err(DecodeError::LengthTooLarge { .. })
        ));
    }

    #[test]
    fn bytes_fields_are_views_of_the_body() {
        let body = Bytes::from(vec![3, 1, 2, 3]);
        let field = Bytes::decode_body(&body).unwrap();
        assert_eq!(&field[..], [1, 2, 3]);
        assert_eq!(field.as_ptr(), body[1..].as_ptr());
    }
}
