use std::net::Ipv4Addr;

use super::*;
use crate::model::LogP;
use crate::topology::{Order, Tree, TreeKind};

fn addr(r: Rank) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, (r >> 8) as u8, r as u8), 4000 + r as u16)
}

/// `n` machines over an in-memory network, one phase per step (the messages of a step are
/// delivered, with the source address learned first, before the next); every `drop_every`-th
/// message is lost. Returns the machines and the outputs of each, in order.
fn run(n: u32, drop_every: u64, steps: u32) -> (Vec<BootMachine>, Vec<Vec<BootOutput>>) {
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, LogP::new(0, 1).unwrap()).unwrap();
    let mut ms: Vec<BootMachine> = (0..n)
        .map(|r| {
            let parent = tree.parent(r).map(|p| (p, addr(p)));
            BootMachine::new(r, n, addr(r), parent, tree.children(r).to_vec(), 10, 16)
        })
        .collect();
    let mut outs = vec![Vec::new(); n as usize];
    let mut sent = 0u64;
    for step in 0..steps {
        let now = Time::from(step) * 10;
        let mut wire = Vec::new();
        for (r, m) in ms.iter_mut().enumerate() {
            let Ok(()) = m.handle(now, Event::Timer);
            while let Some((to, msg)) = m.poll_transmit(now) {
                assert!(m.addrs()[to as usize].is_some(), "sent to an unknown address");
                sent += 1;
                if drop_every == 0 || !sent.is_multiple_of(drop_every) {
                    wire.push((r as Rank, to, msg));
                }
            }
        }
        for (from, to, msg) in wire {
            let m = &mut ms[to as usize];
            let Ok(()) = m.handle(now, Event::Input(Learn(from, addr(from))));
            let Ok(()) = m.handle(now, Event::Message { from, msg });
        }
        for (r, m) in ms.iter_mut().enumerate() {
            outs[r].extend(std::iter::from_fn(|| m.poll_output()));
        }
        if ms.iter().all(BootMachine::done) {
            break;
        }
    }
    (ms, outs)
}

#[test]
fn every_machine_gathers_the_whole_table() {
    for n in [2u32, 5, 8, 13, 32] {
        let (ms, outs) = run(n, 0, 2000);
        let want: Vec<Option<SocketAddrV4>> = (0..n).map(|r| Some(addr(r))).collect();
        for (r, m) in ms.iter().enumerate() {
            assert!(m.done(), "n={n} rank {r}");
            assert_eq!(m.addrs(), want.as_slice(), "n={n} rank {r}");
            let milestones: Vec<&BootOutput> = outs[r]
                .iter()
                .filter(|o| !matches!(o, BootOutput::Learned(..)))
                .collect();
            let at = |o: BootOutput| milestones.iter().position(|x| **x == o).unwrap();
            assert!(
                at(BootOutput::Ring) < at(BootOutput::Bmg),
                "n={n} rank {r}: {milestones:?}"
            );
            assert!(at(BootOutput::Bmg) < at(BootOutput::Gather), "n={n} rank {r}");
            assert_eq!(milestones.len(), 4, "n={n} rank {r}: {milestones:?}");
            // Every address learned was announced once (the own and the parent's were given).
            let learned = outs[r].iter().filter(|o| matches!(o, BootOutput::Learned(..))).count();
            let given = 1 + usize::from(r != 0);
            assert_eq!(learned, n as usize - given, "n={n} rank {r}");
        }
    }
}

#[test]
fn lost_messages_are_repaired() {
    let (ms, _) = run(12, 5, 20_000);
    assert!(ms.iter().all(BootMachine::done));
}

#[test]
fn a_child_says_hello_until_its_parent_answers() {
    let me = addr(1);
    let mut m = BootMachine::new(1, 2, me, Some((0, addr(0))), vec![], 10, 16);
    for now in [0, 10] {
        let Ok(()) = m.handle(now, Event::Timer);
        let sent: Vec<_> = std::iter::from_fn(|| m.poll_transmit(now)).collect();
        assert!(sent.contains(&(0, BootMsg::Hello)), "{sent:?}");
    }
    assert_eq!(m.poll_timeout(), Some(20));
    // Not yet due: nothing happens.
    let Ok(()) = m.handle(15, Event::Timer);
    assert_eq!(m.poll_transmit(15), None);
    let Ok(()) = m.handle(
        16,
        Event::Message {
            from: 0,
            msg: BootMsg::Hello,
        },
    );
    let Ok(()) = m.handle(20, Event::Timer);
    let sent: Vec<_> = std::iter::from_fn(|| m.poll_transmit(20)).collect();
    assert!(!sent.contains(&(0, BootMsg::Hello)), "{sent:?}");
}
