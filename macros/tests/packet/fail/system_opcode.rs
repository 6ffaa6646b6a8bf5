use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0xFF01)]
struct Handshake {
    pattern: u8,
}

fn main() {}
