use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x1_0000)]
struct Big;

fn main() {}
