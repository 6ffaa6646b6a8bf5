use ternio_macros::Codec;

#[derive(Codec)]
enum Event {
    Tick,
    Hit { damage: u32, at: std::time::Instant },
}

fn main() {}
