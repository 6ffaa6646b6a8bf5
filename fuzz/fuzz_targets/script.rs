//! Reading a fuzz input as a script: bytes taken a few at a time, and frame
//! headers made of them (shared by the targets that drive a connection).

use ternio::protocol::frame::{Flags, Header};

/// The next `n` bytes of `input` (fewer at its end).
pub fn take<'a>(input: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(input.len());
    let (head, rest) = input.split_at(n);
    *input = rest;
    head
}

/// A header from the next 7 bytes: any opcode and id, known flags only.
pub fn header(input: &mut &[u8]) -> Header {
    let mut raw = [0u8; 7];
    let bytes = take(input, 7);
    raw[..bytes.len()].copy_from_slice(bytes);
    Header::new(
        u16::from_le_bytes([raw[0], raw[1]]),
        Flags::from_bits(raw[2] & 0x07).unwrap_or(Flags::NONE),
        u32::from_le_bytes([raw[3], raw[4], raw[5], raw[6]]),
    )
}

/// A body: a length byte, then up to that many bytes.
pub fn body<'a>(input: &mut &'a [u8]) -> &'a [u8] {
    let len = take(input, 1).first().copied().unwrap_or(0) as usize;
    take(input, len)
}
