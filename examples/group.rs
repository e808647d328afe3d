//! A process group in one program: four members broadcast the caller's bytes to each other,
//! one member crashes, the others go on and agree on a value and on who failed; then the
//! survivors run a closed-loop stream of 1000 broadcasts (what `ftcoll bench` measures).
//!
//! Run with `cargo run --example group` (in-process queues) or
//! `cargo run --example group -- udp` (one UDP socket per member on 127.0.0.1).

use std::time::Duration;

use ftcoll::group::{Event, Group, GroupError, Stream};
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
                Event::Completed { .. } | Event::Agreed { .. } | Event::RootMismatch { .. } => {}
            }
        }
    }
    // Every live member contributes a flag word; they agree on the AND and on who failed.
    let live: Vec<u32> = (0..group.size()).filter(|r| !group.is_dead(*r)).collect();
    for &m in &live {
        group.agree(m, !(1u64 << m))?;
    }
    let mut returned = 0;
    while returned < live.len() {
        match group.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed {
                member,
                id,
                value,
                failed,
            }) => {
                println!("member {member} returned from agreement {id}: value {value:#x}, failed {failed:?}");
                returned += 1;
            }
            Some(_) => {}
            None => {
                println!("the agreement did not return in time");
                break;
            }
        }
    }
    // 1000 broadcasts of 64 bytes, rooted in turn at members 0 and 1, 4 in flight, each
    // member checking every byte it receives.
    let res = group.stream(Stream {
        window: 4,
        roots: vec![0, 1],
        ..Stream::generated(1000, 64)
    })?;
    println!(
        "a stream of {} broadcasts: coloring p50 {:.1} us, {} violations, {} timed out",
        res.measured,
        res.coloring.value_at_quantile(0.5) as f64 / 1e3,
        res.violations,
        res.timeouts
    );
    Ok(())
}
