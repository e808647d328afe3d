//! A process group in one program: four members broadcast the caller's bytes to each other,
//! one member crashes, the others go on.
//!
//! Run with `cargo run --example group` (in-process queues) or
//! `cargo run --example group -- udp` (one UDP socket per member on 127.0.0.1).

use std::time::Duration;

use ftcoll::group::{Event, Group, GroupError};
use ftcoll::runtime::TransportKind;

fn main() -> Result<(), GroupError> {
    let kind = match std::env::args().nth(1).as_deref() {
        Some("udp") => TransportKind::Udp,
        _ => TransportKind::Inproc,
    };
    let mut group = Group::builder(4).transport(kind).build()?;
    println!("a group of {} members over {kind:?}", group.size());
    let messages: [(u32, &[u8]); 3] = [(0, b"hello from 0"), (2, b"hello from 2"), (1, b"hello from 1")];
    for (i, (root, text)) in messages.into_iter().enumerate() {
        if i == 2 {
            group.kill(3)?;
        }
        let seq = group.broadcast(root, text)?;
        while let Some(ev) = group.next_event(Duration::from_secs(10)) {
            match ev {
                Event::Delivered {
                    member,
                    root,
                    seq,
                    bytes,
                } => println!(
                    "member {member} delivered broadcast {seq} of member {root}: {:?}",
                    String::from_utf8_lossy(&bytes)
                ),
                Event::Failed { rank } => println!("member {rank} crashed"),
                Event::Completed { seq: s, timed_out, .. } if s == seq => {
                    println!("broadcast {seq} is over{}", if timed_out { " (timed out)" } else { "" });
                    break;
                }
                Event::Completed { .. } => {}
            }
        }
    }
    Ok(())
}
