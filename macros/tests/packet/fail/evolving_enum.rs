use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0001, evolving)]
enum Command {
    Stop,
    Go(u32),
}

fn main() {}
