//! Property tests of the section-3 field encoding and of the frame decoder.
//!
//! For every field type, and for derived structs, enums and packets made of
//! them: a value encodes to exactly `encoded_len` bytes, at least `MIN_LEN`,
//! decodes back to the same bits, and no strict prefix of its encoding
//! decodes (each fails with `UnexpectedEnd` or `LengthTooLarge`). Floats are
//! compared by their bits, so NaN payloads count. Random bytes never make a
//! decoder panic, and the `FrameDecoder` yields the same frames whatever
//! chunks a stream arrives in.

use std::fmt::Debug;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use ternio_macros::{Codec, Packet};
use ternio_protocol::frame::{LENGTH_PREFIX_LEN, write_frame};
use ternio_protocol::{
    Bytes, BytesMut, Decode, DecodeError, Encode, Flags, Frame, FrameDecoder, FrameError, Framing,
    HEADER_LEN, Header, Packet as _,
};

// ---------------------------------------------------------------------------
// Derived types
// ---------------------------------------------------------------------------

/// A nested struct with no opcode.
#[derive(Codec, Debug, Clone)]
struct Point {
    x: i32,
    y: f32,
    label: Option<String>,
}

/// An enum with unit, tuple and named variants.
#[derive(Codec, Debug, Clone)]
enum Shape {
    Empty,
    Circle(f64),
    Rect { width: u16, height: u16 },
    Polygon(Vec<Point>, bool),
}

/// A tuple struct and a unit struct, nested.
#[derive(Codec, Debug, Clone)]
struct Pair(u8, String);

#[derive(Codec, Debug, Clone, PartialEq)]
struct Marker;

/// A packet holding every field type of section 3.
#[derive(Packet, Debug, Clone)]
#[packet(opcode = 0x0100)]
struct Everything {
    a_u8: u8,
    a_i8: i8,
    a_u16: u16,
    a_i16: i16,
    a_u32: u32,
    a_i32: i32,
    a_u64: u64,
    a_i64: i64,
    a_f32: f32,
    a_f64: f64,
    a_bool: bool,
    text: String,
    blob: Bytes,
    raw: Vec<u8>,
    numbers: Vec<u32>,
    words: Vec<String>,
    maybe_words: Vec<Option<String>>,
    points: Vec<Point>,
    shapes: Vec<Shape>,
    markers: Vec<Marker>,
    maybe: Option<i64>,
    maybe_point: Option<Point>,
    nested_option: Option<Option<u8>>,
    grid: [i16; 4],
    names: [String; 2],
    corners: [Point; 2],
    pair: Pair,
    marker: Marker,
    shape: Shape,
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

/// Every f32 bit pattern, NaNs and infinities included.
fn f32s() -> impl Strategy<Value = f32> {
    any::<u32>().prop_map(f32::from_bits)
}

/// Every f64 bit pattern.
fn f64s() -> impl Strategy<Value = f64> {
    any::<u64>().prop_map(f64::from_bits)
}

/// Strings of any Unicode, sometimes longer than 127 bytes (two-byte lengths).
fn strings() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        1 => "\\PC{100,200}",
    ]
}

/// Byte strings up to 300 bytes (one- and two-byte lengths).
fn byte_vecs() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..300)
}

fn bytes() -> impl Strategy<Value = Bytes> {
    byte_vecs().prop_map(Bytes::from)
}

fn points() -> impl Strategy<Value = Point> {
    (any::<i32>(), f32s(), option::of(strings())).prop_map(|(x, y, label)| Point { x, y, label })
}

fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Empty),
        f64s().prop_map(Shape::Circle),
        (any::<u16>(), any::<u16>()).prop_map(|(width, height)| Shape::Rect { width, height }),
        (vec(points(), 0..4), any::<bool>())
            .prop_map(|(points, closed)| Shape::Polygon(points, closed)),
    ]
}

fn pairs() -> impl Strategy<Value = Pair> {
    (any::<u8>(), strings()).prop_map(|(n, s)| Pair(n, s))
}

