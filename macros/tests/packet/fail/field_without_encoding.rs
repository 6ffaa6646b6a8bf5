use ternio_macros::Packet;

struct Position {
    x: f32,
    y: f32,
}

#[derive(Packet)]
#[packet(opcode = 0x0001)]
struct Spawn {
    id: u32,
    at: Position,
}

fn main() {}
