//! The response type comes from the request: no annotation, and a bare
//! statement for an acknowledgement.

use std::time::Duration;

use ternio_client::{Client, ClientError, Packet};

#[derive(Packet)]
#[packet(opcode = 0x0010, response = Sum)]
struct Add {
    a: i32,
    b: i32,
}

#[derive(Packet)]
#[packet(opcode = 0x0011)]
struct Sum {
    total: i32,
}

#[derive(Packet)]
#[packet(opcode = 0x0020, response = ())]
struct Leave;

#[derive(Packet)]
#[packet(opcode = 0x0030)]
struct Undeclared;

#[allow(dead_code)]
async fn run(client: Client) -> Result<i32, ClientError> {
    let sum = client.request_async(&Add { a: 2, b: 3 }).await?;
    client.request_async(&Leave).await?;
    let later = client
        .request_with_timeout(&Add { a: sum.total, b: 1 }, Duration::from_secs(1))
        .await?;
    let sealed = client.request_sealed(&Add { a: 0, b: 0 }).await?;
    client.request_as::<()>(&Undeclared).await?;
    Ok(later.total + sealed.total)
}

fn main() {}