prop_compose! {
    fn everything()(
        ints in (
            any::<u8>(), any::<i8>(), any::<u16>(), any::<i16>(),
            any::<u32>(), any::<i32>(), any::<u64>(), any::<i64>(),
        ),
        scalars in (f32s(), f64s(), any::<bool>(), strings(), bytes(), byte_vecs()),
        vectors in (
            vec(any::<u32>(), 0..20),
            vec(strings(), 0..4),
            vec(option::of(strings()), 0..4),
            vec(points(), 0..4),
            vec(shapes(), 0..4),
            vec(Just(Marker), 0..200),
        ),
        options in (option::of(any::<i64>()), option::of(points()), option::of(option::of(any::<u8>()))),
        arrays in (any::<[i16; 4]>(), [strings(), strings()], [points(), points()]),
        nested in (pairs(), shapes()),
    ) -> Everything {
        let (a_u8, a_i8, a_u16, a_i16, a_u32, a_i32, a_u64, a_i64) = ints;
        let (a_f32, a_f64, a_bool, text, blob, raw) = scalars;
        let (numbers, words, maybe_words, points, shapes, markers) = vectors;
        let (maybe, maybe_point, nested_option) = options;
        let (grid, names, corners) = arrays;
        let (pair, shape) = nested;
        Everything {
            a_u8, a_i8, a_u16, a_i16, a_u32, a_i32, a_u64, a_i64, a_f32, a_f64, a_bool,
            text, blob, raw, numbers, words, maybe_words, points, shapes, markers,
            maybe, maybe_point, nested_option, grid, names, corners, pair, marker: Marker, shape,
        }
    }
}

// ---------------------------------------------------------------------------
// The round-trip property
// ---------------------------------------------------------------------------

fn encode<T: Encode + ?Sized>(value: &T) -> Bytes {
    let mut out = BytesMut::new();
    value.encode(&mut out);
    out.freeze()
}

/// Checks the round trip of `value` and returns the decoded value.
///
/// Decoding must give back a value that encodes to the very same bytes (a
/// bit-exact comparison that holds for NaN), `encoded_len` must be the
/// number of bytes written and at least `MIN_LEN`, and every strict prefix
/// of the encoding must be refused as too short.
fn round_trip<T: Encode + Decode + Debug>(value: &T) -> Result<T, TestCaseError> {
    let body = encode(value);
    prop_assert_eq!(
        body.len(),
        value.encoded_len(),
        "encoded_len of {:?}",
        value
    );
    prop_assert!(
        body.len() >= T::MIN_LEN,
        "{} bytes is below MIN_LEN {} for {:?}",
        body.len(),
        T::MIN_LEN,
        value
    );
    let decoded = T::decode_body(&body)
        .map_err(|error| TestCaseError::fail(format!("{value:?} does not decode: {error}")))?;
    prop_assert_eq!(encode(&decoded), body.clone(), "re-encoding of {:?}", value);
    for cut in 0..body.len() {
        match T::decode_body(&body.slice(..cut)) {
            Err(DecodeError::UnexpectedEnd { .. } | DecodeError::LengthTooLarge { .. }) => {}
            other => prop_assert!(
                false,
                "the {cut}-byte prefix of a {}-byte encoding gave {other:?}",
                body.len()
            ),
        }
    }
    Ok(decoded)
}

/// The round trip of a type that compares with `==`.
fn round_trip_eq<T: Encode + Decode + Debug + PartialEq>(value: &T) -> Result<(), TestCaseError> {
    let decoded = round_trip(value)?;
    prop_assert_eq!(&decoded, value);
    Ok(())
}

