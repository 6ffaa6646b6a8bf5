use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0001)]
#[packet(opcode = 0x0002)]
struct Join {
    room: String,
}

fn main() {}
