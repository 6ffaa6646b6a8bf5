use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0001)]
enum Mode {
    Idle,
    Busy = 5,
}

fn main() {}
