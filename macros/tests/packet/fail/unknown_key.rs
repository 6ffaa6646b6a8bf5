use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0001, name = "join")]
struct Join {
    room: String,
}

fn main() {}
