use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0001)]
struct Envelope<T> {
    inner: T,
}

fn main() {}