proptest! {
    #[test]
    fn integers_round_trip(
        a in any::<u8>(), b in any::<i8>(), c in any::<u16>(), d in any::<i16>(),
        e in any::<u32>(), f in any::<i32>(), g in any::<u64>(), h in any::<i64>(),
    ) {
        round_trip_eq(&a)?;
        round_trip_eq(&b)?;
        round_trip_eq(&c)?;
        round_trip_eq(&d)?;
        round_trip_eq(&e)?;
        round_trip_eq(&f)?;
        round_trip_eq(&g)?;
        round_trip_eq(&h)?;
        // Fixed width, little-endian.
        prop_assert_eq!(&encode(&e)[..], &e.to_le_bytes()[..]);
        prop_assert_eq!(&encode(&h)[..], &h.to_le_bytes()[..]);
    }

    #[test]
    fn floats_round_trip_bit_for_bit(a in f32s(), b in f64s()) {
        prop_assert_eq!(round_trip(&a)?.to_bits(), a.to_bits());
        prop_assert_eq!(round_trip(&b)?.to_bits(), b.to_bits());
        prop_assert_eq!(&encode(&a)[..], &a.to_bits().to_le_bytes()[..]);
    }

    #[test]
    fn bools_round_trip_and_other_bytes_are_refused(value in any::<bool>(), byte in 2u8..) {
        round_trip_eq(&value)?;
        prop_assert_eq!(
            bool::decode_body(&Bytes::from(vec![byte])),
            Err(DecodeError::InvalidBool(byte))
        );
    }

    #[test]
    fn strings_and_byte_strings_round_trip(text in strings(), blob in bytes(), raw in byte_vecs()) {
        round_trip_eq(&text)?;
        round_trip_eq(&blob)?;
        round_trip_eq(&raw)?;
        // `Bytes` and `Vec<u8>` share one encoding.
        prop_assert_eq!(encode(&raw), encode(&Bytes::from(raw.clone())));
    }

    #[test]
    fn vectors_round_trip(
        numbers in vec(any::<i16>(), 0..100),
        flags in vec(any::<bool>(), 0..20),
        words in vec(strings(), 0..5),
        arrays in vec(any::<[u8; 3]>(), 0..10),
        nested in vec(vec(any::<u64>(), 0..4), 0..4),
        units in vec(Just(()), 0..300),
        floats in vec(f64s(), 0..10),
    ) {
        round_trip_eq(&numbers)?;
        round_trip_eq(&flags)?;
        round_trip_eq(&words)?;
        round_trip_eq(&arrays)?;
        round_trip_eq(&nested)?;
        round_trip_eq(&units)?;
        let decoded = round_trip(&floats)?;
        prop_assert_eq!(
            decoded.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn options_round_trip(
        number in option::of(any::<u32>()),
        text in option::of(strings()),
        nested in option::of(option::of(any::<bool>())),
        list in option::of(vec(any::<u8>(), 0..10)),
    ) {
        round_trip_eq(&number)?;
        round_trip_eq(&text)?;
        round_trip_eq(&nested)?;
        round_trip_eq(&list)?;
    }

    #[test]
    fn arrays_round_trip(
        small in any::<[u8; 4]>(),
        wide in any::<[i64; 3]>(),
        words in [strings(), strings(), strings()],
        options in [option::of(any::<u16>()), option::of(any::<u16>())],
    ) {
        round_trip_eq(&small)?;
        round_trip_eq(&wide)?;
        round_trip_eq(&words)?;
        round_trip_eq(&options)?;
        round_trip_eq(&[0u32; 0])?;
        // No length in front.
        prop_assert_eq!(&encode(&small)[..], &small[..]);
    }

    #[test]
    fn derived_structs_and_enums_round_trip(point in points(), shape in shapes(), pair in pairs()) {
        round_trip(&point)?;
        round_trip(&shape)?;
        round_trip(&pair)?;
        round_trip_eq(&Marker)?;
        // A struct is its fields in order, with nothing in between.
        let mut fields = BytesMut::new();
        point.x.encode(&mut fields);
        point.y.encode(&mut fields);
        point.label.encode(&mut fields);
        prop_assert_eq!(encode(&point), fields.freeze());
    }

    #[test]
    fn the_packet_with_every_field_type_round_trips(value in everything()) {
        prop_assert_eq!(Everything::OPCODE, 0x0100);
        round_trip(&value)?;
    }

    #[test]
    fn mutated_bodies_never_panic(
        value in everything(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut body = encode(&value).to_vec();
        for (at, byte) in edits {
            let at = at.index(body.len());
            body[at] = byte;
        }
        decode_any::<Everything>(&Bytes::from(body.clone()))?;
        let cut = cut.index(body.len() + 1);
        decode_any::<Everything>(&Bytes::from(body[..cut].to_vec()))?;
    }

    #[test]
    fn random_bodies_never_panic(body in vec(any::<u8>(), 0..512)) {
        let body = Bytes::from(body);
        decode_any::<Everything>(&body)?;
        decode_any::<Shape>(&body)?;
        decode_any::<Point>(&body)?;
        decode_any::<Vec<Shape>>(&body)?;
        decode_any::<Vec<String>>(&body)?;
        decode_any::<Vec<()>>(&body)?;
        decode_any::<Option<[u16; 3]>>(&body)?;
    }

    #[test]
    fn the_frame_decoder_ignores_how_the_stream_is_cut(
        frames in vec(frames(), 0..8),
        cuts in vec(1usize..64, 1..40),
    ) {
        let stream = stream_of(&frames);
        let expected: Vec<Frame> = frames
            .iter()
            .map(|(header, body)| Frame { header: *header, body: body.clone() })
            .collect();
        // All at once.
        prop_assert_eq!(decode_stream(&stream, &[stream.len().max(1)]), Ok(expected.clone()));
        // In the chunks given, then one byte at a time.
        prop_assert_eq!(decode_stream(&stream, &cuts), Ok(expected.clone()));
        prop_assert_eq!(decode_stream(&stream, &[1]), Ok(expected));
    }

    #[test]
    fn random_streams_never_panic_the_frame_decoder(
        stream in vec(any::<u8>(), 0..512),
        cuts in vec(1usize..64, 1..20),
        max in prop_oneof![Just(64usize), Just(1024 * 1024)],
    ) {
        let mut decoder = FrameDecoder::new(max);
        let mut buf = BytesMut::new();
        'feed: for chunk in chunks(&stream, &cuts) {
            buf.extend_from_slice(chunk);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(frame)) => {
                        prop_assert!(frame.body.len() + HEADER_LEN <= max);
                        prop_assert_eq!(frame.header.flags.bits() & !0x07, 0);
                    }
                    Ok(None) => break,
                    // Any error ends the stream: the connection would close.
                    Err(_) => {
                        break 'feed;
                    }
                }
            }
        }
    }
}

