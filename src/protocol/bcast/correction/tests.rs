use super::*;

/// A participant that found no `f + 1` g-nodes floods SOS to every other rank exactly
/// once, even when correction messages reach it during the flood (they may start the
/// final round, which resets the correction offsets: not the flood's cursor).
#[test]
fn an_sos_flood_reaches_every_other_rank_once_whatever_arrives_meanwhile() {
    let n = 8;
    let p = CorrParams {
        kind: Correction::FailProof { f: 1 },
        first: Dir::Fwd,
        o: 1,
        delay: 0,
        sos_timeout: 100,
        idle_when_stopped: true,
    };
    for me in 0..n {
        let mut c = Corrector::<FAILPROOF_CAP>::new();
        c.colored_by_dissemination();
        c.start(&p, n, 0);
        let mut targets = Vec::new();
        for step in 0..10 * n {
            match c.poll(&p, me, n) {
                Action::Send { to, msg } if msg.kind == CorrKind::Sos => {
                    targets.push(to);
                    // Mid-flood, two g-nodes on each side make themselves known: f + 1
                    // on a side starts the final round (`check_final`).
                    if targets.len() == 2 {
                        let right = [((me + 1) % n, (me + 2) % n), ((me + n - 1) % n, (me + n - 2) % n)];
                        for ((from, beyond), dir) in right.into_iter().zip([Dir::Bwd, Dir::Fwd]) {
                            let m = CorrMsg {
                                dir,
                                kind: CorrKind::Normal,
                                known: Known::from_slice(&[from, beyond]).unwrap(),
                            };
                            c.on_message(&p, me, n, u64::from(step), from, &m);
                        }
                    }
                }
                Action::Wait if c.finished() => break,
                _ => {}
            }
        }
        targets.sort_unstable();
        let want: Vec<Rank> = (0..n).filter(|&r| r != me).collect();
        assert_eq!(targets, want, "rank {me}");
        assert!(c.delivered() && c.finished(), "rank {me}");
    }
}