/// Decodes `body` as `T`; when that succeeds, the value must survive its own
/// round trip (the input itself need not be canonical: varints may be
/// overlong).
fn decode_any<T: Encode + Decode + Debug>(body: &Bytes) -> Result<(), TestCaseError> {
    if let Ok(value) = T::decode_body(body) {
        prop_assert!(value.encoded_len() <= body.len());
        round_trip(&value)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------

fn frames() -> impl Strategy<Value = (Header, Bytes)> {
    (
        any::<u16>(),
        0u8..8,
        any::<u32>(),
        prop_oneof![Just(Vec::new()), vec(any::<u8>(), 0..200)],
    )
        .prop_map(|(opcode, flags, request_id, body)| {
            let flags = Flags::from_bits(flags).expect("bits 0 to 2 are flags");
            (Header::new(opcode, flags, request_id), Bytes::from(body))
        })
}

/// The length-prefixed stream of `frames`, written by hand from section 1.1
/// and checked against `write_frame`.
fn stream_of(frames: &[(Header, Bytes)]) -> Bytes {
    let mut by_hand = Vec::new();
    let mut written = BytesMut::new();
    for (header, body) in frames {
        let len = u32::try_from(HEADER_LEN + body.len()).unwrap();
        by_hand.extend_from_slice(&len.to_le_bytes());
        by_hand.extend_from_slice(&header.opcode.to_le_bytes());
        by_hand.push(header.flags.bits());
        by_hand.extend_from_slice(&header.request_id.to_le_bytes());
        by_hand.extend_from_slice(body);
        let size = write_frame(
            &mut written,
            Framing::LengthPrefixed,
            *header,
            &RawBody(body),
            1 << 20,
        );
        assert_eq!(size, Ok(len as usize));
    }
    assert_eq!(&written[..], &by_hand[..]);
    assert_eq!(
        by_hand.len(),
        frames
            .iter()
            .map(|(_, body)| LENGTH_PREFIX_LEN + HEADER_LEN + body.len())
            .sum::<usize>()
    );
    Bytes::from(by_hand)
}

/// A body written as is, with no length in front.
struct RawBody<'a>(&'a [u8]);

impl Encode for RawBody<'_> {
    fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(self.0);
    }
    fn encoded_len(&self) -> usize {
        self.0.len()
    }
}

/// `stream` cut into pieces whose sizes cycle through `cuts`.
fn chunks<'a>(stream: &'a [u8], cuts: &'a [usize]) -> impl Iterator<Item = &'a [u8]> {
    let mut rest = stream;
    let mut sizes = cuts.iter().cycle();
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let size = (*sizes.next()?).min(rest.len());
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        Some(chunk)
    })
}

/// Feeds `stream` to a decoder in chunks and collects every frame.
fn decode_stream(stream: &[u8], cuts: &[usize]) -> Result<Vec<Frame>, FrameError> {
    let mut decoder = FrameDecoder::default();
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for chunk in chunks(stream, cuts) {
        buf.extend_from_slice(chunk);
        while let Some(frame) = decoder.decode(&mut buf)? {
            frames.push(frame);
        }
    }
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    Ok(frames)
}

mod depth {
    use bytes::Bytes;
    use ternio_macros::{Codec, Packet};
    use ternio_protocol::{DecodeError, Packet};

    /// A recursive type: each `More` is one `Box` level deeper.
    #[derive(Debug, Clone, PartialEq, Codec)]
    enum Node {
        End,
        More(Box<Node>),
    }

    #[derive(Debug, Clone, PartialEq, Packet)]
    #[packet(opcode = 0x0301)]
    struct Chain {
        node: Node,
    }

    #[derive(Debug, Clone, PartialEq, Packet)]
    #[packet(opcode = 0x0302, max_depth = 200)]
    struct LongChain {
        node: Node,
    }

    /// `levels` times `More`, then `End`.
    fn chain(levels: usize) -> Bytes {
        let mut body = vec![1u8; levels];
        body.push(0);
        Bytes::from(body)
    }

    #[test]
    fn a_body_nested_past_the_limit_is_refused_not_a_stack_overflow() {
        // 1 MiB of `More`: unbounded recursion would overflow the stack.
        let deep = Bytes::from(vec![1u8; 1024 * 1024]);
        assert_eq!(Chain::decode_packet(&deep), Err(DecodeError::TooDeep(64)));
        assert_eq!(
            LongChain::decode_packet(&deep),
            Err(DecodeError::TooDeep(200))
        );
        assert!(Chain::decode_packet(&chain(64)).is_ok());
        assert_eq!(
            Chain::decode_packet(&chain(65)),
            Err(DecodeError::TooDeep(64))
        );
        assert!(LongChain::decode_packet(&chain(200)).is_ok());
        assert_eq!(
            LongChain::decode_packet(&chain(201)),
            Err(DecodeError::TooDeep(200))
        );
    }

    #[test]
    fn vectors_count_as_levels_too() {
        #[derive(Debug, Clone, PartialEq, Codec)]
        struct Tree {
            children: Vec<Tree>,
        }
        #[derive(Debug, Clone, PartialEq, Packet)]
        #[packet(opcode = 0x0303)]
        struct Forest {
            tree: Tree,
        }
        // Each level: a count of 1, then the child.
        let deep = Bytes::from(vec![1u8; 100_000]);
        assert_eq!(Forest::decode_packet(&deep), Err(DecodeError::TooDeep(64)));
        let mut shallow = vec![1u8; 63];
        shallow.push(0);
        assert!(Forest::decode_packet(&Bytes::from(shallow)).is_ok());
    }
}
